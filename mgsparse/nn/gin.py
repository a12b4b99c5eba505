"""The Graph Isomorphism Network layer (Xu et al., "How Powerful are Graph Neural Networks?",
ICLR 2019): `GINConv`, and `GIN` as a node classifier.

    h'_i = MLP( (1 + ε)·h_i + Σ_{j → i} h_j )

The neighbour sum is one sparse product with the *unnormalised* in-adjacency A (row i holds
a 1 at each source j of an edge j → i; a repeated edge counts as often as it is listed), a
constant built once per graph and cached (`sum_adjacency`). A sum, not a mean or a max,
because only a sum is injective on multisets of neighbour features: that is what lets GIN
tell apart the graphs the Weisfeiler-Lehman test tells apart. ε is a learned scalar
(`train_eps=True`, the paper's GIN-ε) or a fixed one (GIN-0 by default).

The MLP is passed in or built from sizes as in PyG's GIN examples: Linear → BatchNorm1d →
ReLU → Linear. When the MLP opens with a `Linear`, the layer may apply that Linear's weight
*before* the sum (both are linear, so MLP(s) is unchanged up to rounding): it does so when
that shrinks the columns the sparse product runs on (F_in > hidden), and always for sparse
features, which the sum could otherwise not mix with their own rows.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.edges import GraphCache, check_edge_index
from mgsparse.nn.layers import Linear, ReLU
from mgsparse.nn.module import Buffer, Module, ModuleList, Parameter, Sequential
from mgsparse.nn.norm import BatchNorm1d
from mgsparse.nn.stack import EdgeListModel, stack_widths
from mgsparse.sparse import SparseTensor

Adjacency = Any  # an edge list (2, E), a prebuilt sum operand (SparseTensor or dense Tensor)


def sum_adjacency(edge_index: np.ndarray, num_nodes: int, dtype: Any = np.float32) -> SparseTensor:
    """A (N, N) with A[i, j] = the number of edges j → i: (A·H)_i = Σ_{j → i} h_j."""
    source, target = edge_index
    return SparseTensor.from_edge_index(np.stack([target, source]), num_nodes,
                                        dtype=dtype).coalesce()


def gin_block_adjacency(block: Any, dtype: Any = np.float32) -> SparseTensor:
    """A_block (T, S): deg_i / k_i at each sampled in-edge of target i.

    With k_i of target i's deg_i in-edges drawn uniformly without replacement, each in-edge is
    kept with probability k_i / deg_i, so E[(A_block·H)_i] = Σ_{j → i} h_j: the estimate of the
    sum is unbiased (as `gcn_block_adjacency` rescales GCN's neighbour terms). At fanout −1
    (k_i = deg_i) every entry is 1 and A_block is exactly the targets' rows of A.
    """
    t = block.num_targets
    k = block.num_sampled  # (T,)
    deg = block.degree[:t].astype(np.float64)  # full-graph in-degree of each target
    scale = np.where(k > 0, deg / np.maximum(k, 1), 0.0)
    return SparseTensor(np.stack([block.row, block.col]), scale[block.row].astype(dtype),
                        block.shape)


def gin_mlp(in_features: int, hidden: int, out_features: int,
            rng: np.random.Generator | None = None, dtype: Any = np.float32) -> Sequential:
    """Linear(in, hidden) → BatchNorm1d(hidden) → ReLU → Linear(hidden, out), PyG's GIN MLP."""
    return Sequential(Linear(in_features, hidden, rng=rng, dtype=dtype),
                      BatchNorm1d(hidden, dtype=dtype), ReLU(),
                      Linear(hidden, out_features, rng=rng, dtype=dtype))


_TAIL_RELU = ReLU()  # stateless: one instance serves every layer's tail


def _is_relu(modules: list[Module], i: int) -> bool:
    return i < len(modules) and type(modules[i]) is ReLU


class GINConv(Module):
    """One GIN layer (formula in the module docstring).

    `GINConv(in_features, out_features, hidden=None, mlp=None, eps=0.0, train_eps=False)`:
    the MLP is `mlp` if given (any Module mapping (N, in_features) to (N, out_features)),
    otherwise `gin_mlp(in_features, hidden or out_features, out_features)`. ε is a Parameter
    of shape (1,) with `train_eps`, else a Buffer (saved in `state_dict`, as PyG's).

    `forward(x, adj)`: `x` dense (N, F_in) or sparse features, `adj` an edge list (2, E) (row
    0 the source, row 1 the target), summed through `sum_adjacency`, cached per graph when
    `cached`; or a prebuilt (T, N) sum operand (SparseTensor or dense Tensor) whose T targets
    are the first T rows of x. Returns (T, F_out).
    """

    def __init__(self, in_features: int, out_features: int, hidden: int | None = None,
                 mlp: Module | None = None, eps: float = 0.0, train_eps: bool = False,
                 cached: bool = True, rng: np.random.Generator | None = None,
                 dtype: Any = np.float32):
        super().__init__()
        if in_features < 1 or out_features < 1 or (hidden is not None and hidden < 1):
            raise HyperparameterError(f"GINConv needs positive sizes, got in_features="
                                      f"{in_features}, out_features={out_features}, "
                                      f"hidden={hidden}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.train_eps, self.cached = bool(train_eps), cached
        self.eps = (Parameter if train_eps else Buffer)([eps], dtype=dtype)
        self.mlp = mlp if mlp is not None else gin_mlp(in_features, hidden or out_features,
                                                       out_features, rng, dtype)
        self._sum_adj = GraphCache(cached)

    # --- in a graph classifier (nn/graphnet.py): a BatchNorm1d after each, fused into the MLP
    norm_after = True

    @classmethod
    def for_graphs(cls, in_features: int, out_features: int, *, rng: np.random.Generator,
                   dtype: Any, train_eps: bool = False, **_: Any) -> GINConv:
        return cls(in_features, out_features, hidden=out_features, train_eps=train_eps,
                   rng=rng, dtype=dtype)

    def on_batch(self, batch: Any) -> Any:
        """The layer on a `GraphBatch`: its sum adjacency, built once per batch."""
        adj = batch.operand("sum_adjacency", lambda: sum_adjacency(
            batch.edge_index, batch.num_nodes, batch.dtype))
        return lambda h, norm=None, relu=False: self.aggregate(h, adj, norm, relu)

    def sum_adj(self, edge_index: Any, num_nodes: int) -> SparseTensor:
        """A of this graph (in-edges summed), built once when `cached`."""
        edges = check_edge_index(edge_index, num_nodes, "GINConv")
        adj = self._sum_adj.get(edges, num_nodes)
        if adj is None:
            adj = self._sum_adj.put(edges, num_nodes,
                                    sum_adjacency(edges, num_nodes, self.eps.dtype))
        return adj

    def forward(self, x: Tensor | SparseTensor, adj: Adjacency,
                norm: BatchNorm1d | None = None, relu: bool = False) -> Tensor:
        if not isinstance(adj, (SparseTensor, Tensor)):
            adj = self.sum_adj(adj, x.shape[0])
        return self.aggregate(x, adj, norm, relu)

    def aggregate(self, x: Tensor | SparseTensor, adj: SparseTensor | Tensor,
                  norm: BatchNorm1d | None = None, relu: bool = False) -> Tensor:
        """MLP((1 + ε)·x[:T] + A·x) for a (T, S) sum operand A and x (S, F_in); then `norm`
        (a BatchNorm1d, and a ReLU with `relu`) when given: the norm a graph classifier puts
        after each GIN layer, run with the MLP so that its last Linear and the norm fuse."""
        tail = [] if norm is None else [norm, _TAIL_RELU] if relu else [norm]
        t, s = adj.shape
        if x.shape[0] != s:
            raise ShapeError(f"GINConv: the sum operand {adj.shape} needs x with {s} rows, "
                             f"got {x.shape}")
        first = self._first_linear()
        if first is not None and (isinstance(x, SparseTensor)
                                  or first.in_features > first.out_features):
            z = x @ first.weight  # (S, hidden): the sum then runs on the narrower side
            h = self._combine(z, adj, t)
            h = h + first.bias if first.bias is not None else h
            return self._run_mlp(h, 1, tail)
        if isinstance(x, SparseTensor):
            raise ShapeError("GINConv: sparse features need an MLP that opens with a Linear")
        return self._run_mlp(self._combine(x, adj, t), 0, tail)

    def _run_mlp(self, h: Tensor, start: int, tail: list[Module]) -> Tensor:
        """The MLP from its module `start` on (a Sequential's; any other MLP whole), then the
        `tail` modules. A BatchNorm1d followed by a ReLU runs as one fused op, and a Linear
        followed by a BatchNorm1d as `BatchNorm1d.after_linear` (one folded product in
        inference)."""
        if not isinstance(self.mlp, Sequential):
            modules, h = tail, self.mlp(h)
        else:
            modules = list(self.mlp)[start:] + tail
        i = 0
        while i < len(modules):
            module, after = modules[i], modules[i + 1] if i + 1 < len(modules) else None
            if isinstance(module, Linear) and isinstance(after, BatchNorm1d):
                relu = _is_relu(modules, i + 2)
                h = after.after_linear(h, module, relu=relu)
                i += 3 if relu else 2
            elif isinstance(module, BatchNorm1d):
                relu = _is_relu(modules, i + 1)
                h = module(h, relu=relu)
                i += 2 if relu else 1
            else:
                h = module(h)
                i += 1
        return h

    def _combine(self, x: Tensor, adj: SparseTensor | Tensor, t: int) -> Tensor:
        """(1 + ε)·x[:T] + A·x: the root rows are the first T rows of x (targets first).

        The rows are taken by a boolean mask, a copy: a slice would be a view of x, which
        the engine's in-place guard (it locks every array a backward reads) cannot lock and
        release independently of x itself."""
        if t == x.shape[0]:
            root = x
        else:
            first = np.zeros(x.shape[0], dtype=bool)
            first[:t] = True
            root = x[first]
        if not self.train_eps and float(self.eps.data[0]) == 0.0:  # GIN-0: 1·x is x, one pass
            return adj @ x + root
        return adj @ x + root * (self.eps + 1.0)

    def _first_linear(self) -> Linear | None:
        """The MLP's opening Linear when the MLP is a Sequential (so its tail can run alone)."""
        if isinstance(self.mlp, Sequential) and len(self.mlp) and isinstance(self.mlp[0], Linear):
            return self.mlp[0]
        return None

    def on_block(self, block: Any) -> Any:
        """The layer on a block (T targets × S sources, targets first; `mgsparse.nn.block`):
        the sum over each target's in-edges, all of them at fanout −1 (then equal to the whole
        graph's rows), an unbiased deg/k-scaled estimate for a sampled block."""
        adj = gin_block_adjacency(block, self.eps.dtype)
        return lambda x: self.aggregate(x, adj)

    def extra_repr(self) -> str:
        eps = float(self.eps.data[0])
        return (f"{self.in_features}, {self.out_features}, eps={eps:g}, "
                f"train_eps={self.train_eps}")


class GIN(EdgeListModel):
    """`layers` GINConvs as a node classifier: dropout before each, an activation between them.

    Each hidden layer is GINConv(MLP: Linear → BatchNorm1d → ReLU → Linear) to `hidden`
    features, the last one to `num_classes` logits; ε learned when `train_eps`. `forward(x,
    adj)` returns logits (N, num_classes); as for `GraphSAGE`, an `edge_index` given at
    construction binds the model to that graph and `adj` is ignored. On a receptive field or a
    sampled batch, BatchNorm1d's training statistics come from the rows the step computes,
    as a mini-batch's do in any framework.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 2,
                 dropout: float = 0.5, activation: str = "relu", train_eps: bool = False,
                 edge_index: np.ndarray | None = None,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 residual: bool = False, jk: str | None = None, norm: str | None = None):
        super().__init__(dropout, activation, rng, edge_index)
        widths = stack_widths(in_features, hidden, num_classes, layers, jk)
        self.convs = ModuleList(GINConv(a, b, hidden=hidden, train_eps=train_eps, rng=self.rng,
                                        dtype=dtype) for a, b in pairwise(widths))
        self.stack_options(widths[1:], num_classes, residual, jk, norm, dtype)
