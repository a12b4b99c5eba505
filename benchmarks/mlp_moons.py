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
from mgsparse.engine.value_nn import ValueMLP, init_mlp_weights


def make_moons(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, labels ±1."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = np.arange(n) % 2 == 0
    outer, inner = np.c_[np.cos(t), np.sin(t)], np.c_[1 - np.cos(t), 0.5 - np.sin(t)]
    x = np.where(upper[:, None], outer, inner)
    return x + noise * rng.standard_normal((n, 2)), np.where(upper, 1.0, -1.0)


def train_value(weights, x, y, steps: int, lr: float) -> tuple[list[float], list[float]]:
    """micrograd's loop: a graph of scalars per step, MSE loss, p.data -= lr·p.grad."""
    mlp, losses, times = ValueMLP(weights), [], []
    for _ in range(steps):
        gc.collect()
        start = time.perf_counter()
        outs = [mlp(list(row))[0] for row in x]
        loss = sum((o - t) ** 2 for o, t in zip(outs, y)) * (1.0 / len(y))
        mlp.zero_grad()
        loss.backward()
        for p in mlp.parameters():
            p.data -= lr * p.grad
        times.append(time.perf_counter() - start)
        losses.append(loss.data)
    return losses, times


def train_tensor(weights, x, y, steps: int, lr: float) -> tuple[list[float], list[float]]:
    """The same network as matrices: h = tanh(h @ W + b) per hidden layer, one graph node per op."""
    params = [(Tensor(W.copy(), requires_grad=True), Tensor(b.copy(), requires_grad=True))
              for W, b in weights]
    xt, yt = Tensor(x), Tensor(y.reshape(-1, 1))
    losses, times = [], []
    for _ in range(steps):
        gc.collect()
        start = time.perf_counter()
        h = xt
        for k, (W, b) in enumerate(params):
            h = h @ W + b
            h = h.tanh() if k < len(params) - 1 else h
        loss = ((h - yt) ** 2).mean()
        loss.backward()
        for p in (p for pair in params for p in pair):
            p.data -= lr * p.grad
            p.zero_grad()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
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
    value_losses, value_times = train_value(weights, x, y, args.steps, args.lr)
    tensor_losses, tensor_times = train_tensor(weights, x, y, args.steps, args.lr)

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
