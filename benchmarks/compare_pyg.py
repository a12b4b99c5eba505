"""The standard 2-layer GCN in PyTorch Geometric, in mgsparse and as a hand-written numpy floor.

Graphs: Cora (as mgsparse's loader parses it; set MGSPARSE_PLANETOID_URL to a mirror,
row-normalised features, the public split), synthetic SBM graphs of `--nodes` nodes
(average degree 10, 64 dense features) and an ogbn-arxiv-shaped SBM (169,343 nodes, 2.37M
edges, 128 dense features, 40 classes, 54% of nodes train; benchmarks/floor_gcn.py). Same recipe on every side
(Kipf & Welling, PyG's examples/gcn.py): hidden 16, dropout 0.5 before each layer, ReLU, Adam
lr 0.01, weight decay 5e-4 on the first layer only, no clipping, cached Â; test accuracy at
the epoch of best validation accuracy.

PyG runs in its best CPU configuration, chosen per graph and thread count by a short trial:
Â as an edge list (gather/scatter) or as a torch CSR tensor, and features sparse (torch CSR,
dropout on the stored values) where the data is sparse (density <= 0.1), dense otherwise.
The floor is benchmarks/floor_gcn.py: numpy/scipy by hand, no autograd, scipy on one core.

mgsparse runs twice: as `mgsparse train` runs it (the training step, and the scores when they
read at most half the graph, on their receptive fields: mgsparse/run/field.py) and with
`train.receptive_field: false` (every layer on every node). So that the receptive fields are
not compared against a PyG that computes the whole graph only, PyG also runs them as a PyG
user would write them: `k_hop_subgraph` around the training and the scored rows, GCNConv on
the whole graph's normalisation (`PygFieldSide`). Ratios are printed against both PyGs.

Epoch time (one training step plus one evaluation pass) is measured in one process, the
sides alternating epoch by epoch so that all see the same machine, at each `--threads`
count (torch.set_num_threads and mgsparse.sparse.set_num_threads; BLAS one thread per call).
Peak memory is measured apart, each framework in a fresh child process: the resident-set
high-water mark (VmHWM) from just after the graph is loaded to the end of training, model
and cached Â included.

    python benchmarks/compare_pyg.py [--graph cora] [--epochs 200] [--runs 3]
    python benchmarks/compare_pyg.py --graph synthetic --nodes 100000 1000000 \\
        --threads 1 2 --epochs 20 --runs 1
    python benchmarks/compare_pyg.py --graph arxiv-shaped --threads 1 2 --epochs 20 --runs 1

Without torch and torch_geometric (pip install 'mgsparse[compare]') it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from floor_gcn import RECIPE, FloorSide, load_graph
from speed_table import record_ratio

from mgsparse.bench.measure import rss_bytes
from mgsparse.config import config_from_dict
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.run import GraphTask, build_optimizer, train_epoch
from mgsparse.run.task import shuffle_generator
from mgsparse.sparse import set_num_threads

MB = 2**20
SPARSE_FEATURES = 0.1  # density at or below which features are stored sparse (both sides)


def frameworks_available() -> bool:
    try:
        import torch  # noqa: F401
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- the sides


class MgsparseSide:
    """mgsparse as `mgsparse train` runs it: `receptive_field` "auto" computes the training
    step (and the scores) on the rows they read (mgsparse/run/field.py); False, every layer
    on the whole graph."""

    def __init__(self, graph, seed: int, receptive_field: bool | str = "auto"):
        self.name = "mgsparse" if receptive_field else "mgsparse, whole graph"
        self.config = config_from_dict({
            "dataset": {"name": "cora"},
            "model": {"kind": "gcn", "hidden": RECIPE["hidden"], "dropout": RECIPE["dropout"]},
            "optim": {"name": "adam", "lr": RECIPE["lr"], "weight_decay": RECIPE["weight_decay"],
                      "weight_decay_first_layer_only": True},
            "train": {"grad_clip_norm": None, "seed": seed, "receptive_field": receptive_field}},
            "compare_pyg")
        self.task = GraphTask(self.config, graph)  # dense features placed as they are
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = build_optimizer(self.config.optim, self.model)
        self.shuffle = shuffle_generator(seed)

    def epoch(self) -> tuple[float, float]:
        """(val acc, test acc) after one training step."""
        train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle), None,
                    replay=self.task.replay(self.model, training=True))  # as the loop runs it
        scores = self.task.evaluate(self.model)
        fields = {k: v for k, v in self.task.placement.items() if k.endswith(" rows")}
        self.setup = (f"receptive fields: {', '.join(k.removesuffix(' rows') for k in fields)}"
                      if fields else "whole graph")
        self.fields = [f"{k}: {v}" for k, v in fields.items()]
        return scores.val_acc, scores.test_acc


class PygSide:
    """PyG's GCNConv; `adjacency` "edge_index" (gather/scatter) or "csr" (torch sparse CSR)."""

    def __init__(self, graph, seed: int, adjacency: str = "edge_index"):
        import torch
        import torch.nn.functional as F
        from torch_geometric.nn import GCNConv
        from torch_geometric.utils import to_torch_csr_tensor

        torch.manual_seed(seed)
        self.torch, self.F = torch, F
        x = graph.x
        density = x.nnz / max(x.shape[0] * x.shape[1], 1) if sp.issparse(x) else 1.0
        self.sparse_x = density <= SPARSE_FEATURES
        self.x = (torch.sparse_csr_tensor(*(torch.from_numpy(a) for a in
                                            (x.indptr.astype(np.int64), x.indices.astype(np.int64),
                                             x.data.astype(np.float32))), x.shape)
                  if self.sparse_x else torch.from_numpy(np.asarray(x, dtype=np.float32)))
        edge_index = torch.from_numpy(np.asarray(graph.edge_index, dtype=np.int64))
        n = int(graph.num_nodes)
        self.adj = (to_torch_csr_tensor(edge_index, size=(n, n)) if adjacency == "csr"
                    else edge_index)
        self.name = "PyG"
        self.setup = f"{adjacency}, {'sparse' if self.sparse_x else 'dense'} x"
        self.y = torch.from_numpy(np.asarray(graph.y, dtype=np.int64))
        self.masks = [torch.from_numpy(np.asarray(m)) for m in
                      (graph.train_mask, graph.val_mask, graph.test_mask)]
        self.conv1 = GCNConv(self.x.shape[1], RECIPE["hidden"], cached=True)
        self.conv2 = GCNConv(RECIPE["hidden"], int(graph.num_classes), cached=True)
        self.optimizer = torch.optim.Adam([
            {"params": self.conv1.parameters(), "weight_decay": RECIPE["weight_decay"]},
            {"params": self.conv2.parameters(), "weight_decay": 0.0}], lr=RECIPE["lr"])

    def dropout_x(self, training: bool, x=None):
        p, x = RECIPE["dropout"], self.x if x is None else x
        if not self.sparse_x:
            return self.F.dropout(x, p, training)
        values = self.F.dropout(x.values(), p, training)  # the stored values only
        return self.torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), values, x.shape)

    def forward(self, training: bool):
        h = self.conv1(self.dropout_x(training), self.adj).relu()
        h = self.F.dropout(h, RECIPE["dropout"], training)
        return self.conv2(h, self.adj)

    def epoch(self) -> tuple[float, float]:
        train, val, test = self.masks
        self.optimizer.zero_grad()
        loss = self.F.cross_entropy(self.forward(True)[train], self.y[train])
        loss.backward()
        self.optimizer.step()
        with self.torch.no_grad():
            pred = self.forward(False).argmax(dim=-1)
        return tuple(float((pred[m] == self.y[m]).float().mean()) for m in (val, test))


