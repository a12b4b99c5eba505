"""Peak memory and time of one GAT training step as the graph grows: linear in the edges.

Each size is a random graph with `--degree` edges per node (E = degree · N) and dense
features. One full step — building the block-diagonal attention pattern, forward, backward,
Adam — runs under `tracemalloc`; a second, untraced step gives the time of a step with the
pattern cached. The ratio peak / (stored attention entries) stays flat as N grows, which is
what "no N×N array" means in practice (an N×N float32 at N = 100,000 is 40 GB).

    python benchmarks/gat_memory.py [--nodes 10000,30000,100000] [--degree 10] [--heads 2]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from mgsparse import Tensor
from mgsparse.nn import GAT
from mgsparse.nn import functional as F
from mgsparse.optim import Adam


def step(model: GAT, x: Tensor, y: np.ndarray, optimizer: Adam) -> None:
    loss = F.cross_entropy(model(x), y, np.arange(len(y)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def measure(num_nodes: int, args: argparse.Namespace) -> tuple[int, float, float]:
    """(attention entries, traced peak bytes of a first step, seconds of a cached step)."""
    rng = np.random.default_rng(0)
    edge_index = rng.integers(0, num_nodes, (2, int(args.degree * num_nodes)))
    x = Tensor(rng.standard_normal((num_nodes, args.features)).astype(np.float32))
    y = rng.integers(0, 3, num_nodes)
    model = GAT(args.features, args.hidden, 3, heads=args.heads, edge_index=edge_index, rng=rng)
    optimizer = Adam(model.parameters(), lr=0.005)
    tracemalloc.start()
    step(model, x, y, optimizer)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    start = time.perf_counter()
    step(model, x, y, optimizer)
    seconds = time.perf_counter() - start
    entries = sum(conv.pattern(edge_index, num_nodes).nnz for conv in model.convs)
    return entries, peak, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10000,30000,100000")
    parser.add_argument("--degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=4)
    parser.add_argument("--heads", type=int, default=2)
    args = parser.parse_args()
    print(f"GAT step, {args.heads} heads x {args.hidden} hidden, {args.features} features, "
          f"{args.degree:g} edges per node")
    print(f"{'nodes':>9} {'edges':>11} {'entries':>11} {'peak MB':>9} {'B/entry':>8} {'step s':>7}")
    for num_nodes in (int(n) for n in args.nodes.split(",")):
        entries, peak, seconds = measure(num_nodes, args)
        print(f"{num_nodes:>9,} {int(args.degree * num_nodes):>11,} {entries:>11,} "
              f"{peak / 2**20:>9.1f} {peak / entries:>8.1f} {seconds:>7.2f}")


if __name__ == "__main__":
    main()
