"""The standard 2-layer GCN on the whole graph, side by side: mgsparse against DGL's GraphConv.

The recipe of benchmarks/compare_pyg.py (Kipf & Welling: hidden 16, dropout 0.5 before each
layer, ReLU, Adam lr 0.01, weight decay 5e-4 on the first layer only, no clipping), on the
ogbn-arxiv-shaped SBM (169,343 nodes, 2.37M edges, 128 dense features, 54% of the nodes
labelled for training, so the receptive field is the whole graph) or an SBM of `--nodes`
nodes. An epoch is one training step plus one evaluation forward, as in compare_pyg.py.

mgsparse runs compare_pyg.py's `MgsparseSide` with `train.receptive_field: false`: every
layer on every node, as DGL (on the arxiv-shaped graph `auto` does the same). DGL runs `dgl.nn.GraphConv(norm="both")` on the graph with one self
loop per node (Â = D^-1/2 (A + I) D^-1/2, as mgsparse's), weights first where that is
narrower (GraphConv's own rule). The sides alternate epoch by epoch in one process at each
`--threads` count (torch.set_num_threads and mgsparse's pool; BLAS one thread per call); set
OMP_WAIT_POLICY=PASSIVE so that idle OpenMP threads do not spin while mgsparse runs. The
process keeps freed memory for reuse as `mgsparse train` does. DGL installs in its own venv
(`torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 "numpy<2" pandas`); without it the script says so
and exits 0.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/compare_dgl_gcn.py [--graph arxiv-shaped] \\
        [--epochs 8] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from compare_pyg import MgsparseSide, set_threads
from compare_sampled import peer
from floor_gcn import RECIPE, load_graph
from speed_table import record_ratio

from mgsparse.kernels.allocator import keep_freed_memory


class DglSide:
    name = "DGL"

    def __init__(self, graph, seed: int):
        import dgl
        import torch
        from dgl.nn import GraphConv

        torch.manual_seed(seed)
        self.torch, self.F = torch, torch.nn.functional
        src, dst = (torch.from_numpy(np.asarray(e, np.int64)) for e in graph.edge_index)
        self.graph = dgl.add_self_loop(dgl.remove_self_loop(
            dgl.graph((src, dst), num_nodes=int(graph.num_nodes))))
        self.x = torch.from_numpy(np.asarray(graph.x, dtype=np.float32))
        self.y = torch.from_numpy(np.asarray(graph.y, dtype=np.int64))
        self.masks = [torch.from_numpy(np.asarray(m)) for m in
                      (graph.train_mask, graph.val_mask, graph.test_mask)]
        self.conv1 = GraphConv(self.x.shape[1], RECIPE["hidden"], norm="both")
        self.conv2 = GraphConv(RECIPE["hidden"], int(graph.num_classes), norm="both")
        self.optimizer = torch.optim.Adam([
            {"params": self.conv1.parameters(), "weight_decay": RECIPE["weight_decay"]},
            {"params": self.conv2.parameters(), "weight_decay": 0.0}], lr=RECIPE["lr"])

    def forward(self, training: bool):
        p = RECIPE["dropout"]
        h = self.conv1(self.graph, self.F.dropout(self.x, p, training)).relu()
        return self.conv2(self.graph, self.F.dropout(h, p, training))

    def epoch(self) -> tuple[float, float]:
        train, val, test = self.masks
        self.optimizer.zero_grad()
        self.F.cross_entropy(self.forward(True)[train], self.y[train]).backward()
        self.optimizer.step()
        with self.torch.no_grad():
            pred = self.forward(False).argmax(dim=-1)
        return tuple(float((pred[m] == self.y[m]).float().mean()) for m in (val, test))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", choices=["arxiv-shaped", "synthetic"], default="arxiv-shaped")
    parser.add_argument("--nodes", type=int, default=100_000, help="synthetic only")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if peer() != "dgl":
        print("compare_dgl_gcn: torch and dgl are not installed; nothing to compare")
        return
    keep_freed_memory()  # as mgsparse train does; malloc is the process's, so both sides'
    graph = load_graph(args.graph, args.nodes)
    print(f"GCN (hidden {RECIPE['hidden']}), {args.graph} graph: {graph.num_nodes:,} nodes, "
          f"{graph.edge_index.shape[1]:,} edges, whole graph; {args.epochs} epochs/side after "
          "one warm-up")
    for threads in args.threads:
        set_threads(threads)
        sides = [MgsparseSide(graph, 0, False), DglSide(graph, 0)]
        times = {s.name: [] for s in sides}
        best = {s.name: (-1.0, 0.0) for s in sides}
        for epoch in range(args.epochs + 1):
            for side in sides[epoch % 2:] + sides[:epoch % 2]:
                t0 = time.perf_counter()
                val, test = side.epoch()
                if epoch:
                    times[side.name].append((time.perf_counter() - t0) * 1e3)
                best[side.name] = max(best[side.name], (val, test), key=lambda vt: vt[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{threads} thread(s): " + "   ".join(
            f"{k} {v:,.0f} ms (test {best[k][1]:.1%} at best val)" for k, v in med.items()))
        ours = sides[0].name
        print(f"  mgsparse / DGL: {med[ours] / med['DGL']:.3f}")
        record_ratio("DGL", threads, med[ours], med["DGL"])


if __name__ == "__main__":
    main()