class PygFieldSide(PygSide):
    """PyG on the k-hop subgraphs that the loss and the scores read, as a PyG user would
    write mgsparse's receptive fields by hand: `k_hop_subgraph` around the training rows and
    around the scored rows, GCNConv with normalize=False on weights normalised on the whole
    graph (so the same Â rows), features of the subgraph's nodes gathered once."""

    def __init__(self, graph, seed: int):
        super().__init__(graph, seed, "edge_index")
        import torch
        from torch_geometric.nn.conv.gcn_conv import gcn_norm
        from torch_geometric.utils import k_hop_subgraph

        torch.manual_seed(seed)
        self.name, self.setup = "PyG, k-hop subgraphs", "k_hop_subgraph"
        n = int(graph.num_nodes)
        edge_index, weight = gcn_norm(self.adj, None, n, add_self_loops=True)
        self.conv1, self.conv2 = (self._conv(a, b) for a, b in (
            (self.x.shape[1], RECIPE["hidden"]), (RECIPE["hidden"], int(graph.num_classes))))
        self.optimizer = torch.optim.Adam([
            {"params": self.conv1.parameters(), "weight_decay": RECIPE["weight_decay"]},
            {"params": self.conv2.parameters(), "weight_decay": 0.0}], lr=RECIPE["lr"])
        train, val, test = self.masks
        self.scored = torch.nonzero(train | val | test).flatten()
        self.parts = {}
        for name, rows in (("train", torch.nonzero(train).flatten()), ("scored", self.scored)):
            subset, sub_edges, mapping, kept = k_hop_subgraph(rows, 2, edge_index,
                                                              relabel_nodes=True, num_nodes=n)
            self.parts[name] = (self._rows_of_x(graph.x, subset.numpy()), sub_edges,
                                weight[kept], mapping)

    def _conv(self, fan_in: int, fan_out: int):
        from torch_geometric.nn import GCNConv

        return GCNConv(fan_in, fan_out, normalize=False)

    def _rows_of_x(self, x, rows: np.ndarray):
        torch = self.torch
        if not self.sparse_x:
            return torch.from_numpy(np.ascontiguousarray(np.asarray(x, np.float32)[rows]))
        x = sp.csr_matrix(x)[rows]
        return torch.sparse_csr_tensor(*(torch.from_numpy(a) for a in (
            x.indptr.astype(np.int64), x.indices.astype(np.int64), x.data.astype(np.float32))),
            x.shape)

    def part_forward(self, name: str, training: bool):
        x, edges, weight, mapping = self.parts[name]
        h = self.conv1(self.dropout_x(training, x), edges, weight).relu()
        h = self.F.dropout(h, RECIPE["dropout"], training)
        return self.conv2(h, edges, weight)[mapping]

    def epoch(self) -> tuple[float, float]:
        train, val, test = self.masks
        self.optimizer.zero_grad()
        loss = self.F.cross_entropy(self.part_forward("train", True), self.y[train])
        loss.backward()
        self.optimizer.step()
        with self.torch.no_grad():
            pred = self.part_forward("scored", False).argmax(dim=-1)
        y = self.y[self.scored]
        return tuple(float((pred[m[self.scored]] == y[m[self.scored]]).float().mean())
                     for m in (val, test))


