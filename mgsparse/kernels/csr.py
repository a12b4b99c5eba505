"""A pattern's CSR view and every A·X / Aᵀ·X path, chosen here: the sparse products' how.

CSR view of a pattern: ``perm`` sorts the stored entries by row (stably, duplicates and
unsorted columns kept — scipy's kernels accept both), so for values ``v`` in COO order the
CSR data is ``v[perm]`` (``perm is None`` when the entries are already row-sorted).

Products run on scipy's own CSR kernel (`csr_matvecs`, which releases the GIL), called on
row blocks of the pattern on the thread pool: each output row is one kernel pass over that
row's entries in stored order, whichever block and thread it falls in, so the result is
bitwise the same for any thread count. Aᵀ·X reads A's own CSR as CSC instead
(`CSRView.t_matmul`), where that gives the same bits: one call, or A's column slices on the
pool and past the cache (`kernels.slices`); so does A·X of a fixed A that equals its
transpose, and of a fixed canonical A through its transpose's CSR where the output is wide
(`matmul`): the same bits, faster. A gradient zero outside a few rows takes only those rows of
A (`t_matmul`). `kernels.reference()` runs every product as scipy's one plain call instead.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse import _sparsetools  # the kernels behind scipy's csr @ dense

from mgsparse.kernels import modes, pool, slices, tuning
from mgsparse.kernels import rows as rowrecords
from mgsparse.kernels.dense import add_rows
from mgsparse.kernels.inplace import keep
from mgsparse.kernels.slices import ColumnSlices

_INT32_MAX = np.iinfo(np.int32).max


class CSRView:
    """Row pointers, column indices and the COO→CSR permutation of one pattern."""

    __slots__ = ("_blocks", "_permuted", "_slices", "_symmetric", "entry_blocks", "indices",
                 "indptr", "perm", "template")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, perm: np.ndarray | None,
                 shape: tuple[int, int]):
        self.indptr, self.indices, self.perm = indptr, indices, perm
        data = np.zeros(len(indices), dtype=np.float32)
        # One checked construction per pattern; later matrices copy its attributes.
        self.template = sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
        self.template.data = None  # every matrix() sets its own; don't hold nnz floats here
        self._blocks: tuple[tuple, list[tuple[int, int]]] | None = None  # (thresholds, cut)
        self.entry_blocks: list[tuple[int, int]] | None = None  # sparse.graph's row blocks
        self._permuted: tuple[weakref.ref, np.ndarray] | None = None
        self._symmetric: tuple[weakref.ref, bool | None] | None = None  # None: unsorted
        self._slices: dict[int, ColumnSlices] = {}  # by count: a width's, a thread count's

    def __repr__(self) -> str:
        order = "row-sorted" if self.perm is None else "permuted"
        return f"CSRView(shape={self.template.shape}, nnz={len(self.indices)}, {order})"

    def matrix(self, values: np.ndarray) -> sp.csr_matrix:
        """A scipy CSR matrix of this pattern holding `values` (given in COO order).

        Skips scipy's format checks (~10 µs): the index arrays were checked when the
        template was built, and only the data array differs between calls.
        """
        m = object.__new__(sp.csr_matrix)
        m.__dict__.update(self.template.__dict__)
        m.data = self.data(values)
        return m

    def data(self, values: np.ndarray, constant: bool = False) -> np.ndarray:
        """`values` (COO order) in this view's CSR order.

        `constant=True` promises the array is never written to (a Â that needs no gradient):
        its permuted copy is then kept while the array lives and reused by later calls, and
        the array is made read-only, so that a later write fails loudly instead of meeting a
        stale copy here; only an array mgsparse owns or one frozen already (`inplace.keep`):
        a caller's own array stays writable and is permuted afresh each call.
        """
        if self.perm is None:
            return values
        if not constant or not keep(values):
            return values[self.perm]
        hit = self._permuted
        if hit is not None and hit[0]() is values:
            return hit[1]
        data = values[self.perm]
        self._permuted = (weakref.ref(values), data)
        return data

    def symmetric(self, values: np.ndarray) -> bool | None:
        """Whether the matrix of `values` (COO order) equals its transpose entry for entry, for
        a pattern whose rows list their columns in order without repeats; None the first time
        an array is asked about. A fixed Â is multiplied every step: from its second product
        on, the answer (one stable sort of the columns) is kept while the array lives, and
        the array is made read-only, as `data(constant=True)` does (so only an array mgsparse
        owns or one frozen already: a caller's own array is never asked about). Arrays made
        afresh for each product (attention in an evaluation pass) are never sorted."""
        hit = self._symmetric
        if hit is None or hit[0]() is not values:
            self._symmetric = (weakref.ref(values), None)
            return None
        if hit[1] is not None:
            return hit[1]
        if not keep(values):  # a caller's array: its answer could go stale
            return None
        n, cols = self.template.shape
        counts = np.diff(self.indptr)
        same = n == cols and np.array_equal(counts, np.bincount(self.indices, minlength=n))
        if same:  # entries by (column, row): the transpose's CSR order
            order = np.argsort(self.indices, kind="stable")
            rows = np.repeat(np.arange(n, dtype=self.indices.dtype), counts)
            data = self.data(values)
            same = np.array_equal(rows[order], self.indices) and \
                np.array_equal(data[order], data)
        self._symmetric = (hit[0], bool(same))
        return bool(same)

    def matmul(self, values: np.ndarray, X: np.ndarray, constant: bool = False,
               bias: np.ndarray | None = None) -> np.ndarray:
        """A·X for dense X (cols,) or (cols, F): scipy's CSR kernel on fixed row blocks. A
        bias (F,) for a 2-d X is added to each block's rows while they are still in cache.
        (Zeroing each block's rows on the pool too, as the column slices do, measured no gain
        here: 0.98–1.05 of one np.zeros at 5 and 16 columns, 1 and 2 threads.)"""
        data = self.data(values, constant)
        rows, cols = self.template.shape
        X = np.ascontiguousarray(X)  # the kernel walks rows of X: a transposed view is copied
        if data.dtype != X.dtype or rows == 0 or X.size == 0 or X.ndim > 2:
            out = np.asarray(self.matrix(values) @ X)  # scipy's mixed-dtype and edge paths
            return out if bias is None else out + bias
        out = np.zeros((rows, *X.shape[1:]), dtype=X.dtype)
        cut_for = (tuning.MIN_BLOCK_ROWS, tuning.MAX_BLOCKS)  # a cut `tiny()` made is not kept
        if self._blocks is None or self._blocks[0] != cut_for:
            self._blocks = (cut_for, pool.nnz_blocks(self.indptr))
        ptr, idx = self.indptr, self.indices
        if X.ndim == 1:
            def kernel(s, e):
                _sparsetools.csr_matvec(e - s, cols, ptr[s:e + 1], idx, data, X, out[s:e])
        else:
            f, x_flat = X.shape[1], X.reshape(-1)

            def kernel(s, e):  # csr_matvecs adds row i of A·X into out[i]: out starts at 0
                _sparsetools.csr_matvecs(e - s, cols, f, ptr[s:e + 1], idx, data, x_flat,
                                         out[s:e].reshape(-1))
                if bias is not None:
                    add_rows(out[s:e], bias, out[s:e])
        pool.run_blocks(kernel, self._blocks[1])
        return out

    def t_matmul(self, values: np.ndarray, X: np.ndarray, constant: bool = False,
                 bias: np.ndarray | None = None) -> np.ndarray | None:
        """Aᵀ·X for dense X (rows,) or (rows, F) by scipy's CSC kernel on this view's own
        arrays (a CSR read as CSC is its transpose), or None where that does not apply.

        Why: the transpose's CSR view holds the values in its own order, so values that
        change every step (dropped-out sparse features) were permuted into it on every
        backward, a gather of nnz floats that cost more than the product (Cora's 1,664 ×
        1,433 input rows: ~160 µs against ~70 µs here). Read as CSC, A's CSR needs no copy.

        Only where the result is bitwise the one of `Structure.t_matmul`'s transposed view:
        the values are already in CSR order (`perm is None`). Then output row j receives the
        entries of A's column j in row order (entries of one row in stored order), which is
        exactly how the transpose's view lists them (a stable sort by column), and both
        kernels add them one `y += a·x` at a time in that order.
        """
        if self.perm is not None:
            return None
        return self.scatter(values, X, constant, bias)

    def scatter(self, data: np.ndarray, X: np.ndarray, constant: bool = False,
                bias: np.ndarray | None = None) -> np.ndarray | None:
        """Aᵀ·X (+ bias (F,) on every row) from `data`, the values in this view's CSR order,
        by the CSC kernel: one call, or A's column slices (`sparse.slices`: the same additions
        in the same order per output row, each slice zeroing and biasing its own rows) where
        the pool cuts the work or the output outgrows the cache; None where slices would be
        needed but X is too narrow for them to pay (`slices.count`). `constant` keeps a fixed
        A's values sliced. Mixed dtypes and empty or >2-d operands: None."""
        rows, cols = self.template.shape
        X = np.ascontiguousarray(X)
        if data.dtype != X.dtype or X.ndim not in (1, 2) or cols == 0 or X.size == 0:
            return None
        count = slices.count(cols, X)
        if count == 0:
            return None
        if count > 1:
            out = np.empty((cols, *X.shape[1:]), dtype=X.dtype)
            return self.column_slices(count).scatter(data, X, out, constant, bias)
        if modes.COUNTS is not None:
            modes.count("CSC read")
        out = np.zeros((cols, *X.shape[1:]), dtype=X.dtype)
        ptr, idx = self.indptr, self.indices
        if X.ndim == 1:
            _sparsetools.csc_matvec(cols, rows, ptr, idx, data, X, out)
        else:
            _sparsetools.csc_matvecs(cols, rows, X.shape[1], ptr, idx, data, X.reshape(-1),
                                     out.reshape(-1))
        return out if bias is None else add_rows(out, bias, out)

    def column_slices(self, count: int) -> ColumnSlices:
        """`count` column slices of this pattern, built once per count (products of two
        widths on one pattern take two counts: neither rebuilds the other's)."""
        cut = self._slices.get(count)
        if cut is None:
            cut = self._slices[count] = ColumnSlices(self.indptr, self.indices,
                                                     self.template.shape, count)
        return cut


