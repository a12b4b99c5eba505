"""Per-op Python overhead of the mgsparse engine next to raw numpy doing the same arithmetic.

A chain of N small ops on a (size,) array, alternating y = y + c and y = y * d, is run
forward and backward twice: through `Tensor` (graph recording, Function dispatch,
topological walk) and as hand-written numpy (the forward, then the backward math
dy/dx = Π d by hand). Both are timed in the same run; each figure is the median of a few
repeats, reported as microseconds per op, and the engine/numpy ratio is the overhead.

    python benchmarks/engine_overhead.py [--ops 10000] [--size 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mgsparse import Tensor


def engine_chain(x0: np.ndarray, adds: list, muls: list) -> tuple[float, float, np.ndarray]:
    """Forward and backward seconds through the engine, and d(sum y)/dx."""
    x = Tensor(x0, requires_grad=True)
    start = time.perf_counter()
    y = x
    for c, d in zip(adds, muls):
        y = (y + c) * d
    loss = y.sum()
    mid = time.perf_counter()
    loss.backward()
    end = time.perf_counter()
    return mid - start, end - mid, x.grad


def numpy_chain(x0: np.ndarray, adds: list, muls: list) -> tuple[float, float, np.ndarray]:
    """The same forward in numpy keeping what the backward needs, then the backward by hand."""
    start = time.perf_counter()
    y, saved = x0, []
    for c, d in zip(adds, muls):
        y = y + c
        saved.append(d)  # d(y·d)/dy = d, as Mul saves its operands
        y = y * d
    loss = y.sum()
    mid = time.perf_counter()
    g = np.ones_like(y)  # d loss / d y
    for d in reversed(saved):
        g = g * d  # through the multiplication; the addition passes g through unchanged
    end = time.perf_counter()
    assert np.isfinite(loss)
    return mid - start, end - mid, g


def measure(run, x0, adds, muls, repeats: int) -> tuple[float, float, np.ndarray]:
    times = [run(x0, adds, muls) for _ in range(repeats)]
    forward = statistics.median(t[0] for t in times)
    backward = statistics.median(t[1] for t in times)
    return forward, backward, times[-1][2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000, help="ops in the chain")
    parser.add_argument("--size", type=int, default=16, help="length of each array")
    parser.add_argument("--repeats", type=int, default=5, help="repeats; medians are reported")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    pairs = args.ops // 2
    x0 = rng.standard_normal(args.size).astype(np.float32)
    # multipliers near 1 keep the chain's values and gradients finite over thousands of steps
    add_arrays = [rng.uniform(-0.01, 0.01, args.size).astype(np.float32) for _ in range(pairs)]
    mul_arrays = [rng.uniform(0.999, 1.001, args.size).astype(np.float32) for _ in range(pairs)]
    adds, muls = [Tensor(a) for a in add_arrays], [Tensor(m) for m in mul_arrays]

    eng_f, eng_b, eng_grad = measure(engine_chain, x0, adds, muls, args.repeats)
    np_f, np_b, np_grad = measure(numpy_chain, x0, add_arrays, mul_arrays, args.repeats)
    np.testing.assert_allclose(eng_grad, np_grad, rtol=1e-4)  # same work, same answer

    n = 2 * pairs
    rows = [("forward", eng_f, np_f), ("backward", eng_b, np_b),
            ("total", eng_f + eng_b, np_f + np_b)]
    print(f"chain of {n:,} ops (add/mul) on float32 arrays of shape ({args.size},), "
          f"median of {args.repeats} repeats")
    print(f"{'pass':<10}{'engine us/op':>14}{'numpy us/op':>14}{'ratio':>9}")
    for name, eng, raw in rows:
        print(f"{name:<10}{eng / n * 1e6:>14.2f}{raw / n * 1e6:>14.2f}{eng / raw:>8.1f}x")


if __name__ == "__main__":
    main()
