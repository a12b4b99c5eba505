"""Distributed full-graph GCN on the 1,000,000-node synthetic graph: 1 and 2 MPI ranks.

Measures, in one run: the partition step (METIS) and its manifest (edge cut, halo sizes,
bytes per epoch); single-process training with the ordinary trainer; then the same model on
1 and 2 ranks (`mpiexec -n K`). Per configuration: median epoch time (train step +
evaluation), bytes each rank sent per epoch, and each rank's peak memory — tracemalloc's
peak over loading + training (numpy reports its buffers to it) and the process's max RSS.
The single-process peak is taken from after the graph is generated (the generator's own
temporaries are not training's). Ratios are of figures measured in this run.

    python benchmarks/distributed.py [--nodes 1000000] [--features 128] [--epochs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MB = 1024 ** 2


def overrides(args: argparse.Namespace) -> list[str]:
    return [f"dataset.num_nodes={args.nodes}", f"dataset.num_features={args.features}",
            "monitor.memory=false", "dataset.num_val=5000", "dataset.num_test=10000"]


def config(args: argparse.Namespace):
    from mgsparse.config import load_config

    return load_config(REPO / "configs" / "synthetic.yaml", overrides(args))


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def timed_epochs(step, evaluate, epochs: int) -> list[float]:
    """Seconds per epoch (train step + evaluation); the first epoch is a warm-up, dropped."""
    times = []
    for _ in range(epochs + 1):
        t0 = time.perf_counter()
        step()
        evaluate()
        times.append(time.perf_counter() - t0)
    return times[1:]


# ---------------------------------------------------------------- the three kinds of process


def single(args: argparse.Namespace) -> dict:
    """The ordinary single-process trainer on the whole graph."""
    from mgsparse.run.build import build_optimizer
    from mgsparse.run.loop import train_epoch
    from mgsparse.run.placed import load_graph
    from mgsparse.run.tasks.nodes import GraphTask

    cfg = config(args)
    graph = load_graph(cfg.dataset)
    x = graph.x
    held = sum(a.nbytes for a in (x.data, x.indices, x.indptr, graph.edge_index, graph.y,
                                  graph.train_mask, graph.val_mask, graph.test_mask))
    tracemalloc.start()  # after the generator: its temporaries are not training's
    task = GraphTask(cfg, graph)
    model = task.build_model(np.random.default_rng(cfg.train.seed))
    optimizer = build_optimizer(cfg.optim, model)
    times = timed_epochs(lambda: train_epoch(model, optimizer, task.batches(model, None), 1.0),
                         lambda: task.evaluate(model), args.epochs)
    _, peak = tracemalloc.get_traced_memory()
    # the graph it holds (allocated before tracing began) counts towards its peak
    return {"epoch_s": times, "peak_mb": (held + peak) / MB, "graph_mb": held / MB,
            "rss_mb": max_rss_mb()}


def rank(args: argparse.Namespace) -> None:
    """One rank under mpiexec: load its part, train, report (rank 0 writes all ranks')."""
    from mgsparse.distributed import Comm, abort_on_error
    from mgsparse.run.build import build_optimizer
    from mgsparse.run.loop import train_epoch
    from mgsparse.run.tasks.partitioned import DistributedGraphTask

    comm = Comm(timeout=600)
    with abort_on_error(comm, lambda e: print(f"rank {comm.rank}: {e}", file=sys.stderr)):
        tracemalloc.start()
        cfg = config(args)
        task = DistributedGraphTask(cfg, args.parts, comm)
        model = task.build_model(np.random.default_rng(cfg.train.seed))
        optimizer = build_optimizer(cfg.optim, model)
        _, load_peak = tracemalloc.get_traced_memory()
        sent0 = comm.bytes_sent
        times = timed_epochs(lambda: train_epoch(model, optimizer, task.batches(model, None),
                                                 1.0, task.reduce_gradients),
                             lambda: task.evaluate(model), args.epochs)
        _, peak = tracemalloc.get_traced_memory()
        mine = {"epoch_s": times, "peak_mb": peak / MB, "load_peak_mb": load_peak / MB,
                "rss_mb": max_rss_mb(),
                "bytes_per_epoch": (comm.bytes_sent - sent0) / (args.epochs + 1)}
        everyone = comm.comm.gather(mine, root=0)
        if comm.rank == 0:
            Path(args.out).write_text(json.dumps(everyone))


def partition(args: argparse.Namespace, ranks: int, folder: Path) -> dict:
    from mgsparse.distributed import partition_graph
    from mgsparse.run.placed import load_graph

    cfg = config(args)
    graph = load_graph(cfg.dataset)
    t0 = time.perf_counter()
    manifest = partition_graph(cfg, graph, ranks, folder / f"k{ranks}")
    return {**manifest, "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------- the driver


def run(cmd: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, cwd=REPO, env=env, check=True)


def child(args: argparse.Namespace, mode: str, *extra: str) -> list[str]:
    return [sys.executable, __file__, "--mode", mode, "--nodes", str(args.nodes),
            "--features", str(args.features), "--epochs", str(args.epochs), *extra]


def drive(args: argparse.Namespace) -> None:
    mpiexec = shutil.which("mpiexec", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run(child(args, "partition", "--out", str(folder)))
        manifests = json.loads((folder / "manifests.json").read_text())
        run(child(args, "single", "--out", str(folder / "single.json")))
        results = {"single": [json.loads((folder / "single.json").read_text())]}
        for k in (1, 2):
            out = folder / f"ranks{k}.json"
            run([mpiexec, "-n", str(k)] + child(args, "rank", "--parts",
                                                 str(folder / f"k{k}"), "--out", str(out)))
            results[f"{k} rank{'s' if k > 1 else ''}"] = json.loads(out.read_text())
    report(args, manifests, results)


def report(args: argparse.Namespace, manifests: dict, results: dict) -> None:
    m2 = manifests["2"]
    print(f"graph: {args.nodes:,} nodes, {args.features} features, GCN hidden 16")
    print(f"partition (METIS, 2 parts): {m2['seconds']:.1f} s, nodes per part "
          f"{m2['nodes_per_part']}, halo per part {m2['halo_per_part']}, cut entries "
          f"{m2['cut_entries']:,}, estimated bytes/epoch {m2['bytes_per_epoch'] / MB:.1f} MiB")
    single_peak = results["single"][0]["peak_mb"]
    print(f"single-process peak = graph held {results['single'][0]['graph_mb']:.0f} MiB "
          "+ traced peak of preparing and training")
    print(f"{'run':<10}{'rank':>5}{'epoch s':>9}{'MiB sent/epoch':>16}{'traced peak MiB':>17}"
          f"{'(loading)':>11}{'max RSS MiB':>13}{'peak / single':>15}")
    for name, ranks in results.items():
        for r, res in enumerate(ranks):
            sent = res.get("bytes_per_epoch", 0) / MB
            print(f"{name:<10}{r:>5}{statistics.median(res['epoch_s']):>9.2f}{sent:>16.1f}"
                  f"{res['peak_mb']:>17.0f}{res.get('load_peak_mb', 0):>11.0f}"
                  f"{res['rss_mb']:>13.0f}"
                  f"{res['peak_mb'] / single_peak:>15.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--mode", default="drive", choices=["drive", "partition", "single",
                                                             "rank"])
    parser.add_argument("--parts", default="")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.mode == "drive":
        drive(args)
    elif args.mode == "partition":
        folder = Path(args.out)
        manifests = {k: partition(args, k, folder) for k in (1, 2)}
        (folder / "manifests.json").write_text(json.dumps(manifests))
    elif args.mode == "single":
        Path(args.out).write_text(json.dumps(single(args)))
    else:
        rank(args)


if __name__ == "__main__":
    main()
