"""GraphSAGE with the mean aggregator (Hamilton et al., NeurIPS 2017): `SAGEConv`, `GraphSAGE`.

    h'_i = W_r h_i + W_n · mean_{j → i} h_j + b          (optionally h'_i / ‖h'_i‖₂)

The mean over i's neighbours is one sparse product with the row-normalised adjacency
D⁻¹A (`mean_adjacency`), a constant the layer builds once per graph and caches, as
GCNConv caches Â. Unlike GCN the node itself is not mixed into the mean: it has its own
weight W_r (the "root weight"), so a node can keep what it knows apart from its neighbours.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from mgsparse.engine import Tensor, concatenate, is_grad_enabled
from mgsparse.errors import HyperparameterError
from mgsparse.kernels import freeze
from mgsparse.nn.edges import FixedProduct, GraphCache, check_edge_index
from mgsparse.nn.gcn import SPARSE_ENTRY_COST
from mgsparse.nn.layers import LinearOp, glorot_
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import EdgeListModel, stack_widths
from mgsparse.sparse import SparseTensor, spmm

NORM_EPS = 1e-12  # inside the square root: ‖0‖ has a finite gradient


def mean_adjacency(edge_index: np.ndarray, num_nodes: int, dtype: Any = np.float32) -> SparseTensor:
    """D⁻¹A with row i holding 1/deg_in(i) at each source j of an edge j → i.

    (D⁻¹A · H)_i is then the mean of i's neighbours' rows; a node without incoming edges
    gets an empty row (mean 0). A repeated edge counts as often as it is listed.
    """
    source, target = edge_index
    A = SparseTensor.from_edge_index(np.stack([target, source]), num_nodes,
                                     dtype=dtype).coalesce()
    degree = np.bincount(A.row, weights=A.values.data, minlength=num_nodes)
    return A.with_values((A.values.data / degree[A.row]).astype(dtype))


def sage_block_mean(block: Any, dtype: Any = np.float32) -> SparseTensor:
    """M_block (T, S): 1 / k_i at each sampled in-edge of target i (a row without one is empty)."""
    k = block.num_sampled
    values = (1.0 / k[block.row]).astype(dtype)
    return SparseTensor(np.stack([block.row, block.col]), values, block.shape)


def l2_normalize(x: Tensor) -> Tensor:
    """Each row divided by its Euclidean norm, x_i / sqrt(‖x_i‖² + ε)."""
    return x / ((x * x).sum(axis=1, keepdims=True) + NORM_EPS).sqrt()


class SAGEConv(Module):
    """One GraphSAGE layer with mean aggregation (formula in the module docstring).

    `forward(x, edge_index)`: `x` dense (N, F_in) or sparse features, `edge_index` (2, E),
    row 0 the source and row 1 the target. The weights are applied before the mean (both
    linear), so the neighbour product runs on F_out columns, and side by side, so the input
    features are read once. `normalize` L2-normalises each output row.
    """

    def __init__(self, in_features: int, out_features: int, root_weight: bool = True,
                 normalize: bool = False, bias: bool = True, cached: bool = True,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise HyperparameterError(f"SAGEConv needs positive sizes, got in_features="
                                      f"{in_features}, out_features={out_features}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.normalize, self.cached = normalize, cached
        shape = (in_features, out_features)
        self.weight_neighbors = Parameter(glorot_(shape, rng, dtype), dtype=dtype)
        self.weight_root = Parameter(glorot_(shape, rng, dtype), dtype=dtype) if root_weight else None
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None
        self._mean_adj = GraphCache(cached)
        self._fixed = FixedProduct()  # D⁻¹A·X of fixed features (`nn.edges.FixedProduct`)

    @classmethod
    def for_graphs(cls, in_features: int, out_features: int, *, rng: np.random.Generator,
                   dtype: Any, normalize: bool = False, **_: Any) -> SAGEConv:
        """The layer in a graph classifier (nn/graphnet.py): a new batch every step, no cache."""
        return cls(in_features, out_features, normalize=normalize, cached=False, rng=rng,
                   dtype=dtype)

    def on_batch(self, batch: Any) -> Any:
        """The layer on a `GraphBatch`: its D⁻¹A, built once per batch."""
        mean = batch.operand("mean_adj", lambda: mean_adjacency(
            batch.edge_index, batch.num_nodes, batch.dtype))
        return lambda h: self.aggregate(h, mean)

    def mean_adj(self, edge_index: Any, num_nodes: int) -> SparseTensor:
        """D⁻¹A of this graph, built once when `cached` (and then frozen: it never changes)."""
        edges = check_edge_index(edge_index, num_nodes, "SAGEConv")
        mean = self._mean_adj.get(edges, num_nodes)
        if mean is None:
            mean = mean_adjacency(edges, num_nodes, self.weight_neighbors.dtype)
            if self.cached:
                freeze(mean.values.data)
            mean = self._mean_adj.put(edges, num_nodes, mean)
        return mean

    def forward(self, x: Tensor | SparseTensor, edge_index: Any) -> Tensor:
        return self.aggregate(x, self.mean_adj(edge_index, x.shape[0]))

    def aggregate(self, x: Tensor | SparseTensor, mean: SparseTensor) -> Tensor:
        """The layer on a prebuilt (T, N) mean operand; T < N for a sampled block, whose T
        targets are the first T rows of x (their root term is h[:T]). Returns (T, F_out).

        Both terms are linear, so the weights may be applied before or after the mean: the
        order is the cheaper one for these shapes (`_aggregate_first`). With `cached`, the
        mean of frozen features over a frozen operand is kept (`nn.edges.FixedProduct`), so
        the mean comes first and costs no sparse product after the first call."""
        fixed = self.cached and FixedProduct.applies(mean, x)
        if fixed or self._aggregate_first(x, mean):
            h = self._fixed.get(mean, x) if fixed else mean @ x
            out = (h @ self.weight_neighbors if self.bias is None  # (T, F_in) -> (T, F_out)
                   else LinearOp.apply(h, self.weight_neighbors, self.bias))
            if self.weight_root is not None:
                t = mean.shape[0]
                out = out + (x if t == x.shape[0] else x[:t]) @ self.weight_root
        else:
            out = self._transform_first(x, mean)
        return l2_normalize(out) if self.normalize else out

    def _transform_first(self, x: Tensor | SparseTensor, mean: SparseTensor) -> Tensor:
        """mean·(x·W_n) + b (+ x·W_root), the bias added inside the sparse product."""
        f, t = self.out_features, mean.shape[0]
        if self.weight_root is None:
            return spmm(mean, x @ self.weight_neighbors, self.bias)  # (T, F_out)
        # one pass over the (often sparse, wide) features for both weights
        h = x @ concatenate([self.weight_neighbors, self.weight_root], axis=1)  # (N, 2·F_out)
        return spmm(mean, h[:, :f], self.bias) + (h[:, f:] if t == x.shape[0] else h[:t, f:])

    def _aggregate_first(self, x: Tensor | SparseTensor, mean: SparseTensor) -> bool:
        """Mean first when it costs less, forward and backward, in dense multiply-adds with a
        stored entry of the sparse product at c = SPARSE_ENTRY_COST (nn/gcn.py):

            weights first:  (1 + b + g)·S·F_in·W·F_out + (1 + b)·c·nnz·F_out
            mean first:     (1 + b + g)·T·F_in·W·F_out + (1 + g)·c·nnz·F_in

        for the (T, S) mean, W = 2 with the root weight, b = 1 when a backward follows and
        g = 1 when x needs a gradient. On the input features (g = 0) the mean of x is a
        constant, so mean first has no sparse product in the backward, where weights first
        needs meanᵀ·G: a whole-graph first layer of equal widths takes the mean first. On a
        sampled block (T ≪ S) the mean first wins whenever the block is much wider than its
        targets; elsewhere the sparse product runs on the narrower side (PyG's rule). Dense
        features only: the mean of sparse rows would be a sparse × sparse product."""
        if isinstance(x, SparseTensor):
            return False
        (t, s), nnz, c = mean.shape, mean.nnz, SPARSE_ENTRY_COST
        b = int(is_grad_enabled() and self.weight_neighbors.requires_grad)
        g = int(b and x.requires_grad)
        dense = self.in_features * (1 if self.weight_root is None else 2) * self.out_features
        weights_first = (1 + b + g) * s * dense + (1 + b) * c * nnz * self.out_features
        mean_first = (1 + b + g) * t * dense + (1 + g) * c * nnz * self.in_features
        return mean_first < weights_first

    def on_block(self, block: Any) -> Any:
        """The layer on a block: the mean over each target's k_i sampled in-edges, 1/k_i per
        entry (the paper's sampled mean); with all of them it is the rows of D⁻¹A."""
        mean = sage_block_mean(block, self.weight_neighbors.dtype)
        freeze(mean.values.data)  # built here, never changed (see `aggregate`)
        return lambda x: self.aggregate(x, mean)

    def extra_repr(self) -> str:
        return (f"{self.in_features}, {self.out_features}, root_weight="
                f"{self.weight_root is not None}, normalize={self.normalize}")


class GraphSAGE(EdgeListModel):
    """`layers` SAGEConvs (mean aggregator), dropout before each, an activation between them.

    `normalize` L2-normalises the hidden layers' outputs (never the logits, whose scale the
    softmax needs). `forward(x, adj)` returns logits (N, num_classes); as for `GAT`, an
    `edge_index` given at construction binds the model to that graph and `adj` is ignored.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 2,
                 dropout: float = 0.5, activation: str = "relu", normalize: bool = False,
                 edge_index: np.ndarray | None = None,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 residual: bool = False, jk: str | None = None, norm: str | None = None):
        super().__init__(dropout, activation, rng, edge_index)
        if layers < 1:
            raise HyperparameterError(f"GraphSAGE needs at least one layer, got {layers}")
        widths = stack_widths(in_features, hidden, num_classes, layers, jk)
        last = layers - 1
        self.convs = ModuleList(SAGEConv(a, b, normalize=normalize and i < last, rng=self.rng,
                                         dtype=dtype)
                                for i, (a, b) in enumerate(pairwise(widths)))
        self.stack_options(widths[1:], num_classes, residual, jk, norm, dtype)
