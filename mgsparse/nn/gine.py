"""GIN with edge features (Hu et al., "Strategies for Pre-training Graph Neural Networks",
ICLR 2020): `GINEConv`, PyTorch Geometric's ``GINEConv`` semantics.

    h'_i = MLP( (1 + ε)·h_i + Σ_{j → i} ReLU(h_j + W·e_ji + b) )

A bond's features enter the message of the edge they describe: W (a `Linear` from the edge
features' width to the layer's input width, PyG's ``edge_dim``) lifts e_ji to the width of h_j,
so an atom's neighbours are told apart by the bonds that join them. The ReLU sits inside the
sum, so unlike GIN's the sum is no longer one product with the adjacency: it is a gather of
the source rows, an add, a ReLU and a scatter-sum onto the targets. The gather and the
scatter are two constant incidence matrices, G (E, N) with G[k, source_k] = 1 and S (T, E) with
S[target_k, k] = 1, so each is one sparse product whose backward is the engine's own
(`edge_operands`): no backward is written here. The ε and the MLP (and a graph classifier's
BatchNorm1d after it, fused) are GIN's (`GINConv`, which this layer extends).

A self loop is an edge like any other here: the layer adds none, so no loop needs a feature
row; a caller who wants loops adds them to the edge list with a row of edge features each
(zeros for "no bond").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.edges import check_edge_index
from mgsparse.nn.gin import GINConv
from mgsparse.nn.layers import Linear, ReLU
from mgsparse.nn.module import Module
from mgsparse.nn.norm import BatchNorm1d
from mgsparse.sparse import SparseTensor

EdgeOperands = tuple  # (G (E, S), S (T, E), edge features (E, F_e) as a Tensor)
_RELU = ReLU()  # stateless: the tail ReLU after a fused BatchNorm1d


def edge_operands(source: np.ndarray, target: np.ndarray, shape: tuple[int, int],
                  edge_attr: Any, dtype: Any = np.float32,
                  scale: np.ndarray | None = None) -> EdgeOperands:
    """(G, S, e) for edges source_k → target_k of a (T, S) graph or block: G (E, S) gathers
    each edge's source row, S (T, E) sums each edge's message onto its target (times
    `scale[k]` when given: a sampled block's unbiased deg/k), e the edge features as a Tensor
    (a constant unless the caller's Tensor asks for a gradient)."""
    t, s = shape
    k = np.arange(len(source), dtype=np.int64)
    ones = np.ones(len(source), dtype=dtype)
    gather = SparseTensor(np.stack([k, source]), ones, (len(source), s))
    values = ones if scale is None else np.asarray(scale, dtype=dtype)
    scatter = SparseTensor(np.stack([target, k]), values, (t, len(source))).coalesce()
    e = edge_attr if isinstance(edge_attr, Tensor) else Tensor(np.asarray(edge_attr, dtype))
    return gather, scatter, e


def block_scale(block: Any) -> np.ndarray:
    """(nnz,) deg_i / k_i at each sampled in-edge of target i: each of deg_i in-edges is kept
    with probability k_i / deg_i, so the scaled sum is unbiased (`gin_block_adjacency`)."""
    k = block.num_sampled
    deg = block.degree[:block.num_targets].astype(np.float64)
    return np.where(k > 0, deg / np.maximum(k, 1), 0.0)[block.row]


class GINEConv(GINConv):
    """One GINE layer (formula in the module docstring).

    `GINEConv(in_features, out_features, edge_dim, hidden=None, mlp=None, eps=0.0,
    train_eps=False)`: GIN's MLP and ε (`GINConv`), and `edge_lin`, Linear(edge_dim,
    in_features), the edge features' projection. `forward(x, edge_index, edge_attr)`: x dense
    (N, F_in), edge_index (2, E) (row 0 the source), edge_attr (E, edge_dim); returns
    (N, F_out). `aggregate(x, operands)` runs on prebuilt `edge_operands` (T targets, the first
    T rows of x), as a batch of graphs and a sampled block build them.
    """

    reads_edge_features = True  # a graph classifier refuses graphs without edge features

    def __init__(self, in_features: int, out_features: int, edge_dim: int,
                 hidden: int | None = None, mlp: Module | None = None, eps: float = 0.0,
                 train_eps: bool = False, rng: np.random.Generator | None = None,
                 dtype: Any = np.float32):
        if edge_dim < 1:
            raise HyperparameterError(f"GINEConv needs edge features: edge_dim={edge_dim}")
        super().__init__(in_features, out_features, hidden, mlp, eps, train_eps, cached=False,
                         rng=rng, dtype=dtype)
        self.edge_dim = int(edge_dim)
        self.edge_lin = Linear(edge_dim, in_features, rng=rng, dtype=dtype)

    @classmethod
    def for_graphs(cls, in_features: int, out_features: int, *, rng: np.random.Generator,
                   dtype: Any, edge_dim: int = 0, train_eps: bool = False,
                   **_: Any) -> GINEConv:
        return cls(in_features, out_features, edge_dim, hidden=out_features,
                   train_eps=train_eps, rng=rng, dtype=dtype)

    def on_batch(self, batch: Any) -> Any:
        """The layer on a `GraphBatch`: its gather, scatter and edge features, built once per
        batch and shared by every GINE layer of the model."""
        if batch.edge_attr is None:
            raise ShapeError("GINEConv reads edge features; this batch of graphs carries no "
                             "edge_attr")
        source, target = batch.edge_index
        ops = batch.operand("gine_edges", lambda: edge_operands(
            source, target, (batch.num_nodes, batch.num_nodes), batch.edge_attr, batch.dtype))
        return lambda h, norm=None, relu=False: self.aggregate(h, ops, norm, relu)

    def on_block(self, block: Any) -> Any:
        """The layer on a sampled block (targets first): each target's messages over its
        sampled in-edges, scaled by deg/k as GIN's block sum is (exact at fanout −1)."""
        if block.edge_attr is None:
            raise ShapeError("GINEConv reads edge features; this block carries no edge_attr "
                             "(give the sampler the graph's edge_attr)")
        ops = edge_operands(block.col, block.row, block.shape, block.edge_attr,
                            self.eps.dtype, block_scale(block))
        return lambda x: self.aggregate(x, ops)

    def forward(self, x: Tensor, edge_index: Any, edge_attr: Any = None,
                norm: BatchNorm1d | None = None, relu: bool = False) -> Tensor:
        edges = check_edge_index(edge_index, x.shape[0], "GINEConv")
        if edge_attr is None or tuple(edge_attr.shape) != (edges.shape[1], self.edge_dim):
            got = None if edge_attr is None else tuple(edge_attr.shape)
            raise ShapeError(f"GINEConv: edge_attr must be ({edges.shape[1]}, {self.edge_dim})"
                             f" for {edges.shape[1]} edges, got {got}")
        n = x.shape[0]
        return self.aggregate(x, edge_operands(edges[0], edges[1], (n, n), edge_attr,
                                               self.eps.dtype), norm, relu)

    def aggregate(self, x: Tensor, ops: EdgeOperands, norm: BatchNorm1d | None = None,
                  relu: bool = False) -> Tensor:
        """MLP((1 + ε)·x[:T] + S·ReLU(G·x + W·e + b)), then `norm` (and a ReLU with `relu`),
        fused with the MLP's last Linear as GIN's are."""
        gather, scatter, e = ops
        if not isinstance(x, Tensor) or x.shape[0] != gather.shape[1]:
            raise ShapeError(f"GINEConv: the edge gather {gather.shape} needs dense x with "
                             f"{gather.shape[1]} rows, got {type(x).__name__} {x.shape}")
        messages = (gather @ x + self.edge_lin(e)).relu()  # (E, F_in)
        t = scatter.shape[0]
        root = x if t == x.shape[0] else x[np.arange(x.shape[0]) < t]  # a copy (see GINConv)
        if not self.train_eps and float(self.eps.data[0]) == 0.0:
            h = scatter @ messages + root
        else:
            h = scatter @ messages + root * (self.eps + 1.0)
        tail = [] if norm is None else [norm, _RELU] if relu else [norm]
        return self._run_mlp(h, 0, tail)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, edge_dim={self.edge_dim}"
