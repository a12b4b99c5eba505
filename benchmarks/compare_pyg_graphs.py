"""GIN graph classification on NCI1 in PyTorch Geometric, in mgsparse and by hand in numpy,
side by side.

The same model on every side, Xu et al.'s GIN as configs/nci1-gin.yaml sets it: 4 GINConv
layers (MLP Linear -> BatchNorm1d -> ReLU -> Linear, then BatchNorm1d and ReLU), hidden 64,
the config's readout (mean) of every level (the input's too), one linear head per level after
dropout 0.5, heads summed; Adam lr 0.01, no weight decay, no clipping; batches of 128 graphs
reshuffled every epoch. All train on the same stratified 80/10/10 split (mgsparse's, seed 0).

PyG runs as its users write it: a list of `Data` graphs, `torch_geometric.loader.DataLoader`
collating each batch (training batches shuffled, evaluation batches of `EVAL_GRAPHS` graphs),
PyG's `GINConv` and `global_mean_pool`. mgsparse runs as `mgsparse train` does: the task's
graph batches (`mgsparse/run/tasks/graphs.py`: built per training step, evaluation batches
built once), `GraphClassifier` (`mgsparse/nn/graphnet.py`). The numpy floor is
`benchmarks/floor_gin.py`: the same epoch written by hand in numpy/scipy, no autograd; and the
line "dense products alone" times only that epoch's matrix products (at this machine's BLAS
peak), the part no rewrite of the rest removes.

Epoch time (every training step of the epoch plus one evaluation pass over every graph) is
measured in one process, the sides alternating epoch by epoch so all see the same machine,
with `--threads` threads each (torch.set_num_threads, mgsparse.sparse.set_num_threads; the
floor's scipy kernels run on one core). The process keeps freed memory for reuse as
`mgsparse train` does (`mgsparse.kernels.allocator.keep_freed_memory`): malloc is the
process's, so every side runs under the same setting.

    MGSPARSE_TU_URL=<folder of the TU zips> python benchmarks/compare_pyg_graphs.py \\
        [--epochs 10] [--threads 1] [--profile]

`--profile` ends with cProfile's top functions of a few mgsparse epochs. Without torch and
torch_geometric it says so and exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from compare_pyg import frameworks_available
from floor_gin import RECIPE, FloorGIN
from speed_table import record_ratio

from mgsparse.config import load_config
from mgsparse.data import load_dataset
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.run import build_optimizer, train_epoch
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.graphs import EVAL_GRAPHS, GraphClassificationTask
from mgsparse.sparse import set_num_threads

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "nci1-gin.yaml"


class MgsparseSide:
    """mgsparse as `mgsparse train configs/nci1-gin.yaml` runs one split."""

    name = "mgsparse"

    def __init__(self, graphs, seed: int):
        self.config = load_config(CONFIG, ["monitor.memory=false", f"train.seed={seed}"])
        self.task = GraphClassificationTask(self.config, graphs)
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = build_optimizer(self.config.optim, self.model)
        self.shuffle = shuffle_generator(seed)

    def epoch(self) -> tuple[float, float]:
        """(val acc, test acc) after one epoch."""
        train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle),
                    None)
        scores = self.task.evaluate(self.model)
        return scores.val_acc, scores.test_acc


class PygSide:
    """The same GIN in PyG, on PyG's DataLoader."""

    name = "PyG"

    def __init__(self, graphs, split: tuple[np.ndarray, np.ndarray, np.ndarray], seed: int,
                 hidden: int, layers: int, batch_size: int, readout: str):
        import torch
        from torch_geometric.data import Data
        from torch_geometric.loader import DataLoader

        torch.manual_seed(seed)
        self.torch = torch
        data = [Data(x=torch.from_numpy(g.x), edge_index=torch.from_numpy(g.edge_index),
                     y=torch.from_numpy(g.y)) for g in (graphs.subset([i]) for i in
                                                        range(graphs.num_graphs))]
        train, self.val, self.test = split
        self.train_loader = DataLoader([data[i] for i in train], batch_size=batch_size,
                                       shuffle=True)
        self.eval_loader = DataLoader(data, batch_size=EVAL_GRAPHS)
        self.y = graphs.y
        self.model = _pyg_gin(graphs.num_features, hidden, graphs.num_classes, layers, readout)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.01)

    def epoch(self) -> tuple[float, float]:
        torch, F = self.torch, self.torch.nn.functional
        self.model.train()
        for batch in self.train_loader:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(batch), batch.y).backward()
            self.optimizer.step()
        self.model.eval()
        with torch.no_grad():
            pred = torch.cat([self.model(b).argmax(1) for b in self.eval_loader]).numpy()
        return tuple(float((pred[i] == self.y[i]).mean()) for i in (self.val, self.test))