def best_pyg(graph, seed: int, trials: int = 3) -> PygSide:
    """The faster PyG adjacency on this graph and thread count (median of a few epochs)."""
    sides = [PygSide(graph, seed, adjacency) for adjacency in ("edge_index", "csr")]
    times = {id(s): [] for s in sides}
    for _ in range(trials + 1):  # the first epoch builds the caches
        for side in sides:
            t0 = time.perf_counter()
            side.epoch()
            times[id(side)].append(time.perf_counter() - t0)
    best = min(sides, key=lambda s: statistics.median(times[id(s)][1:]))
    return PygSide(graph, seed, "csr" if best.setup.startswith("csr") else "edge_index")


SIDES = {"mgsparse": MgsparseSide, "mgsparse-whole": lambda g, s: MgsparseSide(g, s, False),
         "pyg": best_pyg, "pyg-khop": PygFieldSide, "floor": FloorSide}


# ---------------------------------------------------------------- time and accuracy


def alternate(graph, epochs: int, seed: int) -> dict[str, dict]:
    """Every side from `seed`, one epoch each in turn; times in ms, test acc at best val.

    The order turns by one side every epoch, so each side follows each other side equally
    often: a side's epoch starts on caches the previous side left, and small graphs feel it.

    PyG's k-hop side and mgsparse's whole-graph side run only where mgsparse's `auto` uses a
    receptive field. Where it does not (the arxiv-shaped graph: 54% of the rows train) they
    compute the whole graph again, and the k-hop side's memory traffic (2.8 s an epoch there)
    slowed whichever side followed it: mgsparse's epoch 292 -> 354 ms, the floor's 652 ->
    794 ms, PyG's 1,065 -> 1,095 ms in one run with and without it."""
    ours = MgsparseSide(graph, seed)
    if any(key.endswith(" rows") for key in ours.task.placement):  # a field is used
        sides = [best_pyg(graph, seed), PygFieldSide(graph, seed), ours,
                 MgsparseSide(graph, seed, False), FloorSide(graph, seed)]
    else:
        sides = [best_pyg(graph, seed), ours, FloorSide(graph, seed)]
    record = {s.name: {"ms": [], "best_val": -1.0, "test": 0.0, "setup": getattr(s, "setup", "")}
              for s in sides}
    for epoch in range(epochs):
        turn = epoch % len(sides)
        for side in sides[turn:] + sides[:turn]:
            t0 = time.perf_counter()
            val, test = side.epoch()
            r = record[side.name]
            r["ms"].append((time.perf_counter() - t0) * 1e3)
            if val > r["best_val"]:
                r["best_val"], r["test"] = val, test
    for side in sides:  # mgsparse names its receptive fields once it has built them
        record[side.name]["setup"] = getattr(side, "setup", "")
        record[side.name]["fields"] = getattr(side, "fields", [])
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


def probe(side_name: str, graph_name: str, nodes: int, epochs: int) -> dict:
    """Run in a child: resident-set peak of building the side and training it, above the graph."""
    graph = load_graph(graph_name, nodes)
    before = rss_bytes()
    exact = reset_peak_rss()
    side = SIDES[side_name](graph, 0)
    for _ in range(epochs):
        side.epoch()
    return {"rss_peak_above_graph": max(peak_rss() - before, 0), "graph_rss": before,
            "hwm_reset": exact, "setup": getattr(side, "setup", "")}


