"""Graph attention (Veličković et al., ICLR 2018): `GATConv` and the `GAT` model.

For each head h (weights W_h, attention vectors a_src_h, a_dst_h) and each edge j → i of the
graph plus the self loop i → i:

    e_ij = LeakyReLU_0.2(a_dst_h · W_h x_i + a_src_h · W_h x_j)
    α_ij = exp(e_ij) / Σ_k exp(e_ik)             (softmax over i's incoming edges)
    h'_i = Σ_j α_ij W_h x_j

and the heads are concatenated (hidden layers) or averaged (output layer).

Layout: every head lives in one block-diagonal SparseTensor of shape (H·N, H·N) whose
entry (h·N + i, h·N + j) is α_ij of head h. Its row and column indices are exactly the
positions of node i's and node j's scores in the head-major score vectors (H·N,), so the
per-edge logits are two gathers at the edges — no N×N array, no loop over heads — then one
`row_softmax` and one sparse × dense product aggregate all heads at once. The attention
parameters get their gradient through the SparseTensor's values: the SDDMM of the product's
backward, then the edge softmax's backward, then the gathers' scatter-adds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.edges import GraphCache, check_edge_index
from mgsparse.nn.layers import glorot_
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import EdgeListModel, check_stack_options
from mgsparse.sparse import SparseTensor, row_softmax, sparse_dropout
from mgsparse.sparse.ops import Gather


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values by one sort (np.unique's hash path is slower on millions)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def attention_pattern(edge_index: np.ndarray, num_nodes: int, heads: int,
                      add_self_loops: bool = True, dtype: Any = np.float32,
                      num_targets: int | None = None) -> SparseTensor:
    """The block-diagonal (H·T, H·N) pattern: entry (h·T + i, h·N + j) for each edge j → i.

    T = `num_targets` (default N): a sampled block's targets are its first T sources, so
    the self loop of target i is (i, i) in both cases. Edges are deduplicated (an attention
    softmax counts each neighbour once); with `add_self_loops` existing loops are dropped and
    one loop per target added. The entries come out sorted row-major, head by head. Values
    are zeros: the layer sets them.
    """
    n = np.int64(num_nodes)
    t = n if num_targets is None else np.int64(num_targets)
    source, target = edge_index
    keys = _sorted_unique(target * n + source)  # row = the node that attends (receives)
    if add_self_loops:
        keys = _sorted_unique(np.concatenate([keys[keys // n != keys % n], np.arange(t) * (n + 1)]))
    indices = np.empty((2, heads, len(keys)), dtype=np.int64)
    offsets = np.arange(heads, dtype=np.int64)[:, None]  # (H, 1): head h's block
    np.add(keys // n, offsets * t, out=indices[0])
    np.add(keys % n, offsets * n, out=indices[1])
    return SparseTensor(indices.reshape(2, -1), np.zeros(heads * len(keys), dtype=dtype),
                        (heads * int(t), heads * num_nodes))


class GATConv(Module):
    """Multi-head graph attention layer (see the module docstring for the formula).

    `forward(x, edge_index)`: `x` dense (N, F_in) or sparse features; `edge_index` (2, E)
    with row 0 the source and row 1 the target (messages flow source → target). Returns
    (N, heads·out_features) when `concat`, else (N, out_features), the mean of the heads.
    `dropout` is applied to the normalised attention coefficients during training.
    The attention pattern is built once per graph and cached (`cached=True`).
    """

    def __init__(self, in_features: int, out_features: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True, cached: bool = True,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        if min(in_features, out_features, heads) < 1:
            raise HyperparameterError(f"GATConv needs positive sizes, got in_features="
                                      f"{in_features}, out_features={out_features}, heads={heads}")
        if not 0.0 <= dropout < 1.0:
            raise HyperparameterError(f"GATConv attention dropout must be in [0, 1), got {dropout}")
        self.in_features, self.out_features, self.heads = int(in_features), int(out_features), int(heads)
        self.concat, self.negative_slope, self.dropout = concat, float(negative_slope), float(dropout)
        self.add_self_loops, self.cached = add_self_loops, cached
        self.rng = rng if rng is not None else np.random.default_rng()
        self.weight = Parameter(glorot_((in_features, heads * out_features), self.rng, dtype),
                                dtype=dtype)
        self.att_src = Parameter(glorot_((heads, out_features), self.rng, dtype), dtype=dtype)
        self.att_dst = Parameter(glorot_((heads, out_features), self.rng, dtype), dtype=dtype)
        width = heads * out_features if concat else out_features
        self.bias = Parameter(np.zeros(width), dtype=dtype) if bias else None
        self._pattern = GraphCache(cached)

    def pattern(self, edge_index: Any, num_nodes: int) -> SparseTensor:
        """The block-diagonal attention pattern of this graph, built once when `cached`."""
        edges = check_edge_index(edge_index, num_nodes, "GATConv")
        A = self._pattern.get(edges, num_nodes)
        if A is None:
            A = self._pattern.put(edges, num_nodes, attention_pattern(
                edges, num_nodes, self.heads, self.add_self_loops, self.weight.dtype))
        return A

    def _project(self, x: Tensor | SparseTensor) -> Tensor:
        return (x @ self.weight).reshape(x.shape[0], self.heads, self.out_features)  # (N, H, C)

    def _alpha(self, h: Tensor, A: SparseTensor, h_dst: Tensor | None = None) -> SparseTensor:
        """α on the block pattern from the projected features h (N, H, C) of the sources and
        h_dst (T, H, C) of the targets (default h: every node attends)."""
        h_dst = h if h_dst is None else h_dst
        score_src = (h * self.att_src).sum(axis=-1).T.reshape(-1)  # (H·N,), entry h·N + j
        score_dst = (h_dst * self.att_dst).sum(axis=-1).T.reshape(-1)  # (H·T,)
        logits = Gather.apply(score_dst, A.row) + Gather.apply(score_src, A.col)  # (H·E,)
        return row_softmax(A.with_values(logits.leaky_relu(self.negative_slope)))

    def attention(self, x: Tensor | SparseTensor, edge_index: Any) -> SparseTensor:
        """The attention coefficients α (no dropout) as the block-diagonal SparseTensor."""
        return self._alpha(self._project(x), self.pattern(edge_index, x.shape[0]))

    def forward(self, x: Tensor | SparseTensor, edge_index: Any) -> Tensor:
        return self.attend(x, self.pattern(edge_index, x.shape[0]))

    def attend(self, x: Tensor | SparseTensor, A: SparseTensor) -> Tensor:
        """The layer on a prebuilt (H·T, H·N) `attention_pattern`; T < N for a sampled block,
        whose T targets are the first T of the N rows of x. Returns (T, ·)."""
        n, H, C = x.shape[0], self.heads, self.out_features
        h = self._project(x)
        t = A.shape[0] // H
        alpha = self._alpha(h, A, h if t == n else h[:t])
        alpha = sparse_dropout(alpha, self.dropout, self.training, self.rng)
        out = (alpha @ h.transpose(1, 0, 2).reshape(H * n, C)).reshape(H, t, C)
        out = out.transpose(1, 0, 2).reshape(t, H * C) if self.concat else out.mean(axis=0)
        return out + self.bias if self.bias is not None else out

    def on_block(self, block: Any) -> Any:
        """The layer on a block: the (H·T, H·S) attention pattern of the sampled in-edges plus
        each target's self loop (target i is source i), so the softmax runs over each target's
        sampled in-edges; with all of them it is the rows of the whole-graph attention."""
        t, s = block.shape
        A = attention_pattern(np.stack([block.col, block.row]), s, self.heads,
                              self.add_self_loops, self.weight.dtype, num_targets=t)
        return lambda x: self.attend(x, A)

    def extra_repr(self) -> str:
        mode = "concat" if self.concat else "mean"
        return (f"{self.in_features}, {self.out_features}, heads={self.heads} ({mode}), "
                f"dropout={self.dropout}")


class GAT(EdgeListModel):
    """Graph attention network: `layers` GATConvs, dropout on every layer's input and on the
    attention coefficients, an activation between layers.

    Hidden layers concatenate `heads` heads of `hidden` features; the output layer averages
    `output_heads` heads of `num_classes` logits. Veličković et al.'s Cora recipe: 2 layers,
    8 heads × 8 hidden, ELU, dropout 0.6 on inputs and attention, 1 output head (83.0 ± 0.7%).

    `forward(x, adj)` returns logits (N, num_classes). Given `edge_index` at construction the
    model is bound to that graph (transductive training) and `adj` is ignored — the trainer
    passes its normalised Â to every model alike; otherwise `adj` must be an edge_index.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, heads: int = 8,
                 output_heads: int = 1, layers: int = 2, dropout: float = 0.6,
                 attn_dropout: float = 0.6, activation: str = "elu",
                 edge_index: np.ndarray | None = None,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 residual: bool = False, jk: str | None = None, norm: str | None = None):
        super().__init__(dropout, activation, rng, edge_index)
        if layers < 1:
            raise HyperparameterError(f"GAT needs at least one layer, got {layers}")
        jk = check_stack_options(jk, norm)[0]  # with jk the last layer is a hidden one too
        common = {"dropout": attn_dropout, "rng": self.rng, "dtype": dtype}
        widths = [in_features] + [hidden * heads] * (layers - 1)
        self.convs = ModuleList(
            [GATConv(w, hidden, heads, concat=True, **common) for w in widths[:-1]]
            + [GATConv(widths[-1], hidden, heads, concat=True, **common) if jk else
               GATConv(widths[-1], num_classes, output_heads, concat=False, **common)])
        out = widths[1:] + [hidden * heads if jk else num_classes]
        self.stack_options(out, num_classes, residual, jk, norm, dtype)
