"""Graph classification: a batch of graphs as one operand (`GraphBatch`) and the models that
give each graph one vector of logits (`GraphClassifier`).

A batch of B small graphs is one graph whose adjacency is block diagonal: graph b's nodes are
renumbered to follow graph b−1's, so no edge crosses two graphs and one sparse product runs
every graph's message passing at once. Pooling is one more sparse product, P (B × N) with
P[b, i] = 1 for each node i of graph b (`mgsparse.sparse.Segments`). Nothing loops over
graphs: the batch holds the stacked features, the offset edge list and the `batch` vector,
and builds the operand a layer kind reads once per batch (an evaluation batch kept for every
epoch builds it once per run).

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
from mgsparse.nn.gat import GATConv, attention_pattern
from mgsparse.nn.gcn import GCNConv, normalized_adjacency
from mgsparse.nn.gin import GINConv, sum_adjacency
from mgsparse.nn.layers import Dropout, Linear
from mgsparse.nn.module import Module, ModuleList
from mgsparse.nn.norm import BatchNorm1d
from mgsparse.nn.pool import READOUTS
from mgsparse.nn.sage import SAGEConv, mean_adjacency
from mgsparse.nn.stack import get_activation
from mgsparse.sparse import Segments, SparseTensor

GRAPH_KINDS = ("gin", "gcn", "sage", "gat")


class GraphBatch:
    """B graphs as one block-diagonal graph: x (N, F), edge_index (2, E) with batch-local node
    ids (graph b's nodes after graph b−1's), `batch` (N,) the graph of each node, y (B,) labels.

    `operand(kind)` is what a layer of that kind multiplies by, built on first use and kept:
    GIN's sum adjacency A (A[i, j] = edges j → i), GCN's Â, GraphSAGE's D⁻¹A, GAT's
    attention pattern (per head count). `segments` pools the node rows into the B graphs."""

    def __init__(self, x: Any, edge_index: np.ndarray, batch: np.ndarray, num_graphs: int,
                 y: np.ndarray | None = None, dtype: Any = np.float32):
        self.x = x if isinstance(x, Tensor) else Tensor(np.asarray(x, dtype=dtype))
        self.edge_index = np.asarray(edge_index, dtype=np.int64)
        self.num_graphs, self.y, self.dtype = int(num_graphs), y, np.dtype(dtype)
        self.segments = Segments(batch, self.x.shape[0], self.num_graphs, "GraphBatch")
        self._operands: dict[tuple, Any] = {}

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    def operand(self, kind: str, heads: int = 1) -> SparseTensor:
        """The (block-diagonal) operand a `kind` layer reads, built once per batch."""
        key = (kind, heads if kind == "gat" else 1)
        if key not in self._operands:
            n, e, dt = self.num_nodes, self.edge_index, self.dtype
            build = {"gin": lambda: sum_adjacency(e, n, dt),
                     "gcn": lambda: normalized_adjacency(e, n, dtype=dt),
                     "sage": lambda: mean_adjacency(e, n, dt),
                     "gat": lambda: attention_pattern(e, n, heads, True, dt)}
            if kind not in build:
                raise HyperparameterError(f"no graph-batch operand for layer kind {kind!r}; "
                                          f"known: {', '.join(build)}")
            self._operands[key] = build[kind]()
        return self._operands[key]

    def pool(self, h: Tensor, readout: str) -> Tensor:
        """(B, F): each graph's `readout` of its node rows of h."""
        return READOUTS[readout](h, self.segments, self.num_graphs)

    def __repr__(self) -> str:
        return (f"GraphBatch(graphs={self.num_graphs}, nodes={self.num_nodes}, "
                f"edges={self.edge_index.shape[1]}, features={self.x.shape[1]})")


def _conv(kind: str, a: int, b: int, heads: int, train_eps: bool, normalize: bool,
          attn_dropout: float, rng: np.random.Generator, dtype: Any) -> Module:
    """One message-passing layer of `kind` from width a to width b (GAT: b = heads · b/heads)."""
    if kind == "gin":
        return GINConv(a, b, hidden=b, train_eps=train_eps, rng=rng, dtype=dtype)
    if kind == "gcn":
        return GCNConv(a, b, cached=False, rng=rng, dtype=dtype)
    if kind == "sage":
        return SAGEConv(a, b, normalize=normalize, cached=False, rng=rng, dtype=dtype)
    if b % heads:
        raise HyperparameterError(f"graph GAT: model.hidden ({b}) must be a multiple of "
                                  f"model.heads ({heads}): the heads are concatenated")
    return GATConv(a, b // heads, heads=heads, dropout=attn_dropout, cached=False, rng=rng,
                   dtype=dtype)


class GraphClassifier(Module):
    """`layers` message-passing layers of `kind`, a readout of every level, summed linear heads
    (see the module docstring). `forward(batch)` takes a `GraphBatch`, returns (B, classes)."""

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 4,
                 dropout: float = 0.5, activation: str = "relu", kind: str = "gin",
                 readout: str = "sum", train_eps: bool = False, heads: int = 4,
                 normalize: bool = False, attn_dropout: float = 0.0,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        if kind not in GRAPH_KINDS or readout not in READOUTS:
            raise HyperparameterError(f"graph classifier: kind {kind!r} / readout {readout!r} "
                                      f"not in {GRAPH_KINDS} / {tuple(READOUTS)}")
        if min(in_features, hidden, num_classes, layers) < 1:
            raise HyperparameterError("graph classifier sizes and layer count must be positive")
        rng = rng if rng is not None else np.random.default_rng()
        self.kind, self.readout, self.gat_heads = kind, readout, int(heads)
        self.activation = get_activation(activation)
        self.fuse_relu = activation == "relu"  # GIN's BatchNorm1d then applies it, fused
        widths = [in_features] + [hidden] * layers
        self.convs = ModuleList(_conv(kind, a, b, heads, train_eps, normalize, attn_dropout,
                                      rng, dtype) for a, b in pairwise(widths))
        self.norms = ModuleList(BatchNorm1d(hidden, dtype=dtype) for _ in range(layers)
                                ) if kind == "gin" else None
        self.heads = ModuleList(Linear(w, num_classes, rng=rng, dtype=dtype) for w in widths)
        self.dropout = Dropout(dropout, rng)

    def levels(self, batch: GraphBatch) -> list[Tensor]:
        """The node states of every level, h⁰ = x up to hᴸ."""
        if not isinstance(batch, GraphBatch):
            raise ShapeError(f"GraphClassifier takes a GraphBatch, got {type(batch).__name__}")
        adj = batch.operand(self.kind, self.gat_heads)
        hs = [batch.x]
        for i, conv in enumerate(self.convs):
            if self.norms is None:
                hs.append(self.activation(self._layer(conv, hs[-1], adj)))
                continue
            h = conv(hs[-1], adj, norm=self.norms[i], relu=self.fuse_relu)  # BN fused in
            hs.append(h if self.fuse_relu else self.activation(h))
        return hs

    def _layer(self, conv: Module, h: Tensor, adj: SparseTensor) -> Tensor:
        if self.kind == "sage":
            return conv.aggregate(h, adj)
        if self.kind == "gat":
            return conv.attend(h, adj)
        return conv(h, adj)  # GIN and GCN take a prebuilt operand as it is

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
        return f"kind={self.kind}, readout={self.readout}, levels={len(self.heads)}"
