"""Graph classification: a batch of graphs as one operand (`GraphBatch`) and the models that
give each graph one vector of logits (`GraphClassifier`).

A batch of B small graphs is one graph whose adjacency is block diagonal: graph b's nodes are
renumbered to follow graph b−1's, so no edge crosses two graphs and one sparse product runs
every graph's message passing at once. Pooling is one more sparse product, P (B × N) with
P[b, i] = 1 for each node i of graph b (`mgsparse.sparse.Segments`). Nothing loops over
graphs: the batch holds the stacked features, the offset edge list, the edge features and
types when the graphs have them, and the `batch` vector; it keeps the operands its layers
build from them, each built once per batch (an evaluation batch kept for every epoch builds
it once per run).

The classifier knows no layer kind: it is handed the layer class to stack (a run finds it
from `model.kind` through the catalog's ``graph_layer``: `mgsparse.run.build.graph_layer`), and
that class says what it needs:

- ``for_graphs(in_features, out_features, *, rng, dtype, edge_dim, **options)``, a classmethod:
  the layer at one depth, from the model section's options (each layer reads its own and
  ignores the others: GIN ``train_eps``, GAT ``heads`` and ``attn_dropout``, SAGE ``normalize``);
  ``edge_dim`` is the width of the batch's edge features (0: none);
- ``on_batch(batch)``: a function ``h -> h'`` on that batch, built from what the batch carries
  (``batch.edge_index``, ``batch.edge_attr``, ...) through ``batch.operand(key, build)``, which
  builds an operand once per batch and shares it between the layers that name the same key;
- ``norm_after = True`` (GIN) to be handed a BatchNorm1d after each layer,
  ``on_batch(batch)(h, norm=..., relu=...)``, to fuse with its MLP's last Linear;
  ``reads_edge_features = True`` to be refused on graphs without edge features.

`GraphClassifier` is Xu et al.'s GIN for graph classification ("How Powerful are Graph Neural
Networks?", ICLR 2019) and the same shape with GCN, GraphSAGE or GAT layers:

    h⁰ = x,   hˡ = ReLU(BN(GINConvˡ(hˡ⁻¹)))          l = 1..L   (GIN: BN after each conv)
    logits_b = Σ_{l=0..L} Wˡ · dropout(readout_{i in b} hˡ_i) + cˡ

a readout of every layer's node states, the input's included, each through its own linear
head, the heads summed: the paper's "graph representation from all depths", which lets the
shallow levels (atom counts) speak next to the deep ones. The readout is a sum by default (the
injective one GIN's argument needs); mean or max for the others (`model.readout`).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.gin import GINConv
from mgsparse.nn.layers import Dropout, Linear
from mgsparse.nn.module import Module, ModuleList
from mgsparse.nn.norm import BatchNorm1d
from mgsparse.nn.pool import READOUTS
from mgsparse.nn.stack import get_activation
from mgsparse.sparse import Segments


def _check_edge_data(num_edges: int, edge_attr: Any, edge_type: Any) -> None:
    """One row per edge: edge_attr (E, F_e) floats, edge_type (E,) integers."""
    if edge_attr is not None:
        a = np.asarray(edge_attr)
        if a.ndim != 2 or a.shape[0] != num_edges or a.dtype.kind != "f":
            raise ShapeError(f"GraphBatch: edge_attr is {a.dtype} of shape {a.shape}; "
                             f"expected float of shape ({num_edges}, F_e), one row per edge")
    if edge_type is not None:
        t = np.asarray(edge_type)
        if t.shape != (num_edges,) or t.dtype.kind not in "iu":
            raise ShapeError(f"GraphBatch: edge_type is {t.dtype} of shape {t.shape}; "
                             f"expected integers of shape ({num_edges},), one per edge")


class GraphBatch:
    """B graphs as one block-diagonal graph: x (N, F), edge_index (2, E) with batch-local node
    ids (graph b's nodes after graph b−1's), `batch` (N,) the graph of each node, y (B,) labels,
    and optionally edge_attr (E, F_e) (in the batch's dtype) and edge_type (E,), row k for
    edge k.

    `operand(key, build)` is what a layer multiplies by, built on first use by `build()` and
    kept under `key`: GIN's sum adjacency, GCN's Â, GAT's pattern per head count, GINE's
    gather and scatter. `segments` pools the node rows into the B graphs."""

    def __init__(self, x: Any, edge_index: np.ndarray, batch: np.ndarray, num_graphs: int,
                 y: np.ndarray | None = None, dtype: Any = np.float32,
                 edge_attr: np.ndarray | None = None, edge_type: np.ndarray | None = None):
        self.x = x if isinstance(x, Tensor) else Tensor(np.asarray(x, dtype=dtype))
        self.edge_index = np.asarray(edge_index, dtype=np.int64)
        self.num_graphs, self.y, self.dtype = int(num_graphs), y, np.dtype(dtype)
        _check_edge_data(self.edge_index.shape[-1], edge_attr, edge_type)
        self.edge_attr = None if edge_attr is None else np.asarray(edge_attr, dtype=dtype)
        self.edge_type = None if edge_type is None else np.asarray(edge_type, dtype=np.int64)
        self.segments = Segments(batch, self.x.shape[0], self.num_graphs, "GraphBatch")
        self._operands: dict[Any, Any] = {}

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def operand(self, key: Any, build: Any) -> Any:
        """The operand kept under `key` (hashable), `build()` on first use: once per batch."""
        if key not in self._operands:
            self._operands[key] = build()
        return self._operands[key]

    def pool(self, h: Tensor, readout: str) -> Tensor:
        """(B, F): each graph's `readout` of its node rows of h."""
        return READOUTS[readout](h, self.segments, self.num_graphs)

    def __repr__(self) -> str:
        edges = "" if self.edge_attr is None else f", edge_features={self.edge_attr.shape[1]}"
        return (f"GraphBatch(graphs={self.num_graphs}, nodes={self.num_nodes}, "
                f"edges={self.num_edges}, features={self.x.shape[1]}{edges})")


class GraphClassifier(Module):
    """`layers` message-passing layers of class `layer` (GIN's by default), a readout of every
    level, summed linear heads (see the module docstring). `forward(batch)` takes a
    `GraphBatch`, returns (B, classes). `edge_dim`: the width of the graphs' edge features (0:
    none), for layers that read them; `options` go to the layer class (`for_graphs`), each
    layer reading its own."""

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 4,
                 dropout: float = 0.5, activation: str = "relu",
                 layer: type[Module] = GINConv, readout: str = "sum", edge_dim: int = 0,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 **options: Any):
        super().__init__()
        if not (hasattr(layer, "for_graphs") and hasattr(layer, "on_batch")):
            raise HyperparameterError(f"graph classifier: {getattr(layer, '__name__', layer)} "
                                      "is no graph layer (it needs for_graphs and on_batch: "
                                      "nn/graphnet.py)")
        if readout not in READOUTS:
            raise HyperparameterError(f"graph classifier: readout {readout!r} not in "
                                      f"{tuple(READOUTS)}")
        if min(in_features, hidden, num_classes, layers) < 1:
            raise HyperparameterError("graph classifier sizes and layer count must be positive")
        if getattr(layer, "reads_edge_features", False) and edge_dim < 1:
            raise HyperparameterError(f"graph classifier: {layer.__name__} reads edge "
                                      f"features, and these graphs have none "
                                      f"(edge_dim {edge_dim})")
        rng = rng if rng is not None else np.random.default_rng()
        self.kind, self.readout = layer.__name__, readout
        self.activation = get_activation(activation)
        self.fuse_relu = activation == "relu"  # GIN's BatchNorm1d then applies it, fused
        widths = [in_features] + [hidden] * layers
        self.convs = ModuleList(layer.for_graphs(a, b, rng=rng, dtype=dtype, edge_dim=edge_dim,
                                                 **options) for a, b in pairwise(widths))
        self.norms = ModuleList(BatchNorm1d(hidden, dtype=dtype) for _ in range(layers)
                                ) if getattr(layer, "norm_after", False) else None
        self.heads = ModuleList(Linear(w, num_classes, rng=rng, dtype=dtype) for w in widths)
        self.dropout = Dropout(dropout, rng)

    def levels(self, batch: GraphBatch) -> list[Tensor]:
        """The node states of every level, h⁰ = x up to hᴸ."""
        if not isinstance(batch, GraphBatch):
            raise ShapeError(f"GraphClassifier takes a GraphBatch, got {type(batch).__name__}")
        hs = [batch.x]
        for i, conv in enumerate(self.convs):
            step = conv.on_batch(batch)
            if self.norms is None:
                hs.append(self.activation(step(hs[-1])))
                continue
            h = step(hs[-1], norm=self.norms[i], relu=self.fuse_relu)  # BN fused in
            hs.append(h if self.fuse_relu else self.activation(h))
        return hs

    def embed(self, batch: GraphBatch) -> Tensor:
        """(B, hidden): the last level's readout, one vector per graph (for pictures)."""
        return batch.pool(self.levels(batch)[-1], self.readout)

    def forward(self, batch: GraphBatch) -> Tensor:
        out = None
        for h, head in zip(self.levels(batch), self.heads):
            z = head(self.dropout(batch.pool(h, self.readout)))
            out = z if out is None else out + z
        return out

    def extra_repr(self) -> str:
        return f"layer={self.kind}, readout={self.readout}, levels={len(self.heads)}"
