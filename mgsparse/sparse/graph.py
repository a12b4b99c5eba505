"""Graph-flavoured sparse ops: self loops, GCN normalisation, softmax over each row's edges.

`add_self_loops` and `gcn_norm` are compositions of the primitives in ops.py (their gradient
w.r.t. the edge values comes for free); `row_softmax` has its own backward because the
composite (scatter-max, exp, scatter-sum, divide) would save four nnz-sized arrays for one,
and `attention_softmax` (GAT's edge scores: gathers, LeakyReLU, row softmax) for the same
reason. Row sums run as float64 `reduceat`s on row-sorted patterns, and every nnz-sized
float64 step in chunks, so no nnz-sized float64 array is made. On a row-sorted pattern the
attention softmax runs block by block of whole rows (`_entry_blocks`, then
`kernels.attention_rows`): each block's steps, forward or backward, on block-sized
temporaries, the blocks spread over the thread pool, bitwise the numbers of one pass over all
entries.
"""

from __future__ import annotations

import numpy as np

from mgsparse import kernels
from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse import reference as ref
from mgsparse.sparse.ops import Gather, SparseFunction, scatter_sum
from mgsparse.sparse.structure import Structure
from mgsparse.sparse.tensor import SparseTensor


def _need_square(name: str, A: SparseTensor) -> None:
    if not isinstance(A, SparseTensor):
        raise ShapeError(f"{name}: expected a SparseTensor, got {type(A).__name__}")
    if A.shape[0] != A.shape[1]:
        raise ShapeError(f"{name}: needs a square adjacency, got shape {A.shape}")


def add_self_loops(A: SparseTensor, fill: float = 1.0) -> SparseTensor:
    """A + fill·I, coalesced.

    A plain add, as in the formula Â = A + I of Kipf & Welling: a node that already has a
    self loop of weight w ends with w + fill (PyG's `add_remaining_self_loops` would keep w).
    Differentiable w.r.t. A.values; `fill` is a constant.
    """
    _need_square("add_self_loops", A)
    n = A.shape[0]
    diag = np.arange(n, dtype=np.int64)
    eye = Structure(np.stack([diag, diag]), A.shape, canonical=True)
    return A + SparseTensor._make(eye, Tensor(np.full(n, fill, dtype=A.dtype)))


def _inv_sqrt_or_zero(deg: Tensor) -> Tensor:
    """deg^-1/2 where deg > 0, else 0 — with a finite gradient everywhere.

    Masked positions are computed at 1 (1^-1/2 = 1, then times 0), so neither the value
    nor the backward (p·x^(p-1)·mask) ever meets 0^-1/2 = inf.
    """
    positive = (deg.data > 0).astype(deg.dtype)
    return (deg * positive + (1 - positive)) ** -0.5 * positive


def gcn_norm(A: SparseTensor, add_loops: bool = True) -> SparseTensor:
    """D^-1/2 (A + I) D^-1/2 with D the row sums of A + I (Kipf & Welling's propagation rule).

    Row i is the node that receives: for messages source → target pass A[target, source]
    (`SparseTensor.from_edge_index(edge_index).T`), so D is the in-degree, as in PyG.

    Entry k becomes v_k · d_{row_k} · d_{col_k}, d = deg^-1/2 (0 for a zero or negative
    degree, so an isolated node yields no NaN/Inf). Differentiable w.r.t. A.values: the
    degree depends on them. The output shares A + I's pattern and cached CSR views.
    """
    _need_square("gcn_norm", A)
    if add_loops:
        A = add_self_loops(A)
    d = _inv_sqrt_or_zero(A.sum(axis=1))  # (n,)
    return A.with_values(A.values * Gather.apply(d, A.row) * Gather.apply(d, A.col))


def _row_max(v: np.ndarray, s: Structure) -> np.ndarray:
    """Per-row maximum of the stored values (0 for an empty row), one reduceat in CSR order."""
    csr = s.csr()
    ordered = v if csr.perm is None else v[csr.perm]
    out = np.zeros(s.shape[0], dtype=v.dtype)
    nonempty = np.diff(csr.indptr) > 0
    if len(ordered):
        out[nonempty] = np.maximum.reduceat(ordered, csr.indptr[:-1][nonempty])
    return out


