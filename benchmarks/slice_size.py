"""How large a column slice's output should be on this machine: `kernels.tuning.SLICE_BYTES` measured.

Aᵀ·X by A's column slices (mgsparse/kernels/slices.py) gives the same bits for any number of
slices; only the time moves, with the machine's caches. This script times it two ways,
alternating within one process so both sides see the same minute of a shared host:

- the product alone (the default): Âᵀ·X of the GCN operator of the arxiv-shaped graph (or
  `--nodes N`: the SBM of benchmarks/floor_gcn.py) for each `--widths` column count, cut
  into each of `--counts` slices, with the output size per slice beside it and every
  output compared bitwise with the one call's;
- `--epoch`: whole-graph GCN epochs (compare_pyg.py's mgsparse side, training step and
  scores; `--model sage`: compare_gat.py's whole-graph GraphSAGE step, whose D⁻¹A is not its
  own transpose) with `SLICE_BYTES` at `--old` MiB against the tree's value, losses compared
  bitwise.

    python benchmarks/slice_size.py [--nodes 0] [--widths 16 40 64] [--counts 1 2 3 4 6 8 12]
    python benchmarks/slice_size.py --epoch [--model gcn|sage] [--old 8] [--rounds 6]
                                    [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from ab_speed import gcn_epoch
from floor_gcn import arxiv_shaped_graph, gcn_adjacency, synthetic_graph

from mgsparse import kernels
from mgsparse.kernels import slices
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.kernels.slices import ColumnSlices
from mgsparse.sparse import set_num_threads


def product_table(graph, widths: list[int], counts: list[int], rounds: int) -> None:
    A = gcn_adjacency(np.asarray(graph.edge_index), graph.num_nodes)
    n, rng = graph.num_nodes, np.random.default_rng(0)
    cuts = {c: ColumnSlices(A.indptr, A.indices, A.shape, c) for c in counts}
    print(f"Âᵀ·X, {n:,} nodes, {A.nnz:,} entries; median ms of {rounds} rounds, the counts "
          f"alternating (slice output in MiB)")
    for width in widths:
        X = rng.standard_normal((n, width)).astype(np.float32)
        out = {c: np.empty((n, width), np.float32) for c in counts}
        times: dict[int, list[float]] = {c: [] for c in counts}
        for r in range(rounds + 1):
            for c in counts if r % 2 == 0 else counts[::-1]:
                t0 = time.perf_counter()
                cuts[c].scatter(A.data, X, out[c], constant=True)
                if r:
                    times[c].append((time.perf_counter() - t0) * 1e3)
        equal = all(np.array_equal(out[c], out[counts[0]]) for c in counts)
        mib = n * width * 4 / 2**20
        cells = "  ".join(f"{cuts[c].count}: {statistics.median(times[c]):.1f} "
                          f"({mib / cuts[c].count:.1f})" for c in counts)
        best = min(counts, key=lambda c: statistics.median(times[c]))
        chosen = slices.count(n, X)
        print(f"  {width:3d} columns ({mib:.1f} MiB): {cells}")
        print(f"      fastest {cuts[best].count} slices; SLICE_BYTES "
              f"({kernels.tuning.SLICE_BYTES / 2**20:g} MiB) picks {chosen}; bitwise equal: {equal}")


def make_run(graph, model: str):
    """A whole-graph GCN epoch (its two losses) or GraphSAGE step (its loss) of a fresh side."""
    if model == "sage":
        from compare_gat import MgsparseSide as StepSide

        return StepSide(graph, 0, "sage").step
    from compare_pyg import MgsparseSide

    side = MgsparseSide(graph, 0, False)
    return lambda: gcn_epoch(side)


def epoch_ab(graph, model: str, old_mib: float, rounds: int) -> None:
    new_bytes, old_bytes = kernels.tuning.SLICE_BYTES, int(old_mib * 2**20)
    sides = {"old": (old_bytes, make_run(graph, model)), "new": (new_bytes, make_run(graph, model))}
    times: dict[str, list[float]] = {k: [] for k in sides}
    losses: dict[str, list] = {k: [] for k in sides}
    for r in range(rounds + 1):  # round 0 builds the caches: untimed
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            size, run = sides[name]
            kernels.tuning.SLICE_BYTES = size
            t0 = time.perf_counter()
            losses[name].append(run())
            if r:
                times[name].append((time.perf_counter() - t0) * 1e3)
    kernels.tuning.SLICE_BYTES = new_bytes
    old, new = (statistics.median(times[k]) for k in ("old", "new"))
    work = "GraphSAGE step" if model == "sage" else "GCN epoch"
    print(f"whole-graph {work}, {graph.num_nodes:,} nodes, {rounds} rounds: SLICE_BYTES "
          f"{old_mib:g} MiB {old:,.1f} ms, {new_bytes / 2**20:g} MiB {new:,.1f} ms, "
          f"new/old {new / old:.3f}; losses bitwise equal: {losses['old'] == losses['new']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=0, help="0: the arxiv-shaped graph")
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 40, 64])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8, 12])
    parser.add_argument("--epoch", action="store_true", help="whole-graph epochs, A/B")
    parser.add_argument("--model", choices=["gcn", "sage"], default="gcn", help="--epoch only")
    parser.add_argument("--old", type=float, default=8.0, help="--epoch: the old SLICE_BYTES, MiB")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    keep_freed_memory()
    set_num_threads(args.threads)
    graph = synthetic_graph(args.nodes) if args.nodes else arxiv_shaped_graph()
    if args.epoch:
        epoch_ab(graph, args.model, args.old, args.rounds)
    else:
        product_table(graph, args.widths, args.counts, args.rounds)


if __name__ == "__main__":
    main()
