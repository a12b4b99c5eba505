"""Scalar `Value` engine vs vectorised `Tensor` engine on the same MLP training, timed in one run.

Both engines start from the same float64 weights (`init_mlp_weights`) and take the same plain
SGD steps on the same batch of two-moons points, so the script also reports the largest
difference between their loss trajectories (it should be ~1e-16: same math, different
summation order). The ratio is the price of one Python object and one closure per scalar
operation against one numpy call per array operation. The previous step's graph is collected
(`gc.collect()`) before each timer starts: micrograd's closures form reference cycles, and
letting the cyclic collector fire at random inside a timed step would blur the figure.

Times are the process's CPU time (`time.process_time`), not wall time: on a shared machine a
step of a second spends most of its wall time waiting for a core while a step of half a
millisecond rarely waits at all, so the wall-time ratio grew with the load (700x to 2,300x
between runs). The two engines' steps also alternate (Value step k, then Tensor step k), and
the figure quoted is the median of the per-step ratios, printed with their interquartile
range and each engine's median and IQR (step 0 is a warm-up, left out of the figures).

    python benchmarks/mlp_moons.py [--steps 30] [--batch 100] [--hidden 16]
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.value_nn import (
    ValueMLP,
    init_mlp_weights,
    tensor_mlp_params,
    tensor_sgd_step,
    value_sgd_step,
)


def make_moons(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, labels ±1."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = np.arange(n) % 2 == 0
    outer, inner = np.c_[np.cos(t), np.sin(t)], np.c_[1 - np.cos(t), 0.5 - np.sin(t)]
    x = np.where(upper[:, None], outer, inner)
    return x + noise * rng.standard_normal((n, 2)), np.where(upper, 1.0, -1.0)


def alternated(value_step, tensor_step, steps: int) -> tuple[list, list, list]:
    """Run the two steps in turn `steps` times; (value losses, tensor losses, CPU seconds per
    step as (value, tensor) pairs), collecting garbage off the clock before each."""
    value_losses, tensor_losses, times = [], [], []
    for _ in range(steps):
        pair = []
        for step, losses in ((value_step, value_losses), (tensor_step, tensor_losses)):
            gc.collect()
            start = time.process_time()
            losses.append(step())
            pair.append(time.process_time() - start)
        times.append(tuple(pair))
    return value_losses, tensor_losses, times


def spread(values, digits: int) -> str:
    """'median (IQR q1–q3)' of `values`, with `digits` decimals."""
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return f"{median:,.{digits}f} (IQR {q1:,.{digits}f}–{q3:,.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    if args.steps < 3:
        parser.error("--steps must be at least 3 (the first step is a warm-up)")

    sizes = (2, args.hidden, args.hidden, 1)
    x, y = make_moons(args.batch, noise=0.1, seed=0)
    weights = init_mlp_weights(sizes, seed=1)
    mlp, params = ValueMLP(weights), tensor_mlp_params(weights)
    xt, yt = Tensor(x), Tensor(y.reshape(-1, 1))
    value_losses, tensor_losses, times = alternated(
        lambda: value_sgd_step(mlp, x, y, args.lr),
        lambda: tensor_sgd_step(params, xt, yt, args.lr), args.steps)

    print(f"MLP {'-'.join(map(str, sizes))}, tanh, MSE, SGD lr={args.lr}, "
          f"batch {args.batch}, {args.steps} steps alternating, float64")
    print(f"{'step':>4}  {'loss':>10}  {'Value ms':>10}  {'Tensor ms':>10}  {'ratio':>7}"
          "   (CPU time)")
    for i, (loss, (tv, tt)) in enumerate(zip(value_losses, times)):
        print(f"{i:>4}  {loss:>10.6f}  {tv * 1e3:>10.2f}  {tt * 1e3:>10.3f}  {tv / tt:>6.0f}x")
    steady = np.array(times[1:]) * 1e3  # ms; step 0 warms caches and allocators up
    gap = np.max(np.abs(np.array(value_losses) - np.array(tensor_losses)))
    print(f"CPU ms per step, median (IQR) over steps 1..{args.steps - 1}: "
          f"Value {spread(steady[:, 0], 1)}, Tensor {spread(steady[:, 1], 3)}")
    print(f"speed ratio (Value / Tensor), per step: {spread(steady[:, 0] / steady[:, 1], 0)}x")
    print(f"max |loss difference| over the trajectory: {gap:.2e}")


if __name__ == "__main__":
    main()
