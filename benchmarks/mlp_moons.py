"""Scalar `Value` engine vs vectorised `Tensor` engine on the same MLP training, timed in one run.

Both engines start from the same float64 weights (`init_mlp_weights`) and take the same plain
SGD steps on the same batch of two-moons points, so the script also reports the largest
difference between their loss trajectories (it should be ~1e-16: same math, different
summation order). The ratio is the price of one Python object and one closure per scalar
operation against one numpy call per array operation. The previous step's graph is collected
(`gc.collect()`) before each timer starts: micrograd's closures form reference cycles, and
letting the cyclic collector fire at random inside a timed step would blur the figure.

    python benchmarks/mlp_moons.py [--steps 20] [--batch 100] [--hidden 16]
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


def timed(step, steps: int) -> tuple[list[float], list[float]]:
    """Run `step()` `steps` times; (losses, seconds per step), collecting garbage off the clock."""
    losses, times = [], []
    for _ in range(steps):
        gc.collect()
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    return losses, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    sizes = (2, args.hidden, args.hidden, 1)
    x, y = make_moons(args.batch, noise=0.1, seed=0)
    weights = init_mlp_weights(sizes, seed=1)
    mlp, params = ValueMLP(weights), tensor_mlp_params(weights)
    xt, yt = Tensor(x), Tensor(y.reshape(-1, 1))
    value_losses, value_times = timed(lambda: value_sgd_step(mlp, x, y, args.lr), args.steps)
    tensor_losses, tensor_times = timed(lambda: tensor_sgd_step(params, xt, yt, args.lr),
                                        args.steps)

    print(f"MLP {'-'.join(map(str, sizes))}, tanh, MSE, SGD lr={args.lr}, "
          f"batch {args.batch}, {args.steps} steps, float64")
    print(f"{'step':>4}  {'loss':>10}  {'Value ms':>10}  {'Tensor ms':>10}")
    for i, (loss, tv, tt) in enumerate(zip(value_losses, value_times, tensor_times)):
        print(f"{i:>4}  {loss:>10.6f}  {tv * 1e3:>10.2f}  {tt * 1e3:>10.3f}")
    value_ms, tensor_ms = 1e3 * np.median(value_times), 1e3 * np.median(tensor_times)
    gap = np.max(np.abs(np.array(value_losses) - np.array(tensor_losses)))
    print(f"median per step: Value {value_ms:.2f} ms, Tensor {tensor_ms:.3f} ms")
    print(f"speed ratio (Value / Tensor): {value_ms / tensor_ms:.0f}x")
    print(f"max |loss difference| over the trajectory: {gap:.2e}")


if __name__ == "__main__":
    main()
