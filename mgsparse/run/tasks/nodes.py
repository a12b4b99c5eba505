"""Node classification on one placed graph: full batch, or on the receptive fields of the rows a
loss or a score reads (`GraphTask`); `NodeTask` is what it shares with the sampled kind.

The loss is cross-entropy over the training nodes; the scores are the validation loss and
the accuracy of the argmax on each split. A full-batch epoch is one step on the whole graph.
With `train.receptive_field` (auto: for row sets of at most half the graph), the step and the
scores run on the blocks of the rows they read instead (run/field.py); whether the model can
is decided by its layers (`nn.block.block_support`: each layer carries its block form), asked
once, of one probe model, while the task is made.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from mgsparse import kernels
from mgsparse.catalog import MODELS
from mgsparse.config import Config, no_receptive_field
from mgsparse.data import Graph
from mgsparse.data.reorder import inverse, reordered
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.nn import functional as F
from mgsparse.nn.block import block_support
from mgsparse.nn.module import Module
from mgsparse.run.build import build_model
from mgsparse.run.field import AUTO_FRACTION, Field
from mgsparse.run.metrics import macro_f1, roc_auc
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.replay import Replay
from mgsparse.run.task import ACCURACY_METRICS, Batch, Metric, Scores, Task, TaskMetrics

EXTRA_METRICS = {"f1": ("f1", "macro-F1"), "auc": ("auc", "ROC-AUC (one-vs-rest)")}


def node_metrics(extra: tuple[str, ...] | None) -> TaskMetrics:
    """Classification's declaration, plus `train.metrics` (f1: macro-F1, auc: ROC-AUC one vs
    rest) on the validation and test rows; unchanged without them, so default files are."""
    return with_extra_metrics(ACCURACY_METRICS, extra)


def with_extra_metrics(base: TaskMetrics, extra: tuple[str, ...] | None) -> TaskMetrics:
    """`base` (a classification's declaration: node or graph) with `train.metrics`' columns
    on the validation and test split, their test mean and std in the summary, the
    validation ones live; `base` itself without them."""
    if not extra:
        return base
    added = tuple(Metric(f"{split}_{name}", True, short=f"{split[0]}.{short}",
                         label=f"{split} {label}")
                  for name in extra for short, label in [EXTRA_METRICS[name]]
                  for split in ("val", "test"))
    return dataclasses.replace(
        base, columns=base.columns + added,
        summary=base.summary + tuple(f"test_{n}_{k}" for n in extra for k in ("mean", "std")),
        per_run=base.per_run + tuple(m.column for m in added),
        live=base.live + tuple(f"val_{n}" for n in extra),
        legend=base.legend + "".join(f" · v.{EXTRA_METRICS[n][0]}: val {EXTRA_METRICS[n][1]}"
                                     for n in extra))


def extra_scores(extra: tuple[str, ...], z: np.ndarray, pred: np.ndarray, y: np.ndarray,
                 rows: dict[str, np.ndarray]) -> dict[str, float]:
    """`train.metrics` on each split's rows of logits `z`: macro-F1 of the argmax `pred`,
    ROC-AUC (one vs rest) of the softmax probabilities (NaN where a split holds one class)."""
    if "auc" in extra:
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
    scores = {}
    for split, r in rows.items():
        if "f1" in extra:
            scores[f"{split}_f1"] = macro_f1(y[r], pred[r])
        if "auc" in extra:
            scores[f"{split}_auc"] = _auc(y[r], p[r])
    return scores


def operand_read(config: Config) -> str | None:
    """What the model is handed: "norm_adj" (a GCN's Â), "edge_index", or None (an MLP). A
    GCN that learns its edge weights reads the edge list and rebuilds Â every step."""
    m = config.model
    reads = MODELS[m.kind].operand
    return "edge_index" if reads == "norm_adj" and m.learn_edge_weight else reads


def check_edge_weights(config: Config, graph: Graph) -> None:
    """Edge weights (an edge list's third column, `Graph.edge_weight`) enter a full-batch
    GCN's Â = D^-1/2 (A + I) D^-1/2 as A's entries, and D as weighted degrees. Every other
    reader of the graph (GAT, GraphSAGE, learned weights, sampled or receptive-field blocks)
    would train as if each weight were 1, so it is refused here, before any step."""
    m = config.model
    if graph.edge_weight is None or MODELS[m.kind].operand is None:  # an MLP reads no edge
        return
    what = f"{graph.name}'s edges carry weights (a third column in dataset.edges)"
    if MODELS[m.kind].operand != "norm_adj":
        raise ConfigError(f"model.kind: {m.kind} would ignore edge weights, and {what}: only "
                          "gcn uses edge weights; set model.kind: gcn or drop the column")
    if m.learn_edge_weight:
        raise ConfigError(f"model.learn_edge_weight learns the weights from 1, and {what}: "
                          "set model.learn_edge_weight: false to train on them")
    if config.train.batch_size is not None:
        raise ConfigError(f"train.batch_size: sampled blocks would ignore edge weights, and "
                          f"{what}: set train.batch_size: null to train on them")
    if config.train.receptive_field is True:
        raise ConfigError(f"train.receptive_field: true would ignore edge weights, and {what}: "
                          "set it to auto or false to train on the whole graph")


class NodeTask(Task):
    """Transductive node classification: labels and splits of one graph, placed once and read
    by every epoch of every run; subclasses say how an epoch steps and what logits are."""

    def __init__(self, config: Config, graph: Graph, dtype: Any = np.float32,
                 budget: int | None = None):
        self.config, self.name, self.budget, self.dtype = config, graph.name, budget, dtype
        check_edge_weights(config, graph)
        # a new node order for locality, once; every id a user sees goes through `user_ids`
        graph, self.order = reordered(graph, config.dataset.reorder)
        self.weighted = graph.edge_weight is not None  # read by the whole graph's Â only
        self.metrics = node_metrics(config.train.metrics)
        self.placed = PlacedGraph.from_graph(graph, operand_read(config),
                                             config.sparse.sparsity_threshold, dtype, budget)
        if self.order is not None:  # the run's summary says so, beside the placement
            self.placed.placement["node order"] = (f"{config.dataset.reorder} (outputs keep the "
                                                   "dataset's ids)")
        self.edge_index = self.placed.edge_index
        self.y = np.asarray(graph.y, np.int64)  # (N,), -1 = no label
        self.train_idx = np.flatnonzero(graph.train_mask)
        self.val_idx = np.flatnonzero(graph.val_mask)
        self.test_idx = np.flatnonzero(graph.test_mask)
        self.scored_idx = np.unique(np.concatenate([self.train_idx, self.val_idx,
                                                    self.test_idx]))  # rows a score reads
        self.num_classes = int(graph.num_classes)
        self.splits = self.train_idx, self.val_idx, self.test_idx
        self.train_y = self.y[self.train_idx]
        # the same, for logits of the scored rows only: targets and positions among them
        self._scored = (self.y[self.scored_idx],
                        tuple(np.searchsorted(self.scored_idx, i) for i in self.splits))
        self._checked: dict[tuple, tuple[F.Targets, ...]] = {}  # see `_split_targets`

    def user_ids(self, rows: np.ndarray) -> np.ndarray:
        """The user's ids (the file's numbering) of the run's node rows `rows`."""
        return rows if self.order is None else self.order[rows]

    def run_rows(self, ids: np.ndarray) -> np.ndarray:
        """The run's rows of the user's node ids `ids` (`user_ids`' inverse)."""
        return ids if self.order is None else inverse(self.order)[ids]

    @property
    def features(self) -> Any:
        return self.placed.features

    @property
    def operand(self) -> Any:
        """The model's whole-graph operand (Â, the edge list or None), built on first use."""
        return self.placed.operand

    @property
    def num_nodes(self) -> int:
        return self.placed.num_nodes

    @property
    def num_features(self) -> int:
        return self.placed.num_features

    def build_model(self, rng: np.random.Generator) -> Module:
        return build_model(self.config.model, self.num_features, self.num_classes, rng,
                           edge_index=self.edge_index, dtype=self.dtype)

    def logits(self, model: Module) -> Tensor:
        """(N, num_classes) for every node: the model on the features and its operand."""
        if self.operand is None:
            return model(self.features)
        return model(self.features, self.operand)

    def _field(self, name: str, rows: np.ndarray) -> Field | None:
        """The receptive field `name` of `rows`, or None: logits of the whole graph's rows."""
        return None

    def evaluate(self, model: Module) -> Scores:
        field = self._field("scored", self.scored_idx)
        replay = self.replay(model, training=False)
        with no_grad():
            logits = self._scores_logits(model, field, replay)
        y, (_, val, test) = (self.y, self.splits) if field is None else self._scored
        val_at, *acc_at = self._split_targets(field is None, logits)
        val_loss = float(F.cross_entropy_at(logits, val_at).data)
        pred = kernels.argmax_rows(logits.data)  # once for the three scores
        extra = self._extra_scores(logits.data, pred, y, {"val": val, "test": test})
        train_acc, val_acc, test_acc = (F.accuracy_at(pred, at) for at in acc_at)
        return self.metrics.scores(val_loss=val_loss, train_acc=train_acc, val_acc=val_acc,
                                   test_acc=test_acc, **extra)

    def _scores_logits(self, model: Module, field: Field | None,
                       replay: Replay | None) -> Tensor:
        """The logits the scores read, in eval mode: the whole graph's or the field's."""
        def compute() -> Tensor:
            return self.logits(model) if field is None else field.logits(model)
        if replay is not None:
            return replay.forward(compute)
        model.eval()
        return compute()

    def _split_targets(self, whole: bool, logits: Tensor) -> tuple[F.Targets, ...]:
        """The targets of the validation loss and of the train, val and test accuracies, for
        the whole graph's logits or the scoring field's: checked by the first evaluate of
        logits of this shape, as `F.cross_entropy` and `F.accuracy` check them (same order,
        same errors), then kept, since the labels and splits never change. Every later
        epoch's scores skip the checks (~20 µs of Cora's epoch), bitwise the same."""
        key = (whole, logits.shape)
        checked = self._checked.get(key)
        if checked is None:
            y, (train, val, test) = (self.y, self.splits) if whole else self._scored
            pred = logits.data[:, 0] if logits.ndim == 2 else logits.data  # accuracy's shape
            checked = (F.Targets.for_cross_entropy(y, val, logits),
                       *(F.Targets.for_accuracy(y, rows, pred) for rows in (train, val, test)))
            self._checked[key] = checked
        return checked

    def _extra_scores(self, z: np.ndarray, pred: np.ndarray, y: np.ndarray,
                      rows: dict[str, np.ndarray]) -> dict[str, float]:
        """`train.metrics` on the validation and test rows (`extra_scores`)."""
        return extra_scores(self.config.train.metrics or (), z, pred, y, rows)


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC-AUC, or NaN where it is undefined (rows of a single class): never the best."""
    try:
        return roc_auc(y, p)
    except MgsparseError:
        return float("nan")


class GraphTask(NodeTask):
    """Full-batch node classification: one step per epoch, on the whole graph or on the
    receptive fields of the training rows and of the scored rows (see the module). When the
    fields serve both, the whole-graph operand is built only if something asks for it (a
    picture of the embedding, the dense-vs-sparse bench)."""

    def __init__(self, config: Config, graph: Graph, dtype: Any = np.float32,
                 budget: int | None = None):
        super().__init__(config, graph, dtype, budget)
        self._propagated: tuple | None = None  # (features, operand, Âᴷ X) of an SGC series
        self._replays: dict[bool, tuple[Module, int, Replay]] = {}  # see `replay`
        self._fields_allowed = self._may_use_fields()
        fields = [self._field(name, rows) for name, rows in
                  (("training", self.train_idx), ("scored", self.scored_idx))]
        self.placed.release_sampler()
        if any(f is None for f in fields):
            _ = self.placed.operand  # the whole graph is read: placed now
        else:
            self.placed.defer_operand("built on demand (training and scores read blocks)")

    def _may_use_fields(self) -> bool:
        """Whether the setting and the model allow receptive fields. The model's layers are
        asked once, of a probe model: a layer without a block form (`on_block`) means the
        whole graph under `auto` (the placement says why) and a config error under `true`,
        raised now rather than at the first step."""
        setting, n = self.config.train.receptive_field, self.num_nodes
        wanted = setting is True or (setting == "auto" and min(
            len(self.train_idx), len(self.scored_idx)) <= AUTO_FRACTION * n)
        if not wanted or no_receptive_field(self.config.model):
            return False
        if self.weighted:  # blocks use unweighted degrees (`check_edge_weights`)
            self.placement["receptive field"] = "not used: edge weights (the whole graph's Â)"
            return False
        why = block_support(self.build_model(np.random.default_rng(0)))
        if why is not None and setting is True:
            raise ConfigError(f"train.receptive_field: true cannot apply: {why}; set "
                              "train.receptive_field: false to train on the whole graph")
        if why is not None:
            self.placement["receptive field"] = f"not used: {why} (the whole graph instead)"
        return why is None

    def _field(self, name: str, rows: np.ndarray) -> Field | None:
        """The receptive field of `rows` when `train.receptive_field` and the model allow it
        (run/field.py), built once for every epoch and run; None: the whole graph."""
        if not self._fields_allowed or (self.config.train.receptive_field == "auto"
                                        and len(rows) > AUTO_FRACTION * self.num_nodes):
            return None
        return self.placed.field(name, rows, self.config.model.layers)

    def build_model(self, rng: np.random.Generator) -> Module:
        """The model; one that propagates its features once (SGC's Âᴷ X, `set_propagated`)
        is handed the product the series' first model computed: one per task, not per run."""
        model = super().build_model(rng)
        if hasattr(model, "set_propagated") and self.operand is not None:
            x, adj, hit = self.features, self.operand, self._propagated
            if hit is not None and hit[0] is x and hit[1] is adj:
                model.set_propagated(x, adj, hit[2])
            else:
                with no_grad():
                    self._propagated = (x, adj, model.propagated(x, adj))
        return model

    def with_operands(self, features: Any, operand: Any) -> GraphTask:
        """The same task on other copies of its operands (e.g. dense vs sparse)."""
        other = copy.copy(self)
        other.placed = self.placed.with_operands(features, operand)
        return other

    def replay(self, model: Module, training: bool) -> Replay:
        """One step and one scoring an epoch, the same ops each time: each gets a `Replay`
        per model, anew when an operand changes (the budget's fallback: `placed.version`)."""
        kept = self._replays.get(training)
        if kept is None or kept[0] is not model or kept[1] != self.placed.version:
            kept = model, self.placed.version, Replay(model, training, self.config.train.replay)
            self._replays[training] = kept
        return kept[2]

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        field, rows = self._field("training", self.train_idx), self.train_idx
        if field is None:
            yield lambda: (self._training_loss(self.logits(model), self.y, rows), len(rows))
        else:
            yield lambda: (self._training_loss(field.logits(model), self.train_y), len(rows))

    def _training_loss(self, logits: Tensor, y: np.ndarray, rows: Any = None) -> Tensor:
        """`F.cross_entropy(logits, y, rows)`, its targets checked by the first step on logits
        of this shape and then kept, as `_split_targets` keeps the scores' (same bits)."""
        key = ("training", logits.shape)
        if key not in self._checked:
            self._checked[key] = (F.Targets.for_cross_entropy(y, rows, logits),)
        return F.cross_entropy_at(logits, self._checked[key][0])

    def embedding(self, model: Module) -> np.ndarray:
        """(N, hidden): what `model`'s last layer reads for every node, in eval mode."""
        model.eval()
        with no_grad():
            args = () if self.operand is None else (self.operand,)
            return np.asarray(model.embed(self.features, *args).data)
