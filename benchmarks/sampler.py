"""Neighbour sampling on a 1,000,000-node graph: speed against a per-node Python sampler, and
the peak memory of one mini-batch training step as the graph doubles at a fixed batch.

1. Sampling. An epoch of `NeighborLoader` batches (fanouts [25, 10], then [10, 5] where
   most nodes have more neighbours than the fanout, `--batch` seeds) over
   `--train` training nodes of the synthetic SBM (1M nodes, ~10M directed edges): sampled
   edges per second and the epoch's sampling time. The baseline is the textbook sampler
   written here, one Python iteration per target node (`rng.choice` without replacement and
   a dict for the relabelling), timed on the first `--naive-batches` batches; the ratio is
   of edges per second, both measured in this run.
2. Memory. One GraphSAGE training step (sample, gather features, forward on the blocks,
   backward, Adam) at a fixed batch, traced with tracemalloc, on the 1M graph and on a 2M
   graph: the step's peak follows the batch, not the graph (the graph itself is allocated
   before tracing starts).

    python benchmarks/sampler.py [--nodes 1000000] [--train 100000] [--batch 1024]
                                 [--fanouts "25,10;10,5"] [--naive-batches 5]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from mgsparse.data import sbm
from mgsparse.data.sampler import Block, NeighborLoader, NeighborSampler
from mgsparse.nn import GraphSAGE
from mgsparse.nn import functional as F
from mgsparse.nn.block import forward_blocks, gather_rows
from mgsparse.optim import Adam

FANOUTS = [25, 10]


def naive_block(sampler: NeighborSampler, targets: np.ndarray, k: int,
                rng: np.random.Generator) -> Block:
    """The per-node baseline: one Python iteration per target, a dict to relabel sources."""
    local = {int(t): i for i, t in enumerate(targets)}
    rows, cols = [], []
    for i, t in enumerate(targets):
        lo, hi = sampler.indptr[t], sampler.indptr[t + 1]
        pos = np.arange(lo, hi)
        if k >= 0 and hi - lo > k:
            pos = rng.choice(pos, k, replace=False)
        for p in pos:
            j = int(sampler.indices[p])
            rows.append(i)
            cols.append(local.setdefault(j, len(local)))
    n_id = np.fromiter(local.keys(), dtype=np.int64, count=len(local))
    return Block(n_id, np.array(rows), np.array(cols), None, sampler.degree, len(targets))


def naive_sample(sampler: NeighborSampler, seeds: np.ndarray, rng) -> list[Block]:
    blocks, targets = [], seeds
    for k in reversed(sampler.fanouts):
        blocks.append(naive_block(sampler, targets, k, rng))
        targets = blocks[-1].n_id
    return blocks[::-1]


def sampling(graph, fanouts: list[int], args) -> None:
    start = time.perf_counter()
    sampler = NeighborSampler(graph.edge_index, graph.num_nodes, fanouts)
    built = time.perf_counter() - start
    train = np.random.default_rng(0).permutation(graph.num_nodes)[: args.train]
    loader = NeighborLoader(sampler, train, args.batch, seed=0)
    plan = loader.plan()
    start = time.perf_counter()
    edges = sum(sampler.sample(seeds, loader.rng).nnz for seeds in plan)
    fast = time.perf_counter() - start
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    naive_edges = sum(b.nnz for seeds in plan[: args.naive_batches]
                      for b in naive_sample(sampler, seeds, rng))
    slow = time.perf_counter() - start
    print(f"fanouts {fanouts} (in-CSR built in {built:.2f} s): an epoch of {len(plan)} batches "
          f"of {args.batch} seeds, {edges:,} sampled edges")
    print(f"  vectorised : {fast:8.2f} s per epoch, {edges / fast:12,.0f} edges/s")
    print(f"  per-node   : {slow:8.2f} s for {args.naive_batches} batches, "
          f"{naive_edges / slow:12,.0f} edges/s (epoch ~{slow * len(plan) / args.naive_batches:.0f} s)")
    print(f"  ratio      : {(edges / fast) / (naive_edges / slow):8.1f}x edges/s")


def step_peak(num_nodes: int, args) -> tuple[int, int, float]:
    """(sampled nodes, block nnz, traced peak MB) of one SAGE step on a fresh graph."""
    graph = sbm(num_nodes, avg_degree=10, num_features=128, seed=1)
    sampler = NeighborSampler(graph.edge_index, num_nodes, FANOUTS)
    rng = np.random.default_rng(0)
    model = GraphSAGE(graph.num_features, 64, graph.num_classes, rng=rng)
    optimizer = Adam(model.parameters(), lr=0.01)
    seeds = rng.permutation(num_nodes)[: args.batch]

    def step():
        batch = sampler.sample(seeds, rng)
        out = forward_blocks(model, gather_rows(graph.x, batch.n_id), batch.blocks)
        loss = F.cross_entropy(out, graph.y[batch.seeds])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return batch

    step()  # Adam's state exists before the traced step, as in training
    tracemalloc.start()
    batch = step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return batch.num_nodes, batch.nnz, peak / 2**20


def memory(args) -> None:
    print(f"one GraphSAGE step (hidden 64, 128 features), batch {args.batch}, fanouts {FANOUTS}")
    print(f"{'nodes':>10} {'sampled nodes':>14} {'block nnz':>10} {'peak MB':>8}")
    peaks = []
    for n in (args.nodes, 2 * args.nodes):
        nodes, nnz, peak = step_peak(n, args)
        peaks.append(peak)
        print(f"{n:>10,} {nodes:>14,} {nnz:>10,} {peak:>8.1f}")
    print(f"peak ratio 2N / N: {peaks[1] / peaks[0]:.2f} (full batch would be ~2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--train", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--naive-batches", type=int, default=5)
    parser.add_argument("--fanouts", default="25,10;10,5", help="settings separated by ';'")
    args = parser.parse_args()
    start = time.perf_counter()
    graph = sbm(args.nodes, avg_degree=10, num_features=128, seed=0)
    print(f"synthetic SBM: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges "
          f"({time.perf_counter() - start:.1f} s)")
    for fanouts in args.fanouts.split(";"):
        sampling(graph, [int(k) for k in fanouts.split(",")], args)
    del graph
    memory(args)


if __name__ == "__main__":
    main()
