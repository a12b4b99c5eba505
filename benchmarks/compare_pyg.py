"""The standard 2-layer GCN on Cora in PyTorch Geometric and in mgsparse, side by side.

Both read the same arrays: Cora as mgsparse's loader parses it (set MGSPARSE_PLANETOID_URL to
a mirror; PyG's own Planetoid class would download from the internet), row-normalised
features, the public 140/500/1,000 split. Same recipe on both sides (Kipf & Welling, PyG's
examples/gcn.py): hidden 16, dropout 0.5 before each layer, ReLU, Adam lr 0.01, weight decay
5e-4 on the first layer only, 200 epochs, no gradient clipping, cached Â; the test accuracy
is taken at the epoch of best validation accuracy. PyG multiplies a dense feature matrix,
as its example does; mgsparse keeps features and Â sparse.

Epoch time (one training step plus one evaluation pass) is measured in one process with the
two frameworks alternating epoch by epoch, so both see the same machine. Peak memory is
measured apart, each framework in a fresh child process: the resident-set high-water mark
(VmHWM) reached during training above the resident set before it (torch allocates outside
tracemalloc's sight, so only the resident set compares both); mgsparse's tracemalloc peak is
shown as well.

    python benchmarks/compare_pyg.py [--epochs 200] [--runs 3] [--threads N]

--threads sets torch's intra-op threads (default: torch's own choice, one per core). On a
machine whose cores are busy with other work, OpenMP threads wait on each other at every op
and one thread is faster; the table says how many were used.

Without torch and torch_geometric (pip install 'mgsparse[compare]') it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from mgsparse.bench.measure import rss_bytes
from mgsparse.config import config_from_dict
from mgsparse.data import load_dataset
from mgsparse.run import GraphTask, build_optimizer, train_epoch
from mgsparse.run.task import shuffle_generator

RECIPE = {"hidden": 16, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4}
MB = 2**20


def frameworks_available() -> bool:
    try:
        import torch  # noqa: F401
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- the two sides


class MgsparseSide:
    name = "mgsparse"

    def __init__(self, graph, seed: int):
        self.config = config_from_dict({
            "dataset": {"name": "cora"},
            "model": {"kind": "gcn", "hidden": RECIPE["hidden"], "dropout": RECIPE["dropout"]},
            "optim": {"name": "adam", "lr": RECIPE["lr"], "weight_decay": RECIPE["weight_decay"],
                      "weight_decay_first_layer_only": True},
            "train": {"grad_clip_norm": None, "seed": seed}}, "compare_pyg")
        self.task = GraphTask(self.config, graph)
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = build_optimizer(self.config.optim, self.model)
        self.shuffle = shuffle_generator(seed)

    def epoch(self) -> tuple[float, float]:
        """(val acc, test acc) after one training step."""
        train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle), None)
        scores = self.task.evaluate(self.model)
        return scores.val_acc, scores.test_acc


class PygSide:
    name = "PyG"

    def __init__(self, graph, seed: int):
        import torch
        import torch.nn.functional as F
        from torch_geometric.nn import GCNConv

        torch.manual_seed(seed)
        self.torch, self.F = torch, F
        self.x = torch.from_numpy(graph.x.toarray().astype(np.float32))
        self.edge_index = torch.from_numpy(np.asarray(graph.edge_index, dtype=np.int64))
        self.y = torch.from_numpy(np.asarray(graph.y, dtype=np.int64))
        self.masks = [torch.from_numpy(np.asarray(m)) for m in
                      (graph.train_mask, graph.val_mask, graph.test_mask)]
        self.conv1 = GCNConv(self.x.shape[1], RECIPE["hidden"], cached=True)
        self.conv2 = GCNConv(RECIPE["hidden"], int(graph.num_classes), cached=True)
        self.optimizer = torch.optim.Adam([
            {"params": self.conv1.parameters(), "weight_decay": RECIPE["weight_decay"]},
            {"params": self.conv2.parameters(), "weight_decay": 0.0}], lr=RECIPE["lr"])

    def forward(self, training: bool):
        p, F = RECIPE["dropout"], self.F
        h = F.dropout(self.x, p, training)
        h = self.conv1(h, self.edge_index).relu()
        h = F.dropout(h, p, training)
        return self.conv2(h, self.edge_index)

    def epoch(self) -> tuple[float, float]:
        train, val, test = self.masks
        self.optimizer.zero_grad()
        loss = self.F.cross_entropy(self.forward(True)[train], self.y[train])
        loss.backward()
        self.optimizer.step()
        with self.torch.no_grad():
            pred = self.forward(False).argmax(dim=-1)
        return tuple(float((pred[m] == self.y[m]).float().mean()) for m in (val, test))


SIDES = {"mgsparse": MgsparseSide, "pyg": PygSide}


# ---------------------------------------------------------------- time and accuracy


def alternate(graph, epochs: int, seed: int) -> dict[str, dict]:
    """Both frameworks from `seed`, one epoch each in turn; times in ms, test acc at best val."""
    sides = [PygSide(graph, seed), MgsparseSide(graph, seed)]
    record = {s.name: {"ms": [], "best_val": -1.0, "test": 0.0} for s in sides}
    for _ in range(epochs):
        for side in sides:
            t0 = time.perf_counter()
            val, test = side.epoch()
            r = record[side.name]
            r["ms"].append((time.perf_counter() - t0) * 1e3)
            if val > r["best_val"]:
                r["best_val"], r["test"] = val, test
    return record


# ---------------------------------------------------------------- memory, in a child process


def reset_peak_rss() -> bool:
    """Linux: writing 5 to clear_refs resets VmHWM to the current resident set."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def probe(side_name: str, epochs: int) -> dict:
    """Run in a child: resident-set peak above the start of training (and tracemalloc's)."""
    graph = load_dataset("cora", normalize_features=True)
    side = SIDES[side_name](graph, 0)
    side.epoch()  # first-call work (caches, lazy imports) belongs to setup
    before = rss_bytes()
    exact = reset_peak_rss()
    tracemalloc.start()
    for _ in range(epochs):
        side.epoch()
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"rss_peak_above_start": max(peak_rss() - before, 0), "traced_peak": traced,
            "hwm_reset": exact}


