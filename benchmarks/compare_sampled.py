"""Sampled mini-batch GraphSAGE side by side: mgsparse against DGL (or PyG's NeighborLoader).

The setting: GraphSAGE with the mean aggregator, 2 layers, 64 hidden, dropout 0.5 before each
layer, ReLU, Adam lr 0.01; neighbour sampling with fanouts [25, 10] (input layer first, 10
around the seeds), batches of 1,024 seeds, one epoch = one shuffled pass over 20,000 training
nodes of a 200,000-node stochastic block model (average degree 10: ~2M directed edges, 64
dense features, 5 classes; benchmarks/floor_gcn.py `synthetic_graph`). An epoch is the
training pass only (sampling, feature gathering, forward, backward, optimizer steps): no
evaluation, which each side would do its own way.

mgsparse runs as `mgsparse train` runs a sampled config (`SampledGraphTask`, `train_epoch`).
DGL runs `dgl.dataloading.NeighborSampler` + `DataLoader` (no worker processes) and
`dgl.nn.SAGEConv(..., "mean")`; without DGL, PyG runs `NeighborLoader` + `SAGEConv` (the
batch's seed rows are the first rows of its output, as PyG documents).

Times are measured in one process, the sides alternating epoch by epoch (so that both see the
same machine), at each `--threads` count (torch.set_num_threads and mgsparse's
sparse.set_num_threads; BLAS one thread per call). Set OMP_WAIT_POLICY=PASSIVE so that
idle OpenMP threads do not spin while the other side runs (the command below does).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/compare_sampled.py [--epochs 6] [--threads 1 2]
    OMP_WAIT_POLICY=PASSIVE python benchmarks/compare_sampled.py --only mgsparse --epochs 3

Without torch plus DGL or torch_geometric it measures mgsparse alone and says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
from floor_gcn import synthetic_graph
from speed_table import record_ratio

from mgsparse.config import config_from_dict
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.optim import Adam
from mgsparse.run import train_epoch
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.sampled import SampledGraphTask
from mgsparse.sparse import set_num_threads

SETTING = {"nodes": 200_000, "train": 20_000, "hidden": 64, "fanouts": [25, 10],
           "batch": 1024, "dropout": 0.5, "lr": 0.01}


def peer() -> str | None:
    """"dgl", "pyg" or None: the peer framework that imports here."""
    for name in ("dgl", "torch_geometric"):
        try:
            __import__("torch")
            __import__(name)
            return "dgl" if name == "dgl" else "pyg"
        except ImportError:
            continue
    return None


def sampled_graph(seed: int = 0):
    """The SBM with `SETTING["train"]` training nodes drawn uniformly."""
    graph = synthetic_graph(SETTING["nodes"], seed=seed)
    mask = np.zeros(graph.num_nodes, dtype=bool)
    mask[np.random.default_rng(seed).choice(graph.num_nodes, SETTING["train"], replace=False)] = True
    return dataclasses.replace(graph, train_mask=mask)


class MgsparseSide:
    name = "mgsparse"

    def __init__(self, graph, seed: int):
        config = config_from_dict({
            "dataset": {"name": "cora"},
            "model": {"kind": "sage", "hidden": SETTING["hidden"], "dropout": SETTING["dropout"]},
            "optim": {"name": "adam", "lr": SETTING["lr"], "weight_decay": 0.0},
            "train": {"grad_clip_norm": None, "seed": seed, "batch_size": SETTING["batch"]},
            "sampler": {"fanouts": SETTING["fanouts"]}}, "compare_sampled")
        self.task = SampledGraphTask(config, graph)
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = Adam(self.model.parameters(), lr=SETTING["lr"])
        self.shuffle = shuffle_generator(seed)

    def epoch(self) -> float:
        return train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle),
                           None)[0]


class TorchSide:
    """The torch half of both peers: the model is two SAGEConvs, dropout before each."""

    def __init__(self, graph, seed: int):
        import torch

        torch.manual_seed(seed)
        self.torch, self.F = torch, torch.nn.functional
        self.x = torch.from_numpy(np.asarray(graph.x, dtype=np.float32))
        self.y = torch.from_numpy(np.asarray(graph.y, dtype=np.int64))
        self.train_idx = torch.from_numpy(np.flatnonzero(graph.train_mask))
        self.convs = torch.nn.ModuleList(self.conv(a, b) for a, b in (
            (self.x.shape[1], SETTING["hidden"]), (SETTING["hidden"], int(graph.num_classes))))
        self.optimizer = torch.optim.Adam(self.convs.parameters(), lr=SETTING["lr"])

    def step(self, loss) -> float:
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return float(loss)

    @staticmethod
    def call(conv, h, g):
        return conv(h, g)  # PyG's order; DGL's convs take the graph first

    def layers(self, h, graphs):
        for i, (conv, g) in enumerate(zip(self.convs, graphs)):
            h = self.call(conv, self.F.dropout(h, SETTING["dropout"], True), g)
            if i < len(self.convs) - 1:
                h = h.relu()
        return h


class DglSide(TorchSide):
    name = "DGL"

    def __init__(self, graph, seed: int):
        import dgl
        import torch
        from dgl.nn import SAGEConv

        self.conv = lambda a, b: SAGEConv(a, b, "mean")
        super().__init__(graph, seed)
        src, dst = (torch.from_numpy(np.asarray(e, dtype=np.int64)) for e in graph.edge_index)
        self.graph = dgl.graph((src, dst), num_nodes=int(graph.num_nodes))
        sampler = dgl.dataloading.NeighborSampler(SETTING["fanouts"])
        self.loader = dgl.dataloading.DataLoader(self.graph, self.train_idx, sampler,
                                                 batch_size=SETTING["batch"], shuffle=True,
                                                 drop_last=False, num_workers=0)
        self.setup = f"dgl {dgl.__version__}"

    @staticmethod
    def call(conv, h, g):
        return conv(g, h)

    def epoch(self) -> float:
        for input_nodes, seeds, blocks in self.loader:
            h = self.layers(self.x[input_nodes], blocks)
            last = self.step(self.F.cross_entropy(h, self.y[seeds]))
        return last


class PygSide(TorchSide):
    name = "PyG"

    def __init__(self, graph, seed: int):
        import torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        from torch_geometric.nn import SAGEConv

        self.conv = lambda a, b: SAGEConv(a, b, aggr="mean")
        super().__init__(graph, seed)
        data = Data(x=self.x, y=self.y, num_nodes=int(graph.num_nodes),
                    edge_index=torch.from_numpy(np.asarray(graph.edge_index, dtype=np.int64)))
        self.loader = NeighborLoader(data, num_neighbors=SETTING["fanouts"][::-1],
                                     input_nodes=self.train_idx, batch_size=SETTING["batch"],
                                     shuffle=True)

    def epoch(self) -> float:
        for batch in self.loader:
            h = self.layers(batch.x, [batch.edge_index] * 2)[: batch.batch_size]
            last = self.step(self.F.cross_entropy(h, batch.y[: batch.batch_size]))
        return last


def alternate(sides: list, epochs: int) -> dict[str, list[float]]:
    """One epoch of each side in turn (the order turning every epoch); ms per epoch. The
    first epoch of each side (allocations, lazy imports) is left out."""
    times = {s.name: [] for s in sides}
    for epoch in range(epochs + 1):
        turn = epoch % len(sides)
        for side in sides[turn:] + sides[:turn]:
            t0 = time.perf_counter()
            side.epoch()
            if epoch:
                times[side.name].append((time.perf_counter() - t0) * 1e3)
    return times


def set_threads(n: int) -> None:
    set_num_threads(n)
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", choices=["mgsparse"], help="measure mgsparse alone")
    args = parser.parse_args()
    keep_freed_memory()  # as mgsparse train does; malloc is the process's, so both sides'
    framework = None if args.only else peer()
    graph = sampled_graph()
    print(f"SBM {graph.num_nodes:,} nodes, {graph.edge_index.shape[1]:,} edges, "
          f"{SETTING['train']:,} training nodes; GraphSAGE mean, hidden {SETTING['hidden']}, "
          f"fanouts {SETTING['fanouts']}, batch {SETTING['batch']}; {args.epochs} epochs/side")
    if framework is None and not args.only:
        print("compare_sampled: neither dgl nor torch_geometric imports; mgsparse alone")
    for threads in args.threads:
        set_threads(threads)
        sides = [MgsparseSide(graph, 0)]
        if framework:
            sides.append((DglSide if framework == "dgl" else PygSide)(graph, 0))
        times = alternate(sides, args.epochs)
        med = {name: statistics.median(ms) for name, ms in times.items()}
        print(f"{threads} thread(s):")
        for name, ms in times.items():
            q1, q3 = np.percentile(ms, [25, 75])
            print(f"  {name + ':':10} median {med[name]:9.1f} ms   IQR {q3 - q1:7.1f} ms")
        if framework:
            other = sides[1].name
            print(f"  mgsparse / {other}: {med['mgsparse'] / med[other]:.3f}")
            record_ratio(other, threads, med["mgsparse"], med[other])


if __name__ == "__main__":
    main()
