"""The dense bodies of the engine's fast ops: products and sums by fixed row blocks.

Each gives the bits of the plain numpy call it stands for at any thread count (see
`kernels.pool`): a product's rows are cut in blocks whose bounds depend on the sizes only, a
bias is added to a block's rows while they are in cache, a column sum is one BLAS pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mgsparse.kernels import modes, tuning
from mgsparse.kernels.pool import get_num_threads, row_blocks, run_blocks


def add_rows(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = a + b, the same bits as `np.add(a, b, out=out)`, faster for a (N, C) and a bias (C,).

    numpy broadcasts b by running its inner loop once per row of C elements, and pays a
    set-up per row that dominates at a GNN's widths: (2708, 16) took 14.8 µs, (100000, 16)
    603 µs. Viewing k rows as one row of k·C elements against b tiled k times runs the same
    additions in loops of ≥ tuning.TILED_WIDTH elements (8.2 and 230 µs); the rows left over, fewer
    than k, take the plain call, as do non-contiguous arrays and any other shapes."""
    if a.ndim != 2 or b.ndim != 1:
        return np.add(a, b, out=out)
    n, c = a.shape
    k = -(-tuning.TILED_WIDTH // max(c, 1))
    if n < max(tuning.TILED_ROWS, k) or c == 0 or not (a.flags.c_contiguous and out.flags.c_contiguous):
        return np.add(a, b, out=out)
    if modes.COUNTS is not None:
        modes.count("tiled add_rows")
    full = n - n % k
    tiled = np.empty(k * c, dtype=b.dtype)
    tiled.reshape(k, c)[:] = b
    np.add(a[:full].reshape(-1, k * c), tiled, out=out[:full].reshape(-1, k * c))
    if full < n:
        np.add(a[full:], b, out=out[full:])
    return out




def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """a·b (+ bias) for 2-d a (M, K), b (K, N): rows of a cut in fixed blocks, one BLAS call
    each, the bias added to each block while it is still in cache."""
    if a.ndim != 2 or b.ndim != 2 or a.size * b.shape[1] < tuning.MIN_PARALLEL_WORK:
        out = np.matmul(a, b)
        return out if bias is None else add_rows(out, bias, out)
    m = a.shape[0]
    out = np.empty((m, b.shape[1]), dtype=np.result_type(a, b))

    def block(s, e):
        np.matmul(a[s:e], b, out=out[s:e])
        if bias is not None:
            add_rows(out[s:e], bias, out[s:e])
    run_blocks(block, row_blocks(m))
    return out


def matmul_computed(rows_of: Callable[[Any], np.ndarray], shape: tuple[int, int],
                    b: np.ndarray) -> np.ndarray:
    """a·b for an (m, k) operand a that is never stored whole: `rows_of(index)` makes a[index]
    for a slice of rows (dropout of a constant input, say), tuning.CACHE_ROWS at a time, each
    multiplied while it is still in cache. The slices depend on m only, so any thread count
    gives the same bits; against `matmul(a, b)`, whose BLAS calls take other row counts, a
    row may differ in its last bit (BLAS rounds a row by where it falls in its call)."""
    m, k = shape
    out = np.empty((m, b.shape[1]), dtype=b.dtype)  # an op's operands share one dtype
    if modes.COUNTS is not None and m > tuning.CACHE_ROWS:
        modes.count("computed operand chunks")

    def block(s, e):
        for start in range(s, e, tuning.CACHE_ROWS):
            stop = min(start + tuning.CACHE_ROWS, e)
            np.matmul(rows_of(slice(start, stop)), b, out=out[start:stop])
    if m * k * b.shape[1] < tuning.MIN_PARALLEL_WORK:
        block(0, m)
    else:
        run_blocks(block, row_blocks(m))
    return out


def argmax_rows(z: np.ndarray) -> np.ndarray:
    """z.argmax(axis=1) for a 2-d z, in row blocks on the pool (each row's answer is the one
    call's); one call on one thread, where blocks gain nothing."""
    if z.ndim != 2 or len(z) < 2 * tuning.MIN_BLOCK_ROWS or get_num_threads() == 1:
        return z.argmax(axis=1)  # numpy's set-up per row, not the columns, sets the cost
    out = np.empty(len(z), dtype=np.intp)
    run_blocks(lambda s, e: np.argmax(z[s:e], axis=1, out=out[s:e]), row_blocks(len(z)))
    return out


def column_sums(g: np.ndarray) -> np.ndarray:
    """Σ over the rows of a 2-d float array (a bias gradient): 1ᵀ·g, one BLAS pass.

    20x faster than g.sum(axis=0) at 100,000 × 16, and exact for any thread count since
    BLAS runs one thread (set here on first use).
    """
    get_num_threads()
    return np.ones(len(g), dtype=g.dtype) @ g