def measure_memory(side_name: str, epochs: int, threads: int | None) -> dict:
    command = [sys.executable, __file__, "--probe", side_name, "--epochs", str(epochs)]
    command += ["--threads", str(threads)] if threads else []
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"memory probe for {side_name} failed:\n{done.stderr}")
    return json.loads(done.stdout)


# ---------------------------------------------------------------- report


def report(runs: list[dict], memory: dict, epochs: int) -> None:
    import torch
    import torch_geometric

    def stats(name):
        ms = [m for r in runs for m in r[name]["ms"]]
        acc = [r[name]["test"] for r in runs]
        return statistics.median(ms), np.percentile(ms, 75) - np.percentile(ms, 25), acc

    pyg, mgs = stats("PyG"), stats("mgsparse")
    print(f"Cora, 2-layer GCN, {epochs} epochs x {len(runs)} run(s) (seeds 0..{len(runs) - 1}); "
          f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, "
          f"{torch.get_num_threads()} torch thread(s)")
    rows = [("epoch time, median (ms)", pyg[0], mgs[0], "{:.2f}"),
            ("epoch time, IQR (ms)", pyg[1], mgs[1], "{:.2f}"),
            ("peak RSS above start (MB)", memory["pyg"]["rss_peak_above_start"] / MB,
             memory["mgsparse"]["rss_peak_above_start"] / MB, "{:.2f}"),
            ("tracemalloc peak (MB)", None, memory["mgsparse"]["traced_peak"] / MB, "{:.2f}"),
            ("test accuracy, mean", float(np.mean(pyg[2])), float(np.mean(mgs[2])), "{:.2%}")]
    print(f"{'':28}{'PyG':>12}{'mgsparse':>12}{'mgsparse/PyG':>14}")
    for label, a, b, fmt in rows:
        ratio = f"{b / a:.2f}x" if a else "-"
        cell_a = fmt.format(a) if a is not None else "n/a"
        print(f"{label:28}{cell_a:>12}{fmt.format(b):>12}{ratio:>14}")
    for name, s in (("PyG", pyg), ("mgsparse", mgs)):
        print(f"{name} test accuracy per run: " + ", ".join(f"{a:.1%}" for a in s[2]))
    if not memory["pyg"]["hwm_reset"]:
        print("note: VmHWM could not be reset; the RSS peaks include setup")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--probe", choices=sorted(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not frameworks_available():
        print("compare_pyg: torch and torch_geometric are not installed "
              "(pip install 'mgsparse[compare]'); nothing to compare")
        return
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.probe:
        print(json.dumps(probe(args.probe, args.epochs)))
        return
    graph = load_dataset("cora", normalize_features=True)
    runs = [alternate(graph, args.epochs, seed) for seed in range(args.runs)]
    memory = {name: measure_memory(name, args.epochs, args.threads) for name in SIDES}
    report(runs, memory, args.epochs)


if __name__ == "__main__":
    main()
