"""GAT's edge softmax on a row-sorted pattern, by blocks of whole rows on the pool.

Everything in a row's softmax (its max, its exponentials, their float64 sum, the division,
and the same for the backward) reads that row's entries only, so a block of whole rows is
computed start to finish, its temporaries block-sized, the blocks on the thread pool, with
the same float operations in the same order per row as one pass over all entries: bitwise
equal to it (`sparse.graph`'s one-pass path, which also serves unsorted patterns). The
pattern comes as CSR arrays: `indptr` (rows + 1,), `row` and `col` (nnz,) in row order;
`blocks` the (r0, r1) row ranges that cut it.
"""

from __future__ import annotations

import numpy as np

from mgsparse.kernels.elementwise import leaky_relu_into, scale_by_sign
from mgsparse.kernels.pool import run_blocks


def attention_rows(indptr: np.ndarray, row: np.ndarray, col: np.ndarray, dst: np.ndarray,
                   src: np.ndarray, slope: float,
                   blocks: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(α, [l > 0]): α_k = softmax over row_k of l = LeakyReLU(dst[row_k] + src[col_k])."""
    out = np.empty(len(row), dtype=np.result_type(dst, src))
    positive = np.empty(len(row), dtype=bool)

    def block(r0: int, r1: int) -> None:
        e0, e1, starts, nonempty = _row_starts(indptr, r0, r1)
        rows = row[e0:e1] - r0
        z = dst.take(row[e0:e1])
        z += src.take(col[e0:e1])
        np.greater(z, 0, out=positive[e0:e1])
        leaky_relu_into(z, z, slope)
        top = np.zeros(r1 - r0, dtype=z.dtype)
        top[nonempty] = np.maximum.reduceat(z, starts)
        np.exp(np.subtract(z, top.take(rows), out=z), out=z)
        total = np.zeros(r1 - r0)
        total[nonempty] = np.add.reduceat(z, starts, dtype=np.float64)
        np.divide(z, total.take(rows), out=out[e0:e1], casting="same_kind")
    run_blocks(block, blocks)
    return out, positive


def attention_rows_vjp(indptr: np.ndarray, row: np.ndarray, out: np.ndarray, g: np.ndarray,
                       positive: np.ndarray, slope: float,
                       blocks: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(dl, d dst): dl = α ⊙ (g − Σ_row(α ⊙ g)[row]) times the LeakyReLU's slope where l ≤ 0,
    and d dst its row sums (float64)."""
    dl, d_dst = np.empty_like(out), np.zeros(len(indptr) - 1)

    def block(r0: int, r1: int) -> None:
        e0, e1, starts, nonempty = _row_starts(indptr, r0, r1)
        rows = row[e0:e1] - r0
        a, g_ = out[e0:e1], g[e0:e1]
        dot = np.zeros(r1 - r0)
        dot[nonempty] = np.add.reduceat(a * g_, starts, dtype=np.float64)
        part = np.multiply(a, np.subtract(g_, dot.take(rows)), out=dl[e0:e1], casting="same_kind")
        scale_by_sign(part, part, positive[e0:e1], slope)
        sums = np.zeros(r1 - r0)
        sums[nonempty] = np.add.reduceat(part, starts, dtype=np.float64)
        d_dst[r0:r1] = sums
    run_blocks(block, blocks)
    return dl, d_dst


def _row_starts(indptr: np.ndarray, r0: int, r1: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """(e0, e1, starts, nonempty): the block's entries [e0, e1), each nonempty row's first
    entry relative to e0, and which of rows r0..r1 are nonempty."""
    e0, e1 = int(indptr[r0]), int(indptr[r1])
    nonempty = indptr[r0 + 1:r1 + 1] > indptr[r0:r1]
    return e0, e1, (indptr[r0:r1] - e0)[nonempty], nonempty
