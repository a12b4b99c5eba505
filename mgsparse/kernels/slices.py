"""Aᵀ·X by A's CSR read as CSC, cut by output rows for the pool: A's column slices.

Read as CSC, A's CSR computes Aᵀ·X by scattering: for each row j of A in turn and each of
its stored entries (j, i), out[i] += A[j,i]·X[j]. Consecutive entries write different output
rows, so no add waits on the one before (the CSR kernel adds every entry of a row into the
same output row, each add waiting on the last): on the arxiv-shaped graph at 16 columns,
10.5 against 15.2 ms a product. But the scatter writes every output row from every row of A,
so it cannot be cut into row blocks of A the way the CSR kernel is. It can be cut by its
output rows: slice s holds, row by row of A, the entries whose column lies in its range
[lo_s, hi_s) — the CSR of A[:, lo_s:hi_s] over all of A's rows. A slice's call writes its
own output rows only, and each output row still receives its entries in the order the one
call adds them (A's rows increasing, a row's entries in stored order): bitwise the one call's
result for any number of slices. So there are as many slices as the pool has threads, cut
to equal entry counts (at 2 threads on that graph: 5.7 ms, where the CSR kernel's row blocks
took 8.4).

Slices pay on one thread too, once the output outgrows the cache: the scatter's writes land
anywhere in it, and each slice keeps them within its own range of output rows while X is read
in order. How large a slice's output may grow is the machine's (`benchmarks/slice_size.py`).
On an AVX-512 Intel host with a fast 32 MB L3 it was 8 MB (100,000 × 64 columns: 45.7 ms in
one call, 16.5 in three slices; at 16 columns one call stayed the fastest). On the AMD EPYC
host these machines are now (512 KB of L2 a core, an L3 whose speed moves with the host's
load) it is about 4 MB: the fastest slice held 1.7–6.9 MB of output over runs minutes apart,
and one call was always the slowest (the arxiv-shaped Âᵀ·X at 16 columns: 21–80 ms in one
call, 11–18 in three to six slices; at 64 columns 171–224 against 38–61). Its whole-graph
GCN epoch at one thread took 0.59–0.85 of its time with 8 MB slices (one call).

The price: every slice walks all of A's row pointers and reads each row of X with an entry
in it, work that the columns of X do not pay back when X is narrow (`MIN_WIDTH`). Memory:
each slice's row pointers (4 bytes a row of A), the index copy (4 bytes an entry) and either
the entries' positions in A (4 or 8, to gather changing values) or, for a fixed A, its values
sliced (4 at float32; the positions are then dropped). A pattern propagating two widths keeps
one set per slice count (`Structure.column_slices`).
"""

from __future__ import annotations

import weakref

import numpy as np
from scipy.sparse import _sparsetools

from mgsparse.kernels import modes, pool, tuning
from mgsparse.kernels.dense import add_rows
from mgsparse.kernels.inplace import keep