def index_dtype(nnz: int, shape: tuple[int, int]) -> type:
    return np.int32 if max(nnz, *shape) < _INT32_MAX else np.int64


def build_csr(major: np.ndarray, minor: np.ndarray, shape: tuple[int, int]) -> CSRView:
    """Sort entries by `major` (stable) and count them per major index."""
    nnz = len(major)
    is_sorted = nnz < 2 or bool(np.all(major[1:] >= major[:-1]))
    perm = None if is_sorted else np.argsort(major, kind="stable")
    idx = index_dtype(nnz, shape)
    indptr = np.zeros(shape[0] + 1, dtype=idx)
    np.cumsum(np.bincount(major, minlength=shape[0]), out=indptr[1:])
    indices = minor.astype(idx) if perm is None else minor.astype(idx)[perm]
    return CSRView(indptr, indices, perm, shape)


# ---------------------------------------------------------------- the products' paths


def matmul(view: CSRView, values: np.ndarray, dense: np.ndarray, constant: bool,
           bias: np.ndarray | None, canonical: bool,
           transposed: Callable[[], CSRView]) -> np.ndarray:
    """A·dense (+ bias), the forward of every sparse × dense product; `transposed()` gives
    the transpose's view (built on first use).

    A fixed A (`constant` values) of a canonical pattern that equals its transpose entry for
    entry (a GCN's Â of an undirected graph: `CSRView.symmetric`) is multiplied as Aᵀ·dense by
    its own CSR read as CSC (`CSRView.scatter`: one call, or its column slices): output row i
    then receives A[i,j]·x[j] in increasing j, one `y += a·x` at a time, exactly as the CSR
    kernel adds a canonical row — bitwise the same, and faster, since consecutive entries
    write different output rows (`python benchmarks/ab_speed.py scatter`). A fixed canonical
    A that is not symmetric (GraphSAGE's D⁻¹A, a receptive field's blocks) scatters the same
    way through its transpose's CSR where the output is wide enough for the slices to pay
    (`slices.scatter_pays`). An array's first product takes the CSR kernel: only a fixed A
    is multiplied again.
    """
    if constant and canonical and not _plain():
        symmetric = view.symmetric(values)  # None (first seen): the CSR kernel
        out = None
        if symmetric:
            out = view.t_matmul(values, dense, constant=True, bias=bias)
        elif symmetric is False and slices.scatter_pays(view.template.shape[0], dense):
            T = transposed()
            out = T.scatter(T.data(values, constant=True), dense, constant=True, bias=bias)
        if out is not None:
            if modes.COUNTS is not None:
                modes.count("symmetric scatter" if symmetric else "transpose scatter")
            return out
    return view.matmul(values, dense, constant, bias)


