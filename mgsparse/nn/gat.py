"""Graph attention (Veličković et al., ICLR 2018): `GATConv` and the `GAT` model.

For each head h (weights W_h, attention vectors a_src_h, a_dst_h) and each edge j → i of the
graph plus the self loop i → i:

    e_ij = LeakyReLU_0.2(a_dst_h · W_h x_i + a_src_h · W_h x_j)
    α_ij = exp(e_ij) / Σ_k exp(e_ik)             (softmax over i's incoming edges)
    h'_i = Σ_j α_ij W_h x_j

and the heads are concatenated (hidden layers) or averaged (output layer).

With `edge_dim` (PyTorch Geometric's semantics) the edge's features join the logit:
e_ij = LeakyReLU(a_dst·W x_i + a_src·W x_j + a_edge·W_e e_ji), W_e (edge_dim, H·C) without bias;
the messages stay W x_j. As in PyG, a self loop's features are the mean of the features of the
node's other in-edges (zeros without any), existing loops give way to it, and the rare pair
joined twice reads the mean of its edges. The edge term is gathered per pattern entry through
one constant sparse product (edges -> distinct pairs, `edge_keys`), and the softmax is the
unfused `row_softmax` of the summed logits: the fused kernel takes two node vectors only.

Layout: every head lives in one SparseTensor of shape (N·H, N·H) whose entry
(i·H + h, j·H + h) is α_ij of head h: node-major, as the projected features (N, H, C) lie in
memory. Its row and column indices are exactly the positions of node i's and node j's
scores in the score vectors (N·H,) and of their rows in the features read as (N·H, C), so the
per-edge logits are two gathers at the edges — no N×N array, no loop over heads, no
transposed copy of the features or of the output — and one fused `attention_softmax`
(gathers, LeakyReLU, row softmax, by blocks of rows) then one sparse × dense product
aggregate all heads at once. Node i's H rows are adjacent and read the same neighbours'
rows, so one neighbour's features (H·C floats) come in the same cache lines for every head.
The attention parameters get their gradient through the SparseTensor's values: the SDDMM
of the product's backward, then the edge softmax's backward, then the gathers' scatter-adds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.edges import GraphCache, check_edge_index
from mgsparse.nn.layers import glorot_
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import EdgeListModel, check_stack_options
from mgsparse.sparse import SparseTensor, attention_softmax, row_softmax, sparse_dropout

EdgeTerm = tuple  # (M (K, E) edges -> distinct pairs, entry (nnz,) into (K·H,), e (E, F_e))


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values by one sort (np.unique's hash path is slower on millions)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def attention_pattern(edge_index: np.ndarray, num_nodes: int, heads: int,
                      add_self_loops: bool = True, dtype: Any = np.float32,
                      num_targets: int | None = None) -> SparseTensor:
    """The (T·H, N·H) pattern: entry (i·H + h, j·H + h) for each edge j → i and head h.

    T = `num_targets` (default N): a sampled block's targets are its first T sources, so
    the self loop of target i is (i, i) in both cases. Edges are deduplicated (an attention
    softmax counts each neighbour once); with `add_self_loops` existing loops are dropped and
    one loop per target added. The entries come out sorted row-major: target by target, head
    by head within a target, each row the target's neighbours in order. Values are zeros:
    the layer sets them.
    """
    n = np.int64(num_nodes)
    t = n if num_targets is None else np.int64(num_targets)
    source, target = edge_index
    keys = _sorted_unique(target * n + source)  # row = the node that attends (receives)
    if add_self_loops:
        keys = _sorted_unique(np.concatenate([keys[keys // n != keys % n], np.arange(t) * (n + 1)]))
    dst, src = keys // n, keys % n
    degree = np.bincount(dst, minlength=int(t))
    start = np.cumsum(degree) - degree  # each target's first key
    rank = np.arange(len(keys), dtype=np.int64) - start[dst]  # a key's place in its row
    head = np.arange(heads, dtype=np.int64)[:, None]  # (H, 1)
    # row (i, h) holds i's keys in order, after i's h earlier heads: rows stay sorted
    at = (heads * start[dst] + rank + head * degree[dst]).reshape(-1)
    indices = np.empty((2, heads * len(keys)), dtype=np.int64)
    indices[0, at] = (dst * heads + head).reshape(-1)
    indices[1, at] = (src * heads + head).reshape(-1)
    return SparseTensor(indices, np.zeros(heads * len(keys), dtype=dtype),
                        (int(t) * heads, heads * num_nodes))


def edge_keys(source: np.ndarray, target: np.ndarray, num_sources: int, A: SparseTensor,
              heads: int, add_self_loops: bool = True) -> tuple[SparseTensor, np.ndarray]:
    """(M, entry) for the edge term of `attention_pattern` A: M (K, E) averages each edge's
    row into the K distinct (target, source) pairs of A (a self loop: the mean of its
    target's other in-edges), entry (nnz,) the index of each A entry's pair and head in the
    (K·H,) pair scores. All numpy, no loop over edges."""
    n = np.int64(num_sources)
    i, j, head = A.row // heads, A.col // heads, A.row % heads
    keys = _sorted_unique(i * n + j)
    entry = np.searchsorted(keys, i * n + j) * heads + head
    k = np.flatnonzero(source != target) if add_self_loops else np.arange(len(source))
    q = np.searchsorted(keys, target[k] * n + source[k])
    rows, cols, weights = [q], [k], [1.0 / np.bincount(q, minlength=len(keys))[q]]
    if add_self_loops and len(k):
        indeg = np.bincount(target[k])
        rows.append(np.searchsorted(keys, target[k] * (n + 1)))
        cols.append(k)
        weights.append(1.0 / indeg[target[k]])
    M = SparseTensor(np.stack([np.concatenate(rows), np.concatenate(cols)]),
                     np.concatenate(weights).astype(A.dtype), (len(keys), len(source)))
    return M.coalesce(), entry


class GATConv(Module):
    """Multi-head graph attention layer (see the module docstring for the formula).

    `forward(x, edge_index)`: `x` dense (N, F_in) or sparse features; `edge_index` (2, E)
    with row 0 the source and row 1 the target (messages flow source → target). Returns
    (N, heads·out_features) when `concat`, else (N, out_features), the mean of the heads.
    `dropout` is applied to the normalised attention coefficients during training.
    The attention pattern is built once per graph and cached (`cached=True`). `edge_dim`
    > 0: `forward(x, edge_index, edge_attr)` reads (E, edge_dim) edge features into the
    attention logits (module docstring).
    """

    def __init__(self, in_features: int, out_features: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True, cached: bool = True,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 edge_dim: int = 0):
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
        # (H, 1, H) identity: spreads head h's attention vector into column h (`_scores`);
        # one constant, so every step's graph reads the same leaf (a tape may replay it)
        self._head_eye = Tensor(np.eye(heads, dtype=dtype).reshape(heads, 1, heads))
        width = heads * out_features if concat else out_features
        self.bias = Parameter(np.zeros(width), dtype=dtype) if bias else None
        self._pattern = GraphCache(cached)
        self.edge_dim = int(edge_dim)
        if self.edge_dim:
            self.lin_edge = Parameter(glorot_((edge_dim, heads * out_features), self.rng, dtype),
                                      dtype=dtype)
            self.att_edge = Parameter(glorot_((heads, out_features), self.rng, dtype),
                                      dtype=dtype)

    @classmethod
    def for_graphs(cls, in_features: int, out_features: int, *, rng: np.random.Generator,
                   dtype: Any, heads: int = 1, attn_dropout: float = 0.0, edge_dim: int = 0,
                   **_: Any) -> GATConv:
        """The layer in a graph classifier (nn/graphnet.py): `heads` concatenated heads of
        out_features / heads each, no cache (a new batch every step); the batch's edge
        features in its logits only for a class that reads them (`EdgeGATConv`)."""
        if out_features % heads:
            raise HyperparameterError(f"graph GAT: model.hidden ({out_features}) must be a "
                                      f"multiple of model.heads ({heads}): the heads are "
                                      "concatenated")
        reads = getattr(cls, "reads_edge_features", False)
        return cls(in_features, out_features // heads, heads=heads, dropout=attn_dropout,
                   cached=False, rng=rng, dtype=dtype, edge_dim=edge_dim if reads else 0)

    def on_batch(self, batch: Any) -> Any:
        """The layer on a `GraphBatch`: its attention pattern, built once per batch and head
        count."""
        A = batch.operand(("attention_pattern", self.heads), lambda: attention_pattern(
            batch.edge_index, batch.num_nodes, self.heads, True, batch.dtype))
        return lambda h: self.attend(h, A)

    def pattern(self, edge_index: Any, num_nodes: int) -> SparseTensor:
        """The (N·H, N·H) attention pattern of this graph, built once when `cached`."""
        edges = check_edge_index(edge_index, num_nodes, "GATConv")
        A = self._pattern.get(edges, num_nodes)
        if A is None:
            A = self._pattern.put(edges, num_nodes, attention_pattern(
                edges, num_nodes, self.heads, self.add_self_loops, self.weight.dtype))
        return A

    def _project(self, x: Tensor | SparseTensor) -> Tensor:
        return (x @ self.weight).reshape(x.shape[0], self.heads, self.out_features)  # (N, H, C)

    def _alpha(self, h: Tensor, A: SparseTensor, h_dst: Tensor | None = None,
               edges: EdgeTerm | None = None) -> SparseTensor:
        """α on the block pattern from the projected features h (N, H, C) of the sources and
        h_dst (T, H, C) of the targets (default h: every node attends), and the edge term."""
        h_dst = h if h_dst is None else h_dst
        score_src = self._scores(h, self.att_src)  # (N·H,), entry j·H + h
        score_dst = self._scores(h_dst, self.att_dst)  # (T·H,)
        if edges is None:
            return attention_softmax(A, score_dst, score_src, self.negative_slope)  # fused
        M, entry, e = edges
        per_edge = self._scores(e @ self.lin_edge, self.att_edge).reshape(-1, self.heads)
        pair = (M @ per_edge).reshape(-1)  # (K·H,): each distinct pair's edge score
        logits = score_dst[A.row] + score_src[A.col] + pair[entry]
        return row_softmax(A.with_values(logits.leaky_relu(self.negative_slope)))

    def edge_term(self, source: np.ndarray, target: np.ndarray, num_sources: int,
                  A: SparseTensor, edge_attr: Any) -> EdgeTerm:
        """The (M, entry, e) an edge-featured layer adds to A's logits (`edge_keys`)."""
        e = edge_attr if isinstance(edge_attr, Tensor) else Tensor(
            np.asarray(edge_attr, dtype=self.weight.dtype))
        if e.shape != (len(source), self.edge_dim):
            raise ShapeError(f"GATConv: edge_attr must be ({len(source)}, {self.edge_dim}) for "
                             f"{len(source)} edges, got {tuple(e.shape)}")
        return (*edge_keys(source, target, num_sources, A, self.heads, self.add_self_loops), e)

    def _scores(self, h: Tensor, att: Parameter) -> Tensor:
        """a_h · h_{n,h} for every node n and head h, node-major (N·H,): one product of the
        (N, H·C) features with the block-diagonal (H·C, H) matrix of the attention vectors.
        A sum over the last axis of (N, H, C) with C = 8 runs a short reduction per entry
        and its backward a broadcast product; the product is one BLAS call each way."""
        heads, c = self.heads, self.out_features
        block = (att.reshape(heads, c, 1) * self._head_eye).reshape(heads * c, heads)
        return (h.reshape(h.shape[0], heads * c) @ block).reshape(-1)

    def attention(self, x: Tensor | SparseTensor, edge_index: Any) -> SparseTensor:
        """The attention coefficients α (no dropout) as the (N·H, N·H) SparseTensor."""
        return self._alpha(self._project(x), self.pattern(edge_index, x.shape[0]))

    def forward(self, x: Tensor | SparseTensor, edge_index: Any, edge_attr: Any = None) -> Tensor:
        A = self.pattern(edge_index, x.shape[0])
        if not self.edge_dim:
            return self.attend(x, A)
        if edge_attr is None:
            raise ShapeError(f"GATConv with edge_dim={self.edge_dim} reads edge features; "
                             "edge_attr is None")
        edges = np.asarray(edge_index)
        return self.attend(x, A, self.edge_term(edges[0], edges[1], x.shape[0], A, edge_attr))

    def attend(self, x: Tensor | SparseTensor, A: SparseTensor,
               edges: EdgeTerm | None = None) -> Tensor:
        """The layer on a prebuilt (T·H, N·H) `attention_pattern` (and `edge_term`); T < N
        for a sampled block, whose T targets are the first T of the N rows of x. (T, ·)."""
        n, H, C = x.shape[0], self.heads, self.out_features
        h = self._project(x)
        t = A.shape[0] // H
        alpha = self._alpha(h, A, h if t == n else h[:t], edges)
        alpha = sparse_dropout(alpha, self.dropout, self.training, self.rng)
        out = alpha @ h.reshape(n * H, C)  # (T·H, C): row i·H + h, head h of target i
        out = out.reshape(t, H * C) if self.concat else out.reshape(t, H, C).mean(axis=1)
        return out + self.bias if self.bias is not None else out

    def on_block(self, block: Any) -> Any:
        """The layer on a block: the (T·H, S·H) attention pattern of the sampled in-edges plus
        each target's self loop (target i is source i), so the softmax runs over each target's
        sampled in-edges; with all of them it is the rows of the whole-graph attention."""
        t, s = block.shape
        A = attention_pattern(np.stack([block.col, block.row]), s, self.heads,
                              self.add_self_loops, self.weight.dtype, num_targets=t)
        edges = None
        if self.edge_dim:  # a self loop's features: the mean of the sampled in-edges'
            if getattr(block, "edge_attr", None) is None:
                raise ShapeError("GATConv with edge_dim reads edge features; this block "
                                 "carries no edge_attr (give the sampler the graph's edge_attr)")
            edges = self.edge_term(block.col, block.row, s, A, block.edge_attr)
        return lambda x: self.attend(x, A, edges)

    def extra_repr(self) -> str:
        mode = "concat" if self.concat else "mean"
        edges = f", edge_dim={self.edge_dim}" if self.edge_dim else ""
        return (f"{self.in_features}, {self.out_features}, heads={self.heads} ({mode}), "
                f"dropout={self.dropout}{edges}")


class EdgeGATConv(GATConv):
    """`GATConv` with the edge features in its logits, as a graph classifier stacks it
    (`model.kind: gat_edge`): refused on graphs without edge features."""

    reads_edge_features = True

    def on_batch(self, batch: Any) -> Any:
        """The attention pattern and the edge term, built once per batch and head count."""
        if batch.edge_attr is None:
            raise ShapeError("EdgeGATConv reads edge features; this batch carries no edge_attr")
        A = batch.operand(("attention_pattern", self.heads), lambda: attention_pattern(
            batch.edge_index, batch.num_nodes, self.heads, True, batch.dtype))
        edges = batch.operand(("attention_edges", self.heads), lambda: self.edge_term(
            batch.edge_index[0], batch.edge_index[1], batch.num_nodes, A, batch.edge_attr))
        return lambda h: self.attend(h, A, edges)


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