def _row_sums(v: np.ndarray, s: Structure) -> np.ndarray:
    """Σ of each row's stored values, accumulated in float64 in stored order.

    A row-sorted pattern (every attention pattern) sums each row with one `add.reduceat`
    over its contiguous run (float64 accumulation through NumPy's buffered cast, so no
    nnz-sized float64 array), bitwise the same as `bincount(row, weights=v)`, which it
    replaces because that one converts the weights to an nnz-sized float64 copy first."""
    csr = s.csr()
    if csr.perm is not None:
        return np.bincount(s.row, weights=v, minlength=s.shape[0])
    out = np.zeros(s.shape[0])
    nonempty = np.diff(csr.indptr) > 0
    if len(v):
        out[nonempty] = np.add.reduceat(v, csr.indptr[:-1][nonempty], dtype=np.float64)
    return out


def _by_row(fn, out: np.ndarray, row: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
    """out[k] = fn(per_row[row_k], arrays[k]...) for per-row float64 values, in fixed chunks of
    entries on the thread pool: the float64 temporaries are chunk-sized, never nnz-sized, and
    elementwise work is bitwise the same for any thread count."""
    step = 1 << 16
    chunks = [(a, min(a + step, len(out))) for a in range(0, len(out), step)]
    kernels.run_blocks(lambda a, b: fn(row[a:b], out[a:b], *(x[a:b] for x in arrays)), chunks)
    return out


def _softmax(v: np.ndarray, s: Structure) -> np.ndarray:
    """Each row's softmax of the stored values v (in v's dtype)."""
    e = np.exp(v - _row_max(v, s)[s.row])  # ≤ 1: shifting by the row max cannot overflow
    total = _row_sums(e, s)  # float64, as the division below (then rounded to v's dtype)
    return _by_row(lambda r, o, e_: np.divide(e_, total.take(r), out=o, casting="same_kind"),
                   np.empty_like(e, dtype=v.dtype), s.row, e)


def _softmax_vjp(out: np.ndarray, g: np.ndarray, s: Structure) -> np.ndarray:
    """dv = out ⊙ (g − Σ_row(out ⊙ g)[row]), in float64 per chunk, rounded once."""
    dot = _row_sums(out * g, s)

    def chunk(r, o, s_, g_):
        np.multiply(s_, np.subtract(g_, dot.take(r)), out=o, casting="same_kind")
    return _by_row(chunk, np.empty_like(out), s.row, out, g)


class RowSoftmax(SparseFunction):
    op_name, reference = "row_softmax", staticmethod(ref.row_softmax)

    def forward(ctx, v, s):
        out = _softmax(v, s)
        ctx.save_for_backward(out)
        ctx.s = s
        return out

    def vjp(ctx, g):
        """dv = s ⊙ (g − Σ_row(s ⊙ g)[row])."""
        return _softmax_vjp(ctx.saved_tensors[0], g, ctx.s), None


class AttentionSoftmax(SparseFunction):
    op_name, reference = "attention_softmax", staticmethod(ref.attention_softmax)

    def forward(ctx, dst, src, s, slope):
        out, positive = _attention(dst, src, s, slope)
        ctx.save_for_backward(out, positive)
        ctx.s, ctx.slope, ctx.cols = s, slope, len(src)
        return out

    def vjp(ctx, g):
        """dz = α ⊙ (g − Σ_row(α ⊙ g)[row]) (softmax), dl = dz·(1 if l > 0 else slope);
        d dst[i] = Σ_{row_k = i} dl_k,  d src[j] = Σ_{col_k = j} dl_k."""
        dl, d_dst = _attention_vjp(*ctx.saved_tensors, g, ctx.s, ctx.slope)
        d_src = scatter_sum(ctx.s.col, dl, ctx.cols).astype(dl.dtype, copy=False)
        return d_dst.astype(dl.dtype, copy=False), d_src, None, None


# ---------------------------------------------------------------- the softmax by row blocks


def _attention(dst: np.ndarray, src: np.ndarray, s: Structure,
               slope: float) -> tuple[np.ndarray, np.ndarray]:
    """(α, [l > 0]) for the logits l = dst[row] + src[col]: by blocks of whole rows on a
    row-sorted pattern (`kernels.attention_rows`), else in one pass."""
    blocks = _entry_blocks(s)
    if blocks is not None:
        return kernels.attention_rows(s.csr().indptr, s.row, s.col, dst, src, slope, blocks)
    logits = dst.take(s.row)
    logits += src.take(s.col)
    positive = np.greater(logits, 0)
    return _softmax(kernels.leaky_relu_into(logits, logits, slope), s), positive


def _attention_vjp(out: np.ndarray, positive: np.ndarray, g: np.ndarray, s: Structure,
                   slope: float) -> tuple[np.ndarray, np.ndarray]:
    """(dl, d dst in float64), as `_attention` cuts the pattern."""
    blocks = _entry_blocks(s)
    if blocks is not None:
        return kernels.attention_rows_vjp(s.csr().indptr, s.row, out, g, positive, slope,
                                          blocks)
    dl = _softmax_vjp(out, g, s)
    kernels.scale_by_sign(dl, dl, positive, slope)
    return dl, _row_sums(dl, s)


def _entry_blocks(s: Structure) -> list[tuple[int, int]] | None:
    """Row ranges of about `tuning.ENTRIES_PER_BLOCK` entries each (a cut fixed by the pattern
    alone, whole rows only) when the pattern is row-sorted, else None: a row's softmax reads
    that row's entries only, so `kernels.attention_rows` computes a block start to finish."""
    csr = s.csr()
    if csr.perm is not None or s.nnz == 0:
        return None
    if csr.entry_blocks is None:
        step = kernels.tuning.ENTRIES_PER_BLOCK
        cuts = np.searchsorted(csr.indptr, np.arange(step, s.nnz, step))
        bounds = np.unique(np.concatenate([[0], cuts, [s.shape[0]]]))
        csr.entry_blocks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    return csr.entry_blocks


def attention_softmax(A: SparseTensor, dst: Tensor, src: Tensor,
                      negative_slope: float = 0.2) -> SparseTensor:
    """α on A's pattern: α_k = softmax over row_k of LeakyReLU(dst[row_k] + src[col_k]).

    GAT's edge attention in one op: the two gathers, the sum, the LeakyReLU and the row
    softmax of `row_softmax(A.with_values((dst[row] + src[col]).leaky_relu(slope)))` (the same
    values, bitwise), with one backward that keeps the softmax output and a bit mask instead
    of three nnz-sized float arrays and four autograd nodes. dst (rows,), src (cols,).
    """
    if not isinstance(A, SparseTensor):
        raise ShapeError(f"attention_softmax: expected a SparseTensor, got {type(A).__name__}")
    dst, src = (x if isinstance(x, Tensor) else Tensor(np.asarray(x), dtype=A.dtype)
                for x in (dst, src))
    if dst.shape != (A.shape[0],) or src.shape != (A.shape[1],):
        raise ShapeError(f"attention_softmax: pattern {A.shape} needs dst ({A.shape[0]},) and "
                         f"src ({A.shape[1]},), got {dst.shape} and {src.shape}")
    return A.with_values(AttentionSoftmax.apply(dst, src, A._structure, float(negative_slope)))


def row_softmax(A: SparseTensor) -> SparseTensor:
    """Softmax over each row's stored values (the edge softmax of attention GNNs).

    Every stored entry counts once, duplicates included (coalesce first to merge them);
    empty rows stay empty. Same pattern and cached views as A.
    """
    if not isinstance(A, SparseTensor):
        raise ShapeError(f"row_softmax: expected a SparseTensor, got {type(A).__name__}")
    return A.with_values(RowSoftmax.apply(A.values, A._structure))