def count(out_rows: int, X: np.ndarray) -> int:
    """How many slices Aᵀ·X takes (1: one call): about one per tuning.SLICE_BYTES of output, and
    where the pool cuts the work a multiple of its threads (three slices on two threads
    would leave one thread a third of the work idle). 0 where slices cannot run: more than
    one thread and an X narrower than tuning.MIN_WIDTH, a vector (the CSR kernel's row blocks).
    tuning.MIN_WIDTH was 8 on the Intel host; on this one, at two threads, two slices beat the row
    blocks at every width from 2 columns (100,000-node Â: 2.33 against 2.64 ms at 2 columns,
    3.10 against 3.65 at 5; the arxiv-shaped Â at 7: 10.2 against 12.2)."""
    width = X.shape[1] if X.ndim == 2 else 1
    by_size = max(1, round(out_rows * width * X.itemsize / tuning.SLICE_BYTES))
    if pool.runs_as_one_call(out_rows):
        return by_size
    if width < tuning.MIN_WIDTH:
        return 0
    threads = pool.get_num_threads()
    return threads * -(-by_size // threads)  # a multiple of the threads: each gets as many


def scatter_pays(out_rows: int, X: np.ndarray) -> bool:
    """Whether A·X of a fixed A that is not its own transpose should scatter through Aᵀ's
    CSR (`Structure.matmul`): an output of at least tuning.SLICE_BYTES, where the CSR kernel's
    gathers and its writes to one row at a time cost about three times the sliced scatter."""
    return X.ndim == 2 and out_rows * X.shape[1] * X.itemsize >= tuning.SLICE_BYTES


class ColumnSlices:
    """About `count` column slices of one CSR pattern, equal in entries (see the module);
    fewer when columns are too few or too full to cut that finely."""

    __slots__ = ("_a_indices", "_kept", "_positions", "_rebuilt", "bounds", "count", "indices",
                 "pointers", "shape")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int],
                 count: int):
        rows, cols = shape
        per_column = np.cumsum(np.bincount(indices, minlength=cols))
        targets = np.linspace(0, len(indices), count + 1)[1:-1]
        cuts = np.minimum(np.searchsorted(per_column, targets) + 1, cols).tolist()
        bounds = sorted({0, *cuts, cols})
        self.shape, self.bounds, self.count = shape, bounds, len(bounds) - 1
        self._a_indices, self._rebuilt = indices, False
        self._positions = self._cut_positions()
        row_of = np.repeat(np.arange(rows, dtype=indices.dtype), np.diff(indptr))
        self.pointers, self.indices = [], []
        for positions in self._positions:
            pointers = np.zeros(rows + 1, dtype=indptr.dtype)
            np.cumsum(np.bincount(row_of[positions], minlength=rows), out=pointers[1:])
            self.pointers.append(pointers)
            self.indices.append(indices[positions])
        self._kept: tuple[weakref.ref, list[np.ndarray]] | None = None

    def _cut_positions(self) -> list[np.ndarray]:
        """Each slice's entries as positions in A's CSR, in stored order."""
        indices = self._a_indices
        slice_of = np.searchsorted(np.asarray(self.bounds[1:-1], dtype=indices.dtype), indices,
                                   side="right")
        position_dtype = np.int32 if len(indices) <= np.iinfo(np.int32).max else np.int64
        return [np.flatnonzero(slice_of == s).astype(position_dtype) for s in range(self.count)]

    @property
    def positions(self) -> list[np.ndarray]:
        """Where each slice's entries sit in A's CSR (gathers a slice's values). A fixed A's
        slices drop them once its values are kept (`values`): 4 bytes an entry that a
        constant operator never reads again. Cut anew if asked for later, then kept for good
        (a pattern that takes changing values as well gathers with them every call)."""
        if self._positions is None:
            self._positions, self._rebuilt = self._cut_positions(), True
        return self._positions

    def values(self, values: np.ndarray, constant: bool) -> list[np.ndarray] | None:
        """Each slice's values for a fixed `values` array (kept while it lives, the array
        frozen as `CSRView.data` freezes it: one mgsparse owns or one frozen already), or
        None: each slice gathers its own."""
        if not constant:
            return None
        kept = self._kept
        if kept is None or kept[0]() is not values:
            if not keep(values):  # a caller's own array: never frozen, never kept
                return None
            kept = self._kept = (weakref.ref(values), [values[p] for p in self.positions])
            if not self._rebuilt:
                self._positions = None
        return kept[1]

    def scatter(self, values: np.ndarray, X: np.ndarray, out: np.ndarray,
                constant: bool = False, bias: np.ndarray | None = None) -> np.ndarray:
        """out = Aᵀ·X (+ bias on every row) for a contiguous X and out, 2-d or vectors (a
        vector is one column: the kernel adds the same products in the same order), one slice
        per block on the pool. A slice writes only its own output rows [lo, hi), so it zeroes them
        first and adds the bias after, each on its own thread while the rows are in cache:
        no serial pass over the whole output (`np.zeros`' memset, a bias pass), and the same
        bits as zeros, the product, then the bias."""
        if modes.COUNTS is not None:
            modes.count("column slices")
        rows, cols = self.shape
        kept = self.values(values, constant)
        positions = self.positions if kept is None else None
        x_flat, out_flat = X.reshape(-1), out.reshape(-1)
        width = X.shape[1] if X.ndim == 2 else 1

        def block(s: int, _: int) -> None:
            lo, hi = self.bounds[s], self.bounds[s + 1]
            out[lo:hi] = 0
            data = kept[s] if kept is not None else values[positions[s]]
            _sparsetools.csc_matvecs(cols, rows, width, self.pointers[s], self.indices[s], data,
                                     x_flat, out_flat)
            if bias is not None:
                add_rows(out[lo:hi], bias, out[lo:hi])
        pool.run_blocks(block, [(s, s + 1) for s in range(self.count)])
        return out
