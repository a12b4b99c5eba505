"""Graph convolution (Kipf & Welling, ICLR 2017): `GCNConv`, its block form, the `GCN` model.

    H' = Â · (H W) + b,  Â = D^-1/2 (A + I) D^-1/2

The adjacency stays a `SparseTensor` end to end. Messages flow source → target along
`edge_index` (row 0 the source, row 1 the target), as in PyG and in `GATConv` and `SAGEConv`:
row i of Â holds i's incoming edges, D is the in-degree.
The normalisation is a free function (`mgsparse.sparse.gcn_norm`) that the layer calls and
caches per graph (`cached=True`, transductive training: the graph never changes between epochs).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.kernels import freeze
from mgsparse.nn.edges import FixedProduct, GraphCache, check_edge_index
from mgsparse.nn.layers import LinearOp, dropout_linear, glorot_
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import StackedModel, stack_widths
from mgsparse.nn.stack import dropout as drop
from mgsparse.sparse import SparseTensor, as_operand, gcn_norm, spmm

Adjacency = Any  # an edge list (2, E), a normalised SparseTensor or a dense Tensor


def normalized_adjacency(
    edge_index: np.ndarray,
    num_nodes: int,
    edge_weight: Tensor | None = None,
    sparsity_threshold: float | None = None,
    dtype: Any = np.float32,
) -> SparseTensor | Tensor:
    """Â = D^-1/2 (A + I) D^-1/2 with A[target, source] = w per edge source → target, and D the
    in-degree (row sums of A + I); kept sparse unless it is dense enough.

    So (Â H)_i = Σ_{j → i} h_j / √(d_i d_j) + h_i / d_i: node i aggregates from its sources,
    PyG's `gcn_norm` (flow source_to_target). `SparseTensor.from_edge_index` is A[source,
    target], as in PyG; Â is built on its free transpose. Differentiable w.r.t. `edge_weight`
    (the degrees depend on it).
    """
    A = SparseTensor.from_edge_index(edge_index, num_nodes, values=edge_weight, dtype=dtype).T
    norm_adj = gcn_norm(A)
    return norm_adj if sparsity_threshold is None else as_operand(norm_adj, sparsity_threshold)


def _loops(block: Any) -> np.ndarray:
    return np.arange(block.num_targets, dtype=np.int64)


def gcn_block_adjacency(block: Any, dtype: Any = np.float32) -> SparseTensor:
    """Â_block (T, S): the full graph's GCN normalisation, neighbour terms scaled by deg/k.

    Entry (i, j) = (deg_i / k_i) / sqrt(d_i d_j) for a sampled edge j → i and 1 / d_i for the
    self loop, with d = full-graph in-degree + 1 and k_i the edges sampled for i. This is the
    full graph's D^-1/2 (A + I) D^-1/2 with each row's neighbour part rescaled by deg_i / k_i,
    so E[Â_block H] = Â H (an unbiased estimate of the full-batch layer), and with all
    neighbours (k_i = deg_i) Â_block is exactly the rows of Â: mini-batch and full batch agree
    to rounding. The block's own degrees would instead bias every node by its sampled degree
    and make the training operator differ from the one used at evaluation.
    """
    t, s = block.shape
    d = block.degree.astype(np.float64) + 1.0  # (S,) in-degree of A + I
    k = block.num_sampled
    scale = np.where(k > 0, (d[:t] - 1.0) / np.maximum(k, 1), 0.0)  # (T,) deg_i / k_i
    edges = scale[block.row] / np.sqrt(d[block.row] * d[block.col])
    loops = _loops(block)
    indices = np.stack([np.concatenate([block.row, loops]), np.concatenate([block.col, loops])])
    return SparseTensor(indices, np.concatenate([edges, 1.0 / d[:t]]).astype(dtype), (t, s))


# What one stored entry of a sparse product costs per column, in dense (BLAS) multiply-adds:
# scipy's CSR kernel gathers a row of H per entry where BLAS streams. On the ogbn-arxiv-shaped
# graph of benchmarks/compare_pyg.py (one core) it was about 10 at 16 columns, and more at 40,
# once the rows of H no longer stay in cache.
SPARSE_ENTRY_COST = 10


def propagates_first(adj: Any, x: Any, out_features: int) -> bool:
    """Whether Â·(H W) costs more than (Â·H)·W for Â (T, S) with `nnz` entries, H (S, F_in):

        transform first:  S·F_in·F_out + c·nnz·F_out;   propagate first:  c·nnz·F_in + T·F_in·F_out

    with c = SPARSE_ENTRY_COST. So the sparse product runs on the narrower side (PyG's rule:
    a 16 → 40 layer propagates 16 columns), unless a block's T targets are so few against
    its S sources that multiplying the S rows by W would cost more. Dense H and sparse Â only:
    sparse features are multiplied by W first (a sparse × sparse product is never wanted)."""
    if not isinstance(adj, SparseTensor) or not isinstance(x, Tensor) or x.ndim != 2:
        return False
    (t, s), f_in, c = adj.shape, x.shape[1], SPARSE_ENTRY_COST
    return c * adj.nnz * f_in + t * f_in * out_features < (
        s * f_in * out_features + c * adj.nnz * out_features)


def _is_operator(adj: Any) -> bool:
    """An already-normalised operand of another type that multiplies with `@` (the
    distributed `HaloAdjacency`); a numpy array with `@` is an edge list."""
    return hasattr(adj, "__matmul__") and not isinstance(adj, np.ndarray)


class GCNConv(Module):
    """One graph convolution, H' = Â (H W) + b.

    `forward(x, adj, edge_weight=None)`: `x` is a dense Tensor (N, F_in) or a SparseTensor of
    features; `adj` an edge list (a (2, E) array or nested list, messages source → target),
    normalised here, or an already-normalised operand (SparseTensor, dense Tensor, or any
    object that multiplies with `@`), used as is. With `cached`, Â is kept for the graph it
    came from (edge list and constant weights compared by value, so a different graph is
    never given a stale Â); a learned edge weight rebuilds it every call. W is applied before
    or after Â, whichever is cheaper (`propagates_first`): the sparse product runs on the
    narrower side. With `cached`, features that never change (frozen, as a task's are) meet a
    fixed Â only once: Â·X is kept and each call computes (Â·X)·W (`nn.edges.FixedProduct`;
    an evaluation pass then costs one dense product instead of a sparse one).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 cached: bool = True, sparsity_threshold: float | None = None,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.cached, self.sparsity_threshold = cached, sparsity_threshold
        self.weight = Parameter(glorot_((in_features, out_features), rng, dtype), dtype=dtype)
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None
        self._norm_adj = GraphCache(cached)
        self._fixed = FixedProduct()  # Â·X of fixed features (`FixedProduct`)

    @classmethod
    def for_graphs(cls, in_features: int, out_features: int, *, rng: np.random.Generator,
                   dtype: Any, **_: Any) -> GCNConv:
        """The layer in a graph classifier (nn/graphnet.py): a new batch every step, no cache."""
        return cls(in_features, out_features, cached=False, rng=rng, dtype=dtype)

    def on_batch(self, batch: Any) -> Any:
        """The layer on a `GraphBatch`: its Â, built once per batch."""
        adj = batch.operand("norm_adj", lambda: normalized_adjacency(
            batch.edge_index, batch.num_nodes, dtype=batch.dtype))
        return lambda h: self(h, adj)

    def norm_adj(self, adj: Adjacency, num_nodes: int, edge_weight: Any = None):
        if isinstance(adj, (SparseTensor, Tensor)) or _is_operator(adj):
            return adj  # already normalised
        edges = check_edge_index(adj, num_nodes, "GCNConv")
        if edge_weight is not None and getattr(edge_weight, "requires_grad", False):
            return self._build(edges, num_nodes, edge_weight)  # changes every step: no cache
        weights = None if edge_weight is None else np.asarray(getattr(edge_weight, "data",
                                                                      edge_weight))
        norm_adj = self._norm_adj.get(edges, num_nodes, weights)
        if norm_adj is None:
            norm_adj = self._norm_adj.put(edges, num_nodes,
                                          self._build(edges, num_nodes, edge_weight), weights)
        return norm_adj

    def _build(self, edges: np.ndarray, num_nodes: int, edge_weight: Any):
        return normalized_adjacency(edges, num_nodes, edge_weight, self.sparsity_threshold,
                                    self.weight.dtype)

    fuses_input_dropout = True  # forward takes `dropout=(p, rng, buffers)` (see forward)

    def forward(self, x: Tensor | SparseTensor, adj: Adjacency,
                edge_weight: Tensor | None = None,
                dropout: tuple | None = None) -> Tensor:
        """`dropout=(p, rng, buffers)`: x's inverted dropout, left to the layer by the model's
        stack (the mask drawn from rng here, as the stack would have drawn it). Where W meets
        a dense x first, the dropout and x·W run as one op (`nn.layers.dropout_linear`)."""
        norm_adj = self.norm_adj(adj, x.shape[0], edge_weight)
        first = propagates_first(norm_adj, x, self.out_features)
        if dropout is not None and (first or not isinstance(x, Tensor) or x.ndim != 2):
            x, dropout = drop(x, dropout[0], True, *dropout[1:]), None  # nothing to fuse with
        fixed = self.cached and dropout is None and FixedProduct.applies(norm_adj, x)
        if fixed or first:
            h = self._fixed.get(norm_adj, x) if fixed else norm_adj @ x  # (T, F_in)
            if self.bias is not None:  # x·W + b as one op: no second (T, F_out) array
                return LinearOp.apply(h, self.weight, self.bias)
            return h @ self.weight
        # (S, F_out), then Â·h + b (T, F_out)
        h = x @ self.weight if dropout is None else dropout_linear(x, self.weight, *dropout[:2])
        if isinstance(norm_adj, SparseTensor) and self.bias is not None:
            return spmm(norm_adj, h, self.bias)  # the bias added in place, as LinearOp does
        out = norm_adj @ h
        return out + self.bias if self.bias is not None else out

    def on_block(self, block: Any) -> Any:
        """The layer on a block (T targets × S sources, `mgsparse.nn.block`): Â_block's rows
        with the whole graph's degrees, neighbour terms scaled by deg/k (unbiased). Built
        here and never changed: frozen, so a fixed input's product may be kept."""
        adj = gcn_block_adjacency(block, self.weight.dtype)
        freeze(adj.values.data)
        return lambda x: self(x, adj)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, cached={self.cached}"


class GCN(StackedModel):
    """`layers` GCNConvs with dropout before each and an activation between them.

    Kipf & Welling's Cora recipe: 2 layers, hidden 16, dropout 0.5, ReLU, 81.5% test accuracy.
    `forward(x, adj)` returns logits (N, num_classes); `adj` as for `GCNConv`.

    `learn_edge_weight=True` (needs `edge_index`) learns one weight per edge, starting at 1:
    Â = D^-1/2 (A_w + I) D^-1/2 is rebuilt from them every forward (the degrees depend on
    the weights, so the gradient passes through the normalisation) and `adj` is ignored.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 2,
                 dropout: float = 0.5, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 edge_index: np.ndarray | None = None, learn_edge_weight: bool = False,
                 residual: bool = False, jk: str | None = None, norm: str | None = None):
        super().__init__(dropout, activation, rng)
        widths = stack_widths(in_features, hidden, num_classes, layers, jk)
        self.convs = ModuleList(GCNConv(a, b, rng=self.rng, dtype=dtype)
                                for a, b in itertools.pairwise(widths))
        if learn_edge_weight and edge_index is None:
            raise HyperparameterError("GCN: learn_edge_weight needs the graph's edge_index")
        self.edge_index = np.asarray(edge_index) if learn_edge_weight else None
        self.edge_weight = (Parameter(np.ones(self.edge_index.shape[1]), dtype=dtype)
                            if learn_edge_weight else None)
        self.stack_options(widths[1:], num_classes, residual, jk, norm, dtype)

    def forward(self, x: Tensor | SparseTensor, adj: Any, edge_weight: Tensor | None = None):
        if self.edge_weight is not None:  # once per forward, shared by every layer
            adj = normalized_adjacency(self.edge_index, x.shape[0], self.edge_weight,
                                       dtype=self.edge_weight.dtype)
        return self.stack(self.convs, x, adj, edge_weight)
