"""A/B of this whole tree against an earlier revision's: the same workload in separate
processes, the two trees alternating, each at 1 and 2 threads.

`ab_speed.py` swaps a few functions inside one process; a change to the thread pool itself,
or to many modules at once, cannot be swapped that way. Here `--rev` is written out with
`git archive` to a temporary folder and every round starts one process per tree (the order
swapped every round), so both trees see the same machine, round by round. Each process builds
its model and graph, takes one untimed step per thread count, then prints the median of
`--steps` timed steps at each. Printed: every round's medians, then per thread count the
median over rounds of each tree and new/old, and whether the last results agree (the loss of
`gat` and `sage`, bit for bit; the validation and test accuracy of `gcn`).

Workloads (the models and recipes of the side-by-side scripts, read from each tree):
- `gcn`: a whole-graph GCN epoch, training step and scores (`compare_pyg.py`'s mgsparse side,
  `train.receptive_field: false`), on `--graph arxiv-shaped` or `synthetic` with `--nodes`;
- `gat`, `sage`: a whole-graph training step of `compare_gat.py` on the `--nodes` SBM.

    python benchmarks/ab_tree.py gcn --rev d3fec82 --graph arxiv-shaped --rounds 3
    python benchmarks/ab_tree.py gcn --rev d3fec82 --graph synthetic --nodes 100000 --steps 20
    python benchmarks/ab_tree.py gat --rev d3fec82 --rounds 3 --steps 6

Both processes keep freed memory for reuse, as `mgsparse train` does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REV = "d3fec82"  # the last revision before the pool's caller worked beside its helpers


def export(rev: str, folder: Path) -> Path:
    """The tree at `rev`, written out by `git archive` into `folder`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=False,
                             capture_output=True)
    if archive.returncode:
        sys.exit(f"ab_tree: git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def child(root: str, workload: str, graph_name: str, nodes: int, steps: int) -> None:
    """Runs in the tree `root`: the workload's medians at 1 and 2 threads, as one JSON line."""
    sys.path[:0] = [root, f"{root}/benchmarks"]
    import numpy as np

    import mgsparse
    try:  # the tree before the kernels floor kept it in the engine
        from mgsparse.kernels.allocator import keep_freed_memory
    except ImportError:
        from mgsparse.engine.allocator import keep_freed_memory
    from mgsparse.sparse import set_num_threads

    assert Path(mgsparse.__file__).resolve().is_relative_to(Path(root).resolve())
    keep_freed_memory()
    if workload == "gcn":
        from compare_pyg import MgsparseSide
        from floor_gcn import load_graph

        side = MgsparseSide(load_graph(graph_name, nodes), 0, False)
        run = side.epoch
    else:
        from compare_gat import MgsparseSide
        from floor_gcn import synthetic_graph

        side = MgsparseSide(synthetic_graph(nodes), 0, workload)
        run = side.step
    medians, last = {}, None
    for threads in (1, 2):
        set_num_threads(threads)
        last = run()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            last = run()
            times.append((time.perf_counter() - t0) * 1e3)
        medians[threads] = statistics.median(times)
    print(json.dumps({"medians": medians, "last": np.asarray(last, dtype=float).tolist()}))


def run_side(root: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, __file__, "--child", str(root), args.workload,
                           "--graph", args.graph, "--nodes", str(args.nodes),
                           "--steps", str(args.steps)], check=False, env=env,
                          capture_output=True, text=True)
    if done.returncode:  # the tree's own error, last line: e.g. a revision without the workload
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"ab_tree: the workload failed in {root}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["gcn", "gat", "sage"])
    parser.add_argument("--rev", default=REV)
    parser.add_argument("--graph", choices=["synthetic", "arxiv-shaped"], default="arxiv-shaped")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.workload, args.graph, args.nodes, args.steps)
    with tempfile.TemporaryDirectory(prefix="mgsparse-ab-") as folder:
        compare({"old": export(args.rev, Path(folder)), "new": ROOT}, args)


def compare(trees: dict[str, Path], args: argparse.Namespace) -> None:
    """The rounds of `main`, with their report."""
    what = args.graph if args.workload == "gcn" else f"synthetic, {args.nodes:,} nodes"
    print(f"{args.workload} ({what}), {args.steps} steps a process and thread count, "
          f"{args.rounds} rounds of old ({args.rev}) and new in alternating processes")
    results = {"old": [], "new": []}
    for r in range(args.rounds):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            results[name].append(run_side(trees[name], args))
        print(f"  round {r + 1}: " + "   ".join(
            f"{name} " + " · ".join(f"{results[name][-1]['medians'][t]:.1f}" for t in ("1", "2"))
            for name in ("old", "new")) + " ms (1 · 2 threads)")
    for t in ("1", "2"):
        old, new = (statistics.median(x["medians"][t] for x in results[n]) for n in ("old", "new"))
        print(f"  {t} thread(s): old {old:.1f} ms, new {new:.1f} ms, new/old {new / old:.3f}")
    same = results["old"][-1]["last"] == results["new"][-1]["last"]
    print(f"  last results equal (gat, sage: the loss; gcn: val and test accuracy): {same}")


if __name__ == "__main__":
    main()