def measure_memory(side_name: str, args, nodes: int, threads: int) -> dict:
    command = [sys.executable, __file__, "--probe", side_name, "--graph", args.graph,
               "--nodes", str(nodes), "--epochs", str(min(args.epochs, 5)),
               "--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"memory probe for {side_name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- report


def report(title: str, runs: list[dict], threads: int) -> None:
    """One block per thread count: medians, IQR, accuracy, ratios to PyG and to the floor."""
    names = list(runs[0])
    stats = {}
    for name in names:
        ms = [m for r in runs for m in r[name]["ms"]]
        q1, q3 = np.percentile(ms, [25, 75])
        stats[name] = (statistics.median(ms), q3 - q1, float(np.mean([r[name]["test"] for r in runs])))
    print(title)
    print(f"  {'side':58}{'median ms':>11}{'IQR ms':>9}{'test acc':>10}")
    for name in names:
        med, iqr, acc = stats[name]
        setups = sorted({r[name]["setup"] for r in runs} - {""})
        label = f"{name} ({'; '.join(setups)})" if setups else name
        print(f"  {label:58}{med:>11.2f}{iqr:>9.2f}{acc:>10.2%}")
    for line in runs[0]["mgsparse"].get("fields", []):
        print(f"    mgsparse {line}")
    peers = [n for n in ("PyG", "PyG, k-hop subgraphs", "numpy floor") if n in stats]
    short = {"PyG": "PyG", "PyG, k-hop subgraphs": "PyG k-hop", "numpy floor": "numpy floor"}
    for name in ("mgsparse", "mgsparse, whole graph"):
        if name not in stats:  # the same computation as "mgsparse" (see `alternate`)
            continue
        mgs = stats[name][0]
        print(f"  {name + ':':22} " + "   ".join(f"/ {short[peer]} {mgs / stats[peer][0]:.3f}"
                                               for peer in peers))
        for peer in peers:
            record_ratio(peer, threads, mgs, stats[peer][0], side=name)
    if "mgsparse, whole graph" not in stats:
        print("  (mgsparse computes the whole graph: no receptive field, no k-hop PyG side)")


def report_memory(args, nodes: int) -> None:
    """Peak RSS above the loaded graph of each side, in child processes; ratios to PyG's."""
    peaks = {s: measure_memory(s, args, nodes, max(args.threads))
             for s in ("pyg", "pyg-khop", "mgsparse", "mgsparse-whole")}
    above = {s: m["rss_peak_above_graph"] / MB for s, m in peaks.items()}
    print(f"  peak RSS above the loaded graph ({max(args.threads)} thread(s); graph itself "
          f"{peaks['mgsparse']['graph_rss'] / MB:.0f} MB): PyG ({peaks['pyg']['setup']}) "
          f"{above['pyg']:.0f} MB, PyG k-hop {above['pyg-khop']:.0f} MB")
    for side in ("mgsparse", "mgsparse-whole"):
        print(f"    {side:15} {above[side]:6.0f} MB   / PyG {above[side] / above['pyg']:.3f}   "
              f"/ PyG k-hop {above[side] / above['pyg-khop']:.3f}")


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)
    set_num_threads(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", choices=["cora", "synthetic", "arxiv-shaped"], default="cora")
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--probe", choices=sorted(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    keep_freed_memory()  # as mgsparse train does; malloc is the process's, so every side's
    if not frameworks_available():
        print("compare_pyg: torch and torch_geometric are not installed "
              "(pip install 'mgsparse[compare]'); nothing to compare")
        return
    set_threads(max(args.threads))
    if args.probe:
        print(json.dumps(probe(args.probe, args.graph, args.nodes[0], args.epochs)))
        return
    import torch
    import torch_geometric

    print(f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}; "
          f"{args.epochs} epochs x {args.runs} run(s), sides alternating epoch by epoch")
    for nodes in args.nodes if args.graph == "synthetic" else [0]:
        graph = load_graph(args.graph, nodes)
        label = {"cora": "Cora", "arxiv-shaped": "ogbn-arxiv-shaped SBM, 128 dense features"
                 }.get(args.graph, f"SBM {nodes:,} nodes, 64 dense features")
        for threads in args.threads:
            set_threads(threads)
            runs = [alternate(graph, args.epochs, seed) for seed in range(args.runs)]
            report(f"{label}, {threads} thread(s):", runs, threads)
        if args.memory:
            report_memory(args, nodes)


if __name__ == "__main__":
    main()