def _pyg_gin(in_features: int, hidden: int, num_classes: int, layers: int, readout: str):
    import torch
    from torch.nn import BatchNorm1d, Dropout, Linear, ModuleList, ReLU, Sequential
    from torch_geometric.nn import GINConv, global_add_pool, global_mean_pool

    pool = global_mean_pool if readout == "mean" else global_add_pool

    class GIN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            widths = [in_features] + [hidden] * layers
            self.convs = ModuleList(GINConv(Sequential(Linear(a, b), BatchNorm1d(b), ReLU(),
                                                       Linear(b, b))) for a, b in
                                    itertools.pairwise(widths))
            self.norms = ModuleList(BatchNorm1d(hidden) for _ in range(layers))
            self.heads = ModuleList(Linear(w, num_classes) for w in widths)
            self.dropout = Dropout(0.5)

        def forward(self, data):
            hs = [data.x]
            for conv, norm in zip(self.convs, self.norms):
                hs.append(norm(conv(hs[-1], data.edge_index)).relu())
            return sum(head(self.dropout(pool(h, data.batch)))
                       for h, head in zip(hs, self.heads))

    return GIN()


def alternate(sides: list, epochs: int) -> dict[str, dict]:
    """Each side's epochs, interleaved: wall and CPU times (ms; the process's CPU time counts
    what the side computed, whatever else the machine runs) and accuracies at the best val
    epoch."""
    out = {s.name: {"times": [], "cpu": [], "best": (-1.0, 0.0)} for s in sides}
    for _ in range(epochs):
        for side in sides:
            t0, c0 = time.perf_counter(), time.process_time()
            val, test = side.epoch()
            rec = out[side.name]
            rec["times"].append((time.perf_counter() - t0) * 1e3)
            rec["cpu"].append((time.process_time() - c0) * 1e3)
            rec["best"] = max(rec["best"], (val, test), key=lambda vt: vt[0])
    return out


def profile(side: MgsparseSide, epochs: int) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(epochs):
        side.epoch()
    profiler.disable()
    print(f"\ncProfile of {epochs} mgsparse epochs (own time):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not frameworks_available():
        print("compare_pyg_graphs: torch and torch_geometric are not installed "
              "(pip install 'mgsparse[compare]'); nothing to compare")
        return
    import torch

    keep_freed_memory()  # as mgsparse train does; one allocator for both sides
    torch.set_num_threads(args.threads)
    set_num_threads(args.threads)
    graphs = load_dataset("nci1")
    ours = MgsparseSide(graphs, args.seed)
    m, batch = ours.config.model, ours.config.train.batch_size
    if (m.layers, m.hidden, batch) != (RECIPE["layers"], RECIPE["hidden"], RECIPE["batch"]):
        sys.exit("compare_pyg_graphs: configs/nci1-gin.yaml and floor_gin.RECIPE disagree")
    split = (ours.task.train_idx, ours.task.val_idx, ours.task.test_idx)
    pyg = PygSide(graphs, split, args.seed, m.hidden, m.layers, batch, m.readout)
    floor = FloorGIN(graphs, split, args.seed, m.readout)
    results = alternate([ours, pyg, floor], args.epochs)
    products = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        floor.products_epoch()
        products.append((time.perf_counter() - t0) * 1e3)
    print(f"NCI1, GIN ({m.layers} layers, hidden {m.hidden}, {m.readout} readout), batch "
          f"{batch}, {args.epochs} epochs, {args.threads} thread(s):")
    wall, cpu = {}, {}
    for name, rec in results.items():
        wall[name], cpu[name] = statistics.median(rec["times"]), statistics.median(rec["cpu"])
        val, test = rec["best"]
        print(f"  {name + ':':13s} epoch median {wall[name]:8.1f} ms wall, {cpu[name]:8.1f} ms "
              f"CPU   best val {val:.3f}, test there {test:.3f}")
    wall["products"] = statistics.median(products)
    record_ratio("PyG", args.threads, wall["mgsparse"], wall["PyG"])
    record_ratio("numpy floor", args.threads, wall["mgsparse"], wall[floor.name])
    print(f"  {'dense products alone:':25s} {wall['products']:8.1f} ms wall")
    print(f"  mgsparse / PyG epoch time: {wall['mgsparse'] / wall['PyG']:.2f} wall, "
          f"{cpu['mgsparse'] / cpu['PyG']:.2f} CPU")
    print(f"  mgsparse / numpy floor: {wall['mgsparse'] / wall[floor.name]:.2f} wall;  "
          f"numpy floor / PyG: {wall[floor.name] / wall['PyG']:.2f};  "
          f"dense products alone / PyG: {wall['products'] / wall['PyG']:.2f}")
    if args.profile:
        profile(ours, 3)


if __name__ == "__main__":
    main()
