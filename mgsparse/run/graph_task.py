"""Full-batch graph training: the whole graph, one step per epoch (`GraphTask`)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.catalog import DATASETS, MODELS
from mgsparse.config import Config, DatasetConfig, load_config, no_receptive_field
from mgsparse.data import Graph, load_dataset, load_section, user
from mgsparse.data.sampler import NeighborSampler
from mgsparse.engine import Tensor, no_grad
from mgsparse.nn import functional as F
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.nn.module import Module
from mgsparse.run.budget import FALLBACK_FRACTION, mb
from mgsparse.run.build import build_model
from mgsparse.run.field import AUTO_FRACTION, Field, describe
from mgsparse.run.monitor import nnz_ratio
from mgsparse.run.task import Batch, Progress, Scores, Task
from mgsparse.sparse import SparseTensor, as_operand


def load_graph(ds: DatasetConfig, progress: Progress | None = None) -> Graph:
    """The graph a config's dataset section names, through its source (`mgsparse.data.sources`):
    Planetoid or OGB (downloaded), karate, a synthetic SBM, or the user's own files
    (`load_config` made their paths absolute)."""
    return load_section(ds, progress)


def graph_for(target: str, root: str | Path | None = None, url: str | None = None,
              progress: Progress | None = None) -> Graph:
    """The graph a name (cora, ogbn-arxiv, ...), a YAML config, a folder of CSV files or an
    edge-list file means: what `mgsparse datasets info` describes."""
    path = Path(target)
    if path.suffix in (".yaml", ".yml"):
        ds = load_config(path).dataset
        return load_graph(dataclasses.replace(ds, root=ds.root or root, url=ds.url or url),
                          progress)
    if target.lower() not in DATASETS and path.exists():
        return user.load_csv_path(path)
    return load_dataset(target, root=root, url=url, progress=progress)


def place(m: Any, threshold: float, dtype: Any,
          budget: int | None = None) -> tuple[SparseTensor | Tensor, str]:
    """A matrix as the operand it will be for the whole run: sparse while its density is at
    most `threshold`, dense above it unless the dense array alone would pass 80% of the
    memory `budget`; and the reason, for the run's summary."""
    density = nnz_ratio(m)
    dense_bytes = m.shape[0] * m.shape[1] * np.dtype(dtype).itemsize
    if density > threshold and budget is not None and dense_bytes > FALLBACK_FRACTION * budget:
        threshold = 1.0  # sparse, whatever the density
        why = f"sparse (dense would need {mb(dense_bytes)} of a {mb(budget)} budget)"
        operand, _ = place(m, threshold, dtype)
        return operand, why
    operand = as_operand(m, threshold)
    if isinstance(operand, SparseTensor):
        operand = operand if operand.dtype == dtype else operand.astype(dtype)
        return operand, f"sparse (density {density:.3g} <= threshold {threshold:g})"
    dense = Tensor(np.asarray(operand.data, dtype=dtype))
    return dense, f"dense (density {density:.3g} > threshold {threshold:g})"


UNBUILT = object()  # the whole-graph operand before anything has asked for it