def t_matmul(view: CSRView, values: np.ndarray, dense: np.ndarray, constant: bool,
             transposed: Callable[[], CSRView]) -> np.ndarray:
    """Aᵀ·dense, the backward of every sparse × dense product.

    A gradient zero outside a few rows (a loss on the training nodes only, and one hop back
    from it) takes only those rows of A: Aᵀ·G = Σ_{i: G[i] ≠ 0} A[i,:]ᵀ G[i]. Otherwise, where
    A's values are in CSR order, A's own CSR read as CSC (`CSRView.t_matmul`: no values
    permuted, bitwise the same); else the transpose's CSR view in parallel row blocks, its
    permuted values cached for a `constant` A.
    """
    if not _plain():
        rows = rowrecords.sparse_rows(dense)
        if rows is not None:
            if modes.COUNTS is not None:
                modes.count("Aᵀ·G rows")
            return _t_matmul_rows(view, values, dense, rows, constant)
        out = view.t_matmul(values, dense, constant)
        if out is not None:
            return out
    return transposed().matmul(values, dense, constant)


def _t_matmul_rows(view: CSRView, values: np.ndarray, dense: np.ndarray, rows: np.ndarray,
                   constant: bool) -> np.ndarray:
    """Aᵀ·dense where dense is zero outside `rows`: A's CSR restricted to those rows; the
    output is zero outside the columns met, and says so (`rows.mark_rows`)."""
    start, stop = view.indptr[rows], view.indptr[rows + 1]
    counts = (stop - start).astype(np.int64)  # len(rows) entries: int32 → int64, tiny
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    pos = np.repeat(start.astype(np.int64) - indptr[:-1], counts) + np.arange(indptr[-1])
    columns = view.indices[pos]
    cols = view.template.shape[1]
    sub = sp.csr_matrix((view.data(values, constant)[pos], columns, indptr),
                        shape=(len(rows), cols))
    out = np.asarray(sub.T @ dense[rows])
    touched = np.zeros(cols, dtype=bool)  # output rows: the columns met
    touched[columns] = True
    return rowrecords.mark_rows(out, np.flatnonzero(touched))


def _plain() -> bool:
    """Whether `kernels.reference()` is on: every product on the one-call path."""
    return modes.State.reference
