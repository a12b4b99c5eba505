"""Segment ops: rows of x grouped by a segment id per row (the graphs of a batch of graphs).

A batch of B graphs stacks their nodes into one x (N, F) and gives each row its graph id,
`batch` (N,) int64 in [0, B) — sorted, as PyG's `batch` vector, though any order works.
Three reductions per segment b, over the rows i with batch_i = b:

- `segment_sum`   out_b = Σ_i x_i      = (P·X)_b, P (B, N) the pooling matrix, P[b, i] = 1
- `segment_mean`  out_b = Σ_i x_i / n_b = (P·X)_b with P[b, i] = 1 / n_b
- `segment_max`   out_b = max_i x_i per feature (`SegmentMax`, its own Function)

Sum and mean are one SpMM with a constant sparse P, so they reuse SpMM's forward and
backward (dX = Pᵀ·G). The max needs its own backward: dx_i = g_b at the row i that holds
the maximum of feature f in segment b (the first such row on a tie, so the gradient is
deterministic and not split), 0 elsewhere. An empty segment (n_b = 0) gives 0 for all three
and sends no gradient anywhere — never NaN or −∞. Everything is vectorised: reduceat over the
rows grouped by segment, no loop over segments or rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse import reference as ref
from mgsparse.sparse.ops import SparseFunction
from mgsparse.sparse.structure import Structure
from mgsparse.sparse.tensor import SparseTensor

REDUCTIONS = ("sum", "mean", "max")


class Segments:
    """A checked segment-id vector and what every reduction over it needs, computed once.

    ``batch`` (N,) int64; ``num_segments`` B; ``counts`` (B,) rows per segment; ``order``
    the stable permutation grouping the rows by segment (None when `batch` is sorted);
    ``starts`` (B',) where each non-empty segment begins among the grouped rows and
    ``nonempty`` (B,) bool. Pooling matrices are built on first use, one per (reduce, dtype).
    """

    def __init__(self, batch: Any, num_nodes: int, num_segments: int | None = None,
                 who: str = "segment"):
        self.batch, self.num_segments = _check_batch(batch, num_nodes, num_segments, who)
        self.num_nodes = int(num_nodes)
        self.counts = np.bincount(self.batch, minlength=self.num_segments)
        ordered = len(self.batch) < 2 or bool(np.all(self.batch[1:] >= self.batch[:-1]))
        self.order = None if ordered else np.argsort(self.batch, kind="stable")
        self.nonempty = self.counts > 0
        ptr = np.concatenate([[0], np.cumsum(self.counts)])
        self.starts = ptr[:-1][self.nonempty]
        self._pooling: dict[tuple[str, np.dtype], SparseTensor] = {}

    def pooling(self, reduce: str = "sum", dtype: Any = np.float32) -> SparseTensor:
        """P (B, N): P[batch_i, i] = 1 (sum) or 1 / n_{batch_i} (mean); a constant operand."""
        key = (reduce, np.dtype(dtype))
        if key not in self._pooling:
            self._pooling[key] = _pooling_matrix(self, reduce, np.dtype(dtype))
        return self._pooling[key]

    def __repr__(self) -> str:
        empty = int((~self.nonempty).sum())
        return f"Segments(rows={self.num_nodes}, segments={self.num_segments}, empty={empty})"


def _check_batch(batch: Any, num_nodes: int, num_segments: int | None,
                 who: str) -> tuple[np.ndarray, int]:
    """The (N,) int64 ids and B, or a one-line ShapeError naming `who`."""
    batch = np.asarray(batch)
    if batch.ndim != 1 or (batch.size and batch.dtype.kind not in "iu"):
        raise ShapeError(f"{who}: batch must be a 1-d integer array of graph ids, got "
                         f"{batch.dtype} {batch.shape}")
    if len(batch) != num_nodes:
        raise ShapeError(f"{who}: batch has {len(batch)} ids but x has {num_nodes} rows")
    batch = batch.astype(np.int64, copy=False)
    top = int(batch.max()) + 1 if batch.size else 0
    if num_segments is None:
        num_segments = top
    if int(num_segments) < 0 or (batch.size and (batch.min() < 0 or top > num_segments)):
        bad = int(batch.min()) if batch.size and batch.min() < 0 else top - 1
        raise ShapeError(f"{who}: graph id {bad} is outside [0, {num_segments}) "
                         f"(num_graphs={num_segments})")
    return batch, int(num_segments)


def _pooling_matrix(seg: Segments, reduce: str, dtype: np.dtype) -> SparseTensor:
    if reduce not in ("sum", "mean"):
        raise ShapeError(f"pooling matrix: reduce must be 'sum' or 'mean', got {reduce!r}")
    n = seg.num_nodes
    indices = np.stack([seg.batch, np.arange(n, dtype=np.int64)])
    # one entry per row, so a sorted batch is already canonical (row-major, no duplicates)
    structure = Structure(indices, (seg.num_segments, n), canonical=seg.order is None)
    values = np.ones(n, dtype=dtype)
    if reduce == "mean":
        values /= seg.counts[seg.batch].astype(dtype)
    return SparseTensor._make(structure, Tensor(values, dtype=dtype))


def segments(batch: Any, x: Any, num_segments: int | None = None,
             who: str = "segment") -> Segments:
    """`batch` as a `Segments` of x's rows (a `Segments` already is checked against x)."""
    n = x.shape[0] if getattr(x, "ndim", 0) else 0
    if isinstance(batch, Segments):
        if batch.num_nodes != n:
            raise ShapeError(f"{who}: the segments cover {batch.num_nodes} rows but x has {n}")
        if num_segments is not None and num_segments != batch.num_segments:
            raise ShapeError(f"{who}: num_graphs={num_segments} but the segments hold "
                             f"{batch.num_segments}")
        return batch
    return Segments(batch, n, num_segments, who)


# ---------------------------------------------------------------- the max, a Function


def _width(shape: tuple) -> int:
    """Entries per row (1 for a vector): a reshape with -1 fails on zero rows."""
    return int(np.prod(shape[1:], dtype=np.int64))


class SegmentMax(SparseFunction):
    op_name, reference = "segment_max", staticmethod(ref.segment_max)

    def forward(ctx, x, seg):
        """out_b = max over the rows of segment b (0 for an empty one); x (N,) or (N, F)."""
        out, ctx.arg = _max_rows(x.reshape(len(x), _width(x.shape)), seg)
        ctx.seg, ctx.shape = seg, x.shape
        return out.reshape((seg.num_segments,) + x.shape[1:])

    def vjp(ctx, g):
        """dx[arg_bf, f] = g[b, f] for every non-empty segment b (first arg-max row), else 0."""
        g2 = g.reshape(len(g), _width(g.shape))
        dx = np.zeros((ctx.shape[0], g2.shape[1]), dtype=g.dtype)
        dx[ctx.arg, np.arange(g2.shape[1])] = g2[ctx.seg.nonempty]  # rows distinct per f
        return dx.reshape(ctx.shape), None


def _max_rows(x2: np.ndarray, seg: Segments) -> tuple[np.ndarray, np.ndarray]:
    """(out (B, F), arg (B', F)): each segment's per-feature max of the rows of x2 (N, F), 0
    for an empty one, and for each non-empty segment the first row holding it (its first row
    for a NaN max). One `reduceat` over the rows grouped by segment, one for the arg-max."""
    out = np.zeros((seg.num_segments, x2.shape[1]), dtype=x2.dtype)
    if not len(seg.starts):
        return out, np.zeros((0, x2.shape[1]), dtype=np.int64)
    xs = x2 if seg.order is None else x2[seg.order]  # rows grouped by segment
    top = np.maximum.reduceat(xs, seg.starts, axis=0)  # (B', F)
    hit = xs == np.repeat(top, seg.counts[seg.nonempty], axis=0)
    pos = np.arange(len(xs), dtype=np.int64)[:, None]
    arg = np.minimum.reduceat(np.where(hit, pos, len(xs)), seg.starts, axis=0)
    arg = np.where(arg < len(xs), arg, seg.starts[:, None])  # a NaN max: its first row
    out[seg.nonempty] = top
    return out, arg if seg.order is None else seg.order[arg]


# ---------------------------------------------------------------- front end


def _dense(x: Any) -> Tensor:
    if isinstance(x, SparseTensor):
        raise ShapeError("segment ops pool dense rows; got a SparseTensor (densify it first)")
    x = x if isinstance(x, Tensor) else Tensor(np.asarray(x))
    if x.ndim not in (1, 2):
        raise ShapeError(f"segment ops need x of shape (N,) or (N, F), got {x.shape}")
    return x


def pooling_matrix(batch: Any, num_segments: int | None = None, reduce: str = "sum",
                   dtype: Any = np.float32) -> SparseTensor:
    """The (B, N) sparse pooling matrix of a batch vector: P·X sums (or averages) each
    segment's rows. Built vectorised; its values are constants."""
    batch = np.asarray(batch)
    return Segments(batch, len(batch), num_segments, "pooling_matrix").pooling(reduce, dtype)


def segment_sum(x: Any, batch: Any, num_segments: int | None = None) -> Tensor:
    """(B, F): Σ of each segment's rows, one SpMM with the pooling matrix."""
    x = _dense(x)
    return segments(batch, x, num_segments, "segment_sum").pooling("sum", x.dtype) @ x


def segment_mean(x: Any, batch: Any, num_segments: int | None = None) -> Tensor:
    """(B, F): mean of each segment's rows (0 for an empty segment), one SpMM."""
    x = _dense(x)
    return segments(batch, x, num_segments, "segment_mean").pooling("mean", x.dtype) @ x


def segment_max(x: Any, batch: Any, num_segments: int | None = None) -> Tensor:
    """(B, F): per-feature max of each segment's rows (0 for an empty segment); the gradient
    goes to the first arg-max row only."""
    x = _dense(x)
    return SegmentMax.apply(x, segments(batch, x, num_segments, "segment_max"))


def segment_reduce(x: Any, batch: Any, num_segments: int | None = None,
                   reduce: str = "sum") -> Tensor:
    """`segment_sum`, `segment_mean` or `segment_max` by name."""
    if reduce not in REDUCTIONS:
        raise ShapeError(f"unknown reduction {reduce!r}; known: {', '.join(REDUCTIONS)}")
    fn = {"sum": segment_sum, "mean": segment_mean, "max": segment_max}[reduce]
    return fn(x, batch, num_segments)
