"""cProfile of GCN training steps on the synthetic graph: where an epoch's time goes.

The graph and mgsparse side of benchmarks/compare_pyg.py (SBM, average degree 10, 64 dense
features; the Kipf recipe), stepped with gradient clipping
1.0 as `mgsparse train` runs it. Prints the median step time over `--repeat` unprofiled
steps, then the functions taking the most own time over
`--steps` profiled steps, and how many `astype` calls and copies those steps made.

    python benchmarks/profile_step.py [--nodes 100000] [--threads 1] [--steps 20] [--top 15]
                                      [--whole-graph] [--graph arxiv-shaped]

By default the step runs as `mgsparse train` runs it, on the training rows' receptive field
(mgsparse/run/field.py); --whole-graph profiles every layer on every node. --graph
arxiv-shaped profiles compare_pyg.py's ogbn-arxiv-shaped graph instead (--nodes unused).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

from compare_pyg import MgsparseSide
from floor_gcn import load_graph

from mgsparse.run import train_epoch


def setup(nodes: int, receptive_field: bool | str = "auto", graph: str = "synthetic"):
    """compare_pyg's mgsparse side on the synthetic graph, and one training step of it."""
    side = MgsparseSide(load_graph(graph, nodes), 0, receptive_field)
    return lambda: train_epoch(side.model, side.optimizer,
                               side.task.batches(side.model, side.shuffle), 1.0,
                               replay=side.task.replay(side.model, training=True))


def side_label(args) -> str:
    return "arxiv-shaped graph" if args.graph == "arxiv-shaped" else f"{args.nodes:,} nodes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--graph", choices=["synthetic", "arxiv-shaped"], default="synthetic")
    parser.add_argument("--whole-graph", action="store_true",
                        help="every layer on every node (train.receptive_field: false)")
    args = parser.parse_args()
    from mgsparse.sparse import set_num_threads

    set_num_threads(args.threads)
    step = setup(args.nodes, False if args.whole_graph else "auto", args.graph)
    for _ in range(3):  # caches, first-call work
        step()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.steps):
        step()
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    total = sum(row[2] for row in stats.stats.values())
    astype = sum(row[1] for key, row in stats.stats.items() if key[2] in
                 ("<method 'astype' of 'numpy.ndarray' objects>",
                  "<method 'copy' of 'numpy.ndarray' objects>"))
    print(f"{side_label(args)}, {args.threads} thread(s): median step "
          f"{statistics.median(times):.1f} ms over {args.repeat}; profiled {args.steps} steps: "
          f"{total:.2f} s own time, {astype} astype/copy calls")
    stats.sort_stats("tottime").print_stats(args.top)
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()
