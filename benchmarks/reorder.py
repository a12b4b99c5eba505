"""Whole-graph GCN epochs with each node order of `dataset.reorder`, alternating in one process.

One graph is loaded once; each order (none = the file's or generator's own numbering, rcm,
degree, and metis where pymetis, the `distributed` extra, is installed) makes its own task from
it as `mgsparse train` does (`GraphTask`, the config's recipe, `train.receptive_field: false`:
every layer on every node). Rounds step each order once, the order of the sides rotating each
round; round 0 (caches, first-call work) is not timed. An epoch is what the training loop runs:
one training step (with the config's gradient clipping), then the scores (a forward on the
whole graph). Prints the time each permutation took to compute (METIS's is the one that counts:
about 1.8 s on the 100,000-node graph, against 60-200 ms for rcm; a run pays it once, at load),
the median epoch of each order in wall and in CPU time (the process's, all its threads: on a
shared machine the wall time also counts the waits for a core), their ratios to `none`, and the
test accuracy each reached (the same model on the same graph: equal up to dropout masks drawn
in another order).

    python benchmarks/reorder.py pubmed [--rounds 20] [--threads 1]
    python benchmarks/reorder.py synthetic --nodes 100000 [--rounds 10]
    python benchmarks/reorder.py pubmed --set model.hidden=64    # any config override

`pubmed` reads configs/pubmed.yaml (the Planetoid files through `MGSPARSE_PLANETOID_URL` or a
download). Where the features file (ind.pubmed.allx, 7.6 MB) cannot be had but the graph can
(`MGSPARSE_PLANETOID_URL` a local folder holding ind.pubmed.graph, ally, ty and test.index),
the run says so and keeps PubMed's topology, labels and split with stand-in features of
PubMed's shape (500 columns, 50 stored TF-IDF-like values a row, rows summing to 1): the
order changes where the propagation's gathers land, which the topology decides. `synthetic`
reads configs/synthetic.yaml at `--nodes` nodes; the generator numbers nodes at random (each
node's class is a seeded permutation of the ids), so its own order has no locality at all.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import itertools
import os
import statistics
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mgsparse.config import load_config
from mgsparse.data import Graph
from mgsparse.data.graph import undirected_edges
from mgsparse.data.reorder import ORDERS, node_order
from mgsparse.data.sources.planetoid_io import load_pickle
from mgsparse.data.transforms import index_to_mask
from mgsparse.errors import MgsparseError
from mgsparse.run import build_optimizer, load_graph, train_epoch
from mgsparse.run.tasks.nodes import GraphTask
from mgsparse.sparse import set_num_threads

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
PUBMED_NNZ_PER_ROW = 50  # ind.pubmed.allx: 988,031 stored values over 19,717 rows


def pubmed_topology(folder: Path, seed: int = 0) -> Graph:
    """PubMed's graph, labels and public split from the raw files in `folder`, with stand-in
    features of PubMed's shape (see the module docstring)."""
    stem = folder / "ind.pubmed"
    adjacency = load_pickle(Path(f"{stem}.graph"))
    n = len(adjacency)  # 19,717: every node has an entry, isolated ones an empty list
    src = np.repeat(np.fromiter(adjacency, np.int64, n), [len(v) for v in adjacency.values()])
    dst = np.fromiter(itertools.chain.from_iterable(adjacency.values()), np.int64, src.size)
    ally, ty = load_pickle(Path(f"{stem}.ally")), load_pickle(Path(f"{stem}.ty"))
    test = np.loadtxt(f"{stem}.test.index", dtype=np.int64)
    y = np.full(n, -1, np.int64)
    y[:len(ally)] = ally.argmax(axis=1)
    y[test] = ty.argmax(axis=1)
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, 500, (n, PUBMED_NNZ_PER_ROW))
    x = sp.csr_matrix((rng.random(cols.size, np.float32), (np.repeat(np.arange(n),
                       PUBMED_NNZ_PER_ROW), cols.ravel())), shape=(n, 500))
    x = sp.diags(1 / np.maximum(x.sum(axis=1).A1, 1e-12)).astype(np.float32) @ x
    train, val = np.zeros(n, bool), np.zeros(n, bool)
    train[:60], val[60:560] = True, True
    return Graph(x=x.tocsr(), y=y, edge_index=undirected_edges(src, dst, n), num_nodes=n,
                 num_classes=3, train_mask=train, val_mask=val, test_mask=index_to_mask(test, n),
                 name="pubmed (graph; stand-in features)")


