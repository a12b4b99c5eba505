"""Gradients that are zero outside a few rows: finding those rows, recording them, and the
weight gradient aᵀ·g over them only.

A loss on a few training nodes has a gradient that is zero on every other row, and a sparse
product carries that one hop back per layer; the products below it then need only those rows
(`sparse_rows`, used by `Structure.t_matmul` and `matmul_tn`). The op that makes such a
gradient may record the rows outside which it is zero (`mark_rows`), so the next product reads
g at those rows only instead of a pass over all of it. Every function here gives the same bits
for any thread count (`parallel`'s fixed blocks).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from mgsparse.kernels import modes, pool, tuning

_KNOWN_ROWS: dict[int, tuple[weakref.ref, np.ndarray]] = {}  # id(g) -> (g, its rows)


def mark_rows(g: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Record that gradient `g` is zero outside `rows` (increasing, unique; a superset of its
    nonzero rows), as the op that made it knows: `sparse_rows(g)` then reads g at those rows
    only. The record lives as long as g; g must not be written afterwards (the backward
    never writes a gradient it has handed on). Returns g."""
    key = id(g)
    _KNOWN_ROWS[key] = (weakref.ref(g, lambda _, key=key: _KNOWN_ROWS.pop(key, None)), rows)
    return g


def forget_rows(g: np.ndarray) -> None:
    """Drop g's record: g is about to be handed to code that may write it (a `.grad`)."""
    hit = _KNOWN_ROWS.get(id(g))
    if hit is not None and hit[0]() is g:
        del _KNOWN_ROWS[id(g)]


def known_rows(g: Any) -> np.ndarray | None:
    """The rows `mark_rows` recorded for this very array, or None."""
    hit = _KNOWN_ROWS.get(id(g))
    return hit[1] if hit is not None and hit[0]() is g else None


def same_rows(out: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Mark `out` with g's recorded rows, for an op whose output row i is zero wherever g's
    row i is (g·Wᵀ, g·mask); returns out."""
    rows = known_rows(g)
    return out if rows is None else mark_rows(out, rows)


def sparse_rows(g: np.ndarray) -> np.ndarray | None:
    """The indices of the nonzero rows of gradient g when they are at most a quarter of its
    rows (the products below then take those rows only), else None.

    The test: |g|·1 (a BLAS pass, 6x faster than g.any(axis=1); NaN counts as nonzero), block
    by block of rows on the pool, stopping once the rows found are more than a quarter: a
    dense gradient is ruled out after reading about a quarter of it, a sparse one is read once.
    The answer is the whole pass's at any thread count. A gradient with a record of at most a
    quarter of the rows (`mark_rows`) is read at those rows only, for the same answer (at
    100,000 rows the passes took ~2.5 ms of a GCN epoch); a larger record is left to the pass.
    """
    if g.ndim not in (1, 2) or len(g) < tuning.MIN_BLOCK_ROWS:
        return None
    n = len(g)
    limit, step = tuning.SPARSE_ROWS_MAX * n, -(-n // tuning.COUNT_BLOCKS)
    ones = np.ones(g.shape[1], dtype=g.dtype) if g.ndim == 2 else None
    known = known_rows(g)
    if known is not None and len(known) <= limit:  # recorded (`mark_rows`): read those only
        if modes.COUNTS is not None:
            modes.count("row record read")
        return known[(g[known] if ones is None else np.abs(g[known]) @ ones) != 0]
    seen, over = [0], [False]  # rows found so far (a lost update never counts one twice)

    def block(start: int, stop: int) -> np.ndarray | None:
        if over[0]:  # past the limit already: the blocks left are not read
            return None
        rows = np.flatnonzero(g[start:stop] if ones is None else np.abs(g[start:stop]) @ ones)
        seen[0] += len(rows)
        if seen[0] > limit:  # at most the true count: more than a quarter for sure
            over[0] = True
        return rows + start
    # on the pool; not an exception to stop: its traceback would hold g in a reference cycle
    # (here, not on the pool, below MIN_PARALLEL_ELEMENTS: 9,700 × 64 took 0.07 ms, 0.2 there)
    found = pool.run_blocks(block, [(s, min(s + step, n)) for s in range(0, n, step)],
                                here=g.size < tuning.MIN_PARALLEL_ELEMENTS)
    if over[0] or sum(map(len, found)) > limit:
        return None
    if modes.COUNTS is not None:
        modes.count("row scan found")
    return np.concatenate(found)


def matmul_tn(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """aᵀ·g for a (M, K), g (M, N) — the weight gradient of x·W: a sum over M rows.

    Only the nonzero rows of g count (see `sparse_rows`). Each fixed block of rows (of those
    rows, or of all) gives a (K, N) partial product, added in block order, so the rounding
    does not depend on the thread count.
    """
    return matmul_tn_computed(a.__getitem__, a.shape, g)


def matmul_tn_computed(rows_of: Callable[[Any], np.ndarray], shape: tuple[int, int],
                       g: np.ndarray) -> np.ndarray:
    """`matmul_tn(a, g)` for an (M, K) operand made on demand: `rows_of(index)` gives a[index]
    for a slice or an array of row indices (dropout of a constant input: `nn.layers`)."""
    if shape[0] * shape[1] * g.shape[1] < tuning.MIN_PARALLEL_WORK:
        return rows_of(slice(None)).T @ g
    rows = sparse_rows(g)
    if modes.COUNTS is not None:
        modes.count("matmul_tn rows" if rows is not None else "matmul_tn blocks")
    if rows is not None:  # those rows gathered and multiplied by blocks of them
        partials = pool.run_blocks(lambda s, e: rows_of(rows[s:e]).T @ g[rows[s:e]],
                                       pool.row_blocks(len(rows)))
    else:
        partials = pool.run_blocks(lambda s, e: rows_of(slice(s, e)).T @ g[s:e],
                                       pool.row_blocks(shape[0]))
    out = partials[0]
    for p in partials[1:]:
        out += p
    return out
