"""mgsparse's own gain from a second thread: one process, 1- and 2-thread epochs alternating.

The side-by-side scripts time each thread count in its own stretch of the run (every 1-thread
epoch against the peer first, then every 2-thread one), so on a shared host a gain taken from
their medians compares two different minutes: the arxiv-shaped row printed 1.50 and 1.21 in
two runs of the table an hour apart, with nothing changed. Here two copies of the same run,
built from the same seed, take turns in one process, one at 1 thread and one at 2 (the pool
switched outside the timed region), the order swapped every round, round 0 untimed: the
protocol issue 27 sets ("one process, alternating"), as `floor_field.py --thread-gain` does
for Cora. Printed: both medians, the gain (the 1-thread median over the 2-thread one), and
whether the two copies' results stayed bitwise equal (a thread count must not change one).

Workloads, the settings of the side-by-side rows:
- `gcn`: a whole-graph GCN epoch, training step and scores (`compare_pyg.py`'s mgsparse side,
  `train.receptive_field: false`), on `--graph arxiv-shaped` or `synthetic` with `--nodes`;
- `gat`, `sage`: a whole-graph training step of `compare_gat.py` on the `--nodes` SBM;
- `sampled`: a sampled GraphSAGE epoch of `compare_sampled.py`;
- `gin`: an NCI1 GIN epoch of `compare_pyg_graphs.py` (the TU files: $MGSPARSE_TU_URL).

    python benchmarks/thread_gain.py gcn --graph arxiv-shaped --rounds 10
    python benchmarks/thread_gain.py gcn --graph synthetic --nodes 100000 --rounds 30
    python benchmarks/thread_gain.py gat --nodes 100000 --rounds 5
    python benchmarks/thread_gain.py sage --nodes 100000 --rounds 10
    python benchmarks/thread_gain.py sampled --rounds 4
    python benchmarks/thread_gain.py gin --rounds 6

The ratio is recorded for `speed_table.py` (peer "1 thread"), whose gain column takes it
before any side-by-side's. The process keeps freed memory as `mgsparse train` does.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from speed_table import record_ratio

from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.sparse import set_num_threads

Run = Callable[[], tuple]  # one epoch or step; returns what must not depend on the threads


def gcn_runs(args) -> tuple[str, Run, Run]:
    from ab_speed import gcn_epoch
    from compare_pyg import MgsparseSide
    from floor_gcn import arxiv_shaped_graph, synthetic_graph

    graph = arxiv_shaped_graph() if args.graph == "arxiv-shaped" else synthetic_graph(args.nodes)
    sides = [MgsparseSide(graph, 0, False) for _ in range(2)]  # every layer on every node
    name = f"GCN epoch, {args.graph} graph ({graph.num_nodes:,} nodes), whole graph"
    return name, *(lambda s=s: gcn_epoch(s) for s in sides)


def step_runs(args) -> tuple[str, Run, Run]:
    from compare_gat import MgsparseSide
    from floor_gcn import synthetic_graph

    graph = synthetic_graph(args.nodes)
    sides = [MgsparseSide(graph, 0, args.work) for _ in range(2)]
    name = f"{args.work.upper()} step, SBM {args.nodes:,} nodes, whole graph"
    return name, *(lambda s=s: (s.step(),) for s in sides)


def sampled_runs(args) -> tuple[str, Run, Run]:
    from compare_sampled import MgsparseSide, sampled_graph

    graph = sampled_graph()
    sides = [MgsparseSide(graph, 0) for _ in range(2)]
    return "sampled GraphSAGE epoch", *(lambda s=s: (s.epoch(),) for s in sides)


def gin_runs(args) -> tuple[str, Run, Run]:
    from compare_pyg_graphs import MgsparseSide

    from mgsparse.data import load_dataset

    graphs = load_dataset("nci1")
    sides = [MgsparseSide(graphs, 0) for _ in range(2)]
    return "GIN epoch, NCI1", *(lambda s=s: s.epoch() for s in sides)


WORK = {"gcn": gcn_runs, "gat": step_runs, "sage": step_runs, "sampled": sampled_runs,
        "gin": gin_runs}


def alternate(one: Run, two: Run, rounds: int) -> tuple[list[float], list[float], bool]:
    """Rounds 0..rounds of `one` at 1 thread and `two` at 2, the order swapped each round,
    round 0 untimed; the seconds of each and whether every round's results were equal."""
    times: dict[int, list[float]] = {1: [], 2: []}
    equal = True
    for r in range(rounds + 1):
        got = {}
        for threads, run in ((1, one), (2, two)) if r % 2 == 0 else ((2, two), (1, one)):
            set_num_threads(threads)
            start = time.perf_counter()
            got[threads] = run()
            if r:
                times[threads].append(time.perf_counter() - start)
        equal = equal and np.array_equal(np.asarray(got[1], dtype=np.float64),
                                         np.asarray(got[2], dtype=np.float64))
    return times[1], times[2], equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", choices=sorted(WORK))
    parser.add_argument("--graph", choices=["arxiv-shaped", "synthetic"], default="synthetic")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if args.rounds < 1 or args.nodes < 1:
        parser.error("--rounds and --nodes must be at least 1")
    keep_freed_memory()
    name, one, two = WORK[args.work](args)
    ones, twos, equal = alternate(one, two, args.rounds)
    m1, m2 = statistics.median(ones) * 1e3, statistics.median(twos) * 1e3
    print(f"{name}; {args.rounds} rounds, 1 and 2 threads alternating in one process")
    print(f"  1 thread:  median {m1:9.1f} ms")
    print(f"  2 threads: median {m2:9.1f} ms")
    print(f"  gain from the second thread: {m1 / m2:.2f}x; results bitwise equal: {equal}")
    record_ratio("1 thread", 2, m2, m1)


if __name__ == "__main__":
    main()