class GraphTask(Task):
    """Transductive node classification on the whole graph: one step per epoch.

    The features and the model's graph operand are placed once and reused by every epoch of
    every run: Â = D^-1/2 (A + I) D^-1/2 for a GCN (built only for it), the raw edge list for
    GAT and GraphSAGE, nothing for an MLP. The loss is cross-entropy over the training nodes.
    With `train.receptive_field`, the step (and the scores) run on the blocks of the rows they
    read instead (run/field.py); when both do, the whole-graph operand is built only if
    something asks for it (a picture of the embedding, the dense-vs-sparse bench).
    """

    def __init__(self, config: Config, graph: Graph, dtype: Any = np.float32,
                 budget: int | None = None):
        self.config, self.name, self.budget = config, graph.name, budget
        threshold = config.sparse.sparsity_threshold
        x = graph.x if sp.issparse(graph.x) else np.asarray(graph.x)  # dense stays dense
        self.features, why = place(x, threshold, dtype, budget)
        self.placement = {"features": why}
        self.densities = {"features": nnz_ratio(x)}
        self.edge_index = np.asarray(graph.edge_index, dtype=np.int64)
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
        self._operand, self._dtype = UNBUILT, dtype
        self._fields: dict[str, Field | None] = {}  # kept for every epoch and run
        self._field_sampler: NeighborSampler | None = None
        self._place_graph(threshold, dtype)

    def _place_graph(self, threshold: float, dtype: Any) -> None:
        """Receptive fields first; the whole graph's operand now only if one is missing."""
        fields = [self._field(name, rows) for name, rows in
                  (("training", self.train_idx), ("scored", self.scored_idx))]
        self._field_sampler = None  # its in-CSR is O(E): rebuilt only if a field must be
        if any(f is None for f in fields):
            self._operand = self._graph_operand(self.num_nodes, threshold, dtype)
        else:
            self.placement["adjacency"] = "built on demand (training and scores read blocks)"
            self.densities["adjacency"] = self.edge_index.shape[1] / max(self.num_nodes, 1) ** 2

    @property
    def operand(self) -> Any:
        """The model's whole-graph operand (Â, the edge list or None), built on first use."""
        if self._operand is UNBUILT:
            self._operand = self._graph_operand(self.num_nodes,
                                                self.config.sparse.sparsity_threshold,
                                                self._dtype)
        return self._operand

    @operand.setter
    def operand(self, value: Any) -> None:
        self._operand = value

    def _graph_operand(self, num_nodes: int, threshold: float, dtype: Any) -> Any:
        reads = MODELS[self.config.model.kind].operand
        if reads == "norm_adj" and not self.config.model.learn_edge_weight:
            norm_adj = normalized_adjacency(self.edge_index, num_nodes, dtype=dtype)
            operand, why = place(norm_adj, threshold, dtype, self.budget)
            self.placement["adjacency"] = why
            self.densities["adjacency"] = nnz_ratio(norm_adj)
            return operand
        self.densities["adjacency"] = self.edge_index.shape[1] / max(num_nodes, 1) ** 2
        if reads is None:
            self.placement["adjacency"] = "not used (the model reads no graph)"
            return None
        self.placement["adjacency"] = f"edge list ({self.edge_index.shape[1]:,} edges)"
        return self.edge_index

    @property
    def num_nodes(self) -> int:
        return self.features.shape[0]

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    def dense_operands(self) -> list[str]:
        dense = [(op.data.nbytes, name) for name, op in self.operands().items()
                 if isinstance(op, Tensor) and op.ndim == 2]
        return [name for _, name in sorted(dense, reverse=True)]

    def make_sparse(self, name: str, reason: str) -> None:
        sparse = SparseTensor.from_dense(self.operands()[name].data)
        if name == "features":
            self.features = sparse
        else:
            self.operand = sparse
        self.placement[name] = reason
        self._fields = {}  # their rows were gathered from the old operand

    def with_operands(self, features: Any, operand: Any) -> GraphTask:
        """The same task on other copies of its operands (e.g. dense vs sparse)."""
        other = copy.copy(self)
        other.features, other.operand, other._fields = features, operand, {}
        return other

    def _field(self, name: str, rows: np.ndarray) -> Field | None:
        """The receptive field of `rows` when `train.receptive_field` and the model allow it
        (run/field.py), built once for every epoch and run; None: the whole graph."""
        if name not in self._fields:
            self._fields[name] = self._build_field(rows)
            if self._fields[name] is not None:
                self.placement[f"{name} rows"] = describe(self._fields[name], self.num_nodes)
        return self._fields[name]

    def _build_field(self, rows: np.ndarray) -> Field | None:
        setting, model = self.config.train.receptive_field, self.config.model
        if (setting is False or no_receptive_field(model)
                or (setting == "auto" and len(rows) > AUTO_FRACTION * self.num_nodes)):
            return None
        if self._field_sampler is None:
            self._field_sampler = NeighborSampler(self.edge_index, self.num_nodes,
                                                  [-1] * model.layers)
        return Field(self._field_sampler.sample(rows, None).blocks, self.features)

    def build_model(self, rng: np.random.Generator) -> Module:
        return build_model(self.config.model, self.num_features, self.num_classes, rng,
                           edge_index=self.edge_index)

    def logits(self, model: Module) -> Tensor:
        """(N, num_classes) for every node: the model on the features and its operand."""
        if self.operand is None:
            return model(self.features)
        return model(self.features, self.operand)

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        field, rows = self._field("training", self.train_idx), self.train_idx
        if field is None:
            yield lambda: (F.cross_entropy(self.logits(model), self.y, rows), len(rows))
        else:
            yield lambda: (F.cross_entropy(field.logits(model), self.train_y), len(rows))

    def embedding(self, model: Module) -> np.ndarray:
        """(N, hidden): what `model`'s last layer reads for every node, in eval mode."""
        model.eval()
        with no_grad():
            args = () if self.operand is None else (self.operand,)
            return np.asarray(model.embed(self.features, *args).data)

    def evaluate(self, model: Module) -> Scores:
        model.eval()
        field = self._field("scored", self.scored_idx)
        with no_grad():
            logits = self.logits(model) if field is None else field.logits(model)
        y, (train, val, test) = (self.y, self.splits) if field is None else self._scored
        val_loss = float(F.cross_entropy(logits, y, val).data)
        pred = logits.data.argmax(axis=1)  # once for the three scores
        return self.metrics.scores(val_loss=val_loss, train_acc=F.accuracy(pred, y, train),
                                   val_acc=F.accuracy(pred, y, val),
                                   test_acc=F.accuracy(pred, y, test))

    def operands(self) -> dict[str, Any]:
        """What the run holds: the features and, once built, the whole-graph operand."""
        built = self._operand is not UNBUILT and self._operand is not None
        graph = {"adjacency": self._operand} if built else {}
        return {"features": self.features, **graph}