def load(config) -> Graph:
    """The config's graph; PubMed's topology with stand-in features when its features file
    is missing and the graph's files are in a local mirror folder."""
    try:
        return load_graph(config.dataset)
    except MgsparseError as e:
        folder = Path(os.environ.get("MGSPARSE_PLANETOID_URL", ""))
        if config.dataset.name != "pubmed" or not (folder / "ind.pubmed.graph").is_file():
            raise
        print(f"the PubMed files did not load ({e}); PubMed's graph from {folder} instead")
        return pubmed_topology(folder)


def measured_orders() -> list[str]:
    """`ORDERS`, without metis where pymetis is not installed (it would raise at load)."""
    return [o for o in ORDERS if o != "metis" or importlib.util.find_spec("pymetis")]


class Side:
    """One order's task, model and optimizer, stepped one epoch at a time."""

    def __init__(self, config, graph, order: str):
        self.config = dataclasses.replace(
            config, dataset=dataclasses.replace(config.dataset, reorder=order))
        self.task = GraphTask(self.config, graph)
        self.model = self.task.build_model(np.random.default_rng(self.config.train.seed))
        self.optimizer = build_optimizer(self.config.optim, self.model)
        self.shuffle = np.random.default_rng(self.config.train.seed)
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def epoch(self) -> tuple[float, float]:
        """(wall, CPU) seconds of one training step and one scoring pass."""
        t0, c0 = time.perf_counter(), time.process_time()
        train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle),
                    self.config.train.grad_clip_norm,
                    replay=self.task.replay(self.model, training=True))
        self.scores = self.task.evaluate(self.model)
        return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["pubmed", "synthetic"])
    parser.add_argument("--nodes", type=int, default=100_000, help="synthetic only")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override, as `mgsparse train --set` takes it")
    args = parser.parse_args()
    sets = ["train.receptive_field=false", *args.set]
    if args.dataset == "synthetic":
        sets.append(f"dataset.num_nodes={args.nodes}")
    config = load_config(CONFIGS / f"{args.dataset}.yaml", sets)
    set_num_threads(args.threads)
    graph = load(config)
    print(f"{graph.name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
          f"{graph.num_features} features; {config.model.kind}, hidden {config.model.hidden}, "
          f"whole graph, {args.threads} thread(s), {args.rounds} rounds alternating")
    names = measured_orders()
    if "metis" not in names:
        print("  (no metis: pymetis is not installed; pip install 'mgsparse[distributed]')")
    for order in names[1:]:
        t0 = time.perf_counter()
        node_order(graph.edge_index, graph.num_nodes, order)
        print(f"  computing the {order} order: {(time.perf_counter() - t0) * 1e3:,.0f} ms")
    sides = {order: Side(config, graph, order) for order in names}
    for r in range(args.rounds + 1):
        k = r % len(names)
        for name in names[k:] + names[:k]:  # who goes first rotates
            wall, cpu = sides[name].epoch()
            if r:
                sides[name].wall.append(wall)
                sides[name].cpu.append(cpu)
    wall0, cpu0 = (statistics.median(getattr(sides["none"], k)) for k in ("wall", "cpu"))
    print(f"{'order':<8}{'wall ms':>9}{'/ none':>8}{'CPU ms':>9}{'/ none':>8}{'test acc':>10}")
    for name, side in sides.items():
        wall, cpu = statistics.median(side.wall), statistics.median(side.cpu)
        print(f"{name:<8}{wall * 1e3:>9.1f}{wall / wall0:>8.3f}{cpu * 1e3:>9.1f}"
              f"{cpu / cpu0:>8.3f}{side.scores.test_acc:>10.3f}")


if __name__ == "__main__":
    main()
