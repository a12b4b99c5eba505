"""Whole-graph GAT (or GraphSAGE) training steps side by side: mgsparse against PyG's or DGL's
GATConv (SAGEConv).

The model: Veličković et al.'s GAT (2 layers, 8 heads × 8 hidden concatenated, 1 output head,
ELU, dropout 0.6 on the inputs and on the attention coefficients, self loops), Adam lr 0.005;
with `--model sage`, GraphSAGE with the mean aggregator (2 layers, 64 hidden, a root weight,
ReLU, dropout 0.5 on each layer's input, Adam lr 0.01: the setting of compare_sampled.py). On
the whole graph: a stochastic block model of `--nodes` nodes (average degree 10, 64 dense
features, 5 classes; benchmarks/floor_gcn.py `synthetic_graph`), the loss on its training
rows, every layer on every node (no receptive field). One step = forward, backward, Adam.

The peer is PyG's `GATConv` (edge_index) when torch_geometric imports, else DGL's `GATConv`.
The sides alternate step by step in one process at each `--threads` count (torch and
mgsparse's pool set alike, BLAS one thread); set OMP_WAIT_POLICY=PASSIVE so that idle OpenMP
threads do not spin while mgsparse runs.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/compare_gat.py [--model gat|sage] \\
        [--nodes 100000] [--steps 6] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from compare_sampled import peer, set_threads
from floor_gcn import synthetic_graph
from speed_table import record_ratio

from mgsparse.engine import Tensor
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.nn import GAT, GraphSAGE
from mgsparse.nn import functional as F
from mgsparse.optim import Adam

RECIPE = {"heads": 8, "hidden": 8, "dropout": 0.6, "lr": 0.005}
SAGE_RECIPE = {"hidden": 64, "dropout": 0.5, "lr": 0.01}


class MgsparseSide:
    name = "mgsparse"

    def __init__(self, graph, seed: int, model: str = "gat"):
        rng, f, c = np.random.default_rng(seed), graph.x.shape[1], int(graph.num_classes)
        if model == "sage":
            self.model = GraphSAGE(f, SAGE_RECIPE["hidden"], c, dropout=SAGE_RECIPE["dropout"],
                                   edge_index=graph.edge_index, rng=rng)
        else:
            self.model = GAT(f, RECIPE["hidden"], c, heads=RECIPE["heads"],
                             dropout=RECIPE["dropout"], attn_dropout=RECIPE["dropout"],
                             edge_index=graph.edge_index, rng=rng)
        lr = SAGE_RECIPE["lr"] if model == "sage" else RECIPE["lr"]
        self.optimizer = Adam(self.model.parameters(), lr=lr)
        self.x, self.train = Tensor(np.asarray(graph.x, np.float32)), np.flatnonzero(graph.train_mask)
        self.y = np.asarray(graph.y)[self.train]

    def step(self) -> float:
        self.model.train()
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(self.x, None)[self.train], self.y)
        loss.backward()
        self.optimizer.step()
        return float(loss.data)


class TorchSide:
    def __init__(self, graph, seed: int, framework: str, model: str = "gat"):
        import torch

        torch.manual_seed(seed)
        self.torch, self.Fn, self.model = torch, torch.nn.functional, model
        self.x = torch.from_numpy(np.asarray(graph.x, np.float32))
        self.y = torch.from_numpy(np.asarray(graph.y, np.int64))
        self.train = torch.from_numpy(np.flatnonzero(graph.train_mask))
        src, dst = (torch.from_numpy(np.asarray(e, np.int64)) for e in graph.edge_index)
        if framework == "pyg":
            self.name, self.graph = "PyG", torch.stack([src, dst])
            self.call = lambda conv, x: conv(x, self.graph)
        else:
            import dgl

            self.name, graph_ = "DGL", dgl.graph((src, dst), num_nodes=int(graph.num_nodes))
            self.graph = dgl.add_self_loop(dgl.remove_self_loop(graph_)) if model == "gat" \
                else graph_
            self.call = lambda conv, x: conv(self.graph, x).flatten(1)
        self.convs = (_sage_convs if model == "sage" else _gat_convs)(
            framework, graph.x.shape[1], int(graph.num_classes))
        self.modules = torch.nn.ModuleList(self.convs)
        lr = SAGE_RECIPE["lr"] if model == "sage" else RECIPE["lr"]
        self.optimizer = torch.optim.Adam(self.modules.parameters(), lr=lr)

    def step(self) -> float:
        sage = self.model == "sage"
        p = SAGE_RECIPE["dropout"] if sage else RECIPE["dropout"]
        act = self.Fn.relu if sage else self.Fn.elu
        self.optimizer.zero_grad()
        h = act(self.call(self.convs[0], self.Fn.dropout(self.x, p, True)))
        out = self.call(self.convs[1], self.Fn.dropout(h, p, True))
        loss = self.Fn.cross_entropy(out[self.train], self.y[self.train])
        loss.backward()
        self.optimizer.step()
        return loss.item()


def _gat_convs(framework: str, f: int, c: int) -> list:
    h, heads, p = RECIPE["hidden"], RECIPE["heads"], RECIPE["dropout"]
    if framework == "pyg":
        from torch_geometric.nn import GATConv

        return [GATConv(f, h, heads, dropout=p), GATConv(h * heads, c, 1, concat=False, dropout=p)]
    from dgl.nn import GATConv

    return [GATConv(f, h, heads, feat_drop=0.0, attn_drop=p),
            GATConv(h * heads, c, 1, feat_drop=0.0, attn_drop=p)]


def _sage_convs(framework: str, f: int, c: int) -> list:
    h = SAGE_RECIPE["hidden"]
    if framework == "pyg":
        from torch_geometric.nn import SAGEConv

        return [SAGEConv(f, h), SAGEConv(h, c)]  # mean aggregation, root weight: as mgsparse's
    from dgl.nn import SAGEConv

    return [SAGEConv(f, h, "mean"), SAGEConv(h, c, "mean")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["gat", "sage"], default="gat")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    keep_freed_memory()  # as mgsparse train does; malloc is the process's, so both sides'
    framework = peer()
    graph = synthetic_graph(args.nodes)
    what = "GraphSAGE mean, hidden 64" if args.model == "sage" else "GAT 8x8 heads"
    print(f"{what}, SBM {args.nodes:,} nodes, {graph.edge_index.shape[1]:,} edges, "
          f"whole graph; {args.steps} steps/side after one warm-up")
    if framework is None:
        print("compare_gat: neither torch_geometric nor dgl imports; mgsparse alone")
    for threads in args.threads:
        set_threads(threads)
        sides = [MgsparseSide(graph, 0, args.model)] + (
            [TorchSide(graph, 0, framework, args.model)] if framework else [])
        times = {s.name: [] for s in sides}
        for step in range(args.steps + 1):
            for side in sides[step % len(sides):] + sides[:step % len(sides)]:
                t0 = time.perf_counter()
                side.step()
                if step:
                    times[side.name].append((time.perf_counter() - t0) * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{threads} thread(s): " + "   ".join(f"{k} {v:,.0f} ms" for k, v in med.items()))
        if framework:
            other = sides[1].name
            print(f"  mgsparse / {other}: {med['mgsparse'] / med[other]:.3f}")
            record_ratio(other, threads, med["mgsparse"], med[other])


if __name__ == "__main__":
    main()
