"""Sparse structures read from files, validated before scipy or a kernel indexes with them.

scipy's constructors check lengths only: a CSR whose column index exceeds its shape, or
whose ``indptr`` decreases, is built without complaint, and the first product or conversion
then reads or writes outside its arrays (a segmentation fault, not an exception). Everything
a file says is therefore checked here first, in O(nnz) vectorised passes:

- ``shape`` two non-negative integers; ``indptr``, ``indices`` 1-D integer arrays;
- ``indptr`` of length rows + 1, starting at 0, non-decreasing, ending at nnz;
- every index in [0, bound) (columns for CSR, rows for CSC, both for COO);
- ``data`` 1-D numbers, one per index, finite.

Errors are one line naming the file. The caller picks their type: `DataError` (exit 1) for a
cache or partition part mgsparse wrote and something damaged, `InputFileError` (exit 2) for a
file the user named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.errors import DataError


def _shape(shape: Any, where: Any, error: type[DataError]) -> tuple[int, int]:
    s = np.asarray(shape)
    if s.shape != (2,) or s.dtype.kind not in "iu" or (s < 0).any():
        raise error(f"{where}: sparse shape must be two non-negative integers, got {s.tolist()}")
    return int(s[0]), int(s[1])


def _indices(a: Any, bound: int, name: str, where: Any, error: type[DataError]) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise error(f"{where}: {name} must be a 1-D integer array, got {a.dtype} {a.shape}")
    low, high = (int(a.min()), int(a.max())) if a.size else (0, -1)
    if low < 0 or high >= bound:
        raise error(f"{where}: {name} holds {low if low < 0 else high}, outside [0, {bound})")
    return a


def _values(data: Any, nnz: int, where: Any, error: type[DataError],
            finite: bool) -> np.ndarray:
    data = np.asarray(data)
    if data.ndim != 1 or data.dtype.kind not in "biuf":
        raise error(f"{where}: sparse data must be a 1-D numeric array, got {data.dtype} "
                    f"{data.shape}")
    if data.size != nnz:
        raise error(f"{where}: sparse data has {data.size} values for {nnz} indices")
    if finite and data.dtype.kind == "f" and not np.isfinite(data).all():
        raise error(f"{where}: sparse data holds a non-finite value at entry "
                    f"{int(np.flatnonzero(~np.isfinite(data))[0])}")
    return data


def check_csr(indptr: Any, indices: Any, data: Any, shape: Any, where: Any,
              error: type[DataError] = DataError, *, minor: str = "column",
              finite: bool = True) -> sp.csr_matrix:
    """The CSR matrix of these arrays once they are safe to index with (module docstring);
    else `error` naming `where`. For CSC, pass the transposed shape and ``minor="row"``;
    ``finite=False`` leaves non-finite values (harmless to indexing) to the caller."""
    rows, cols = _shape(shape, where, error)
    indices = _indices(indices, cols, f"{minor} index", where, error)
    indptr = np.asarray(indptr)
    if indptr.ndim != 1 or indptr.dtype.kind not in "iu" or indptr.size != rows + 1:
        raise error(f"{where}: indptr must be {rows + 1} integers (rows + 1), got "
                    f"{indptr.dtype} {indptr.shape}")
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.size:
        raise error(f"{where}: indptr runs from {int(indptr[0])} to {int(indptr[-1])}, "
                    f"expected 0 to {indices.size} (the number of indices)")
    if rows and (np.diff(indptr) < 0).any():
        raise error(f"{where}: indptr decreases after entry "
                    f"{int(np.flatnonzero(np.diff(indptr) < 0)[0])}")
    data = _values(data, indices.size, where, error, finite)
    return sp.csr_matrix((data, indices, indptr), shape=(rows, cols))


def check_coo(row: Any, col: Any, data: Any, shape: Any, where: Any,
              error: type[DataError] = DataError, *, finite: bool = True) -> sp.csr_matrix:
    """The CSR form of a COO matrix whose indices all lie inside `shape`; else `error`."""
    rows, cols = _shape(shape, where, error)
    row = _indices(row, rows, "row index", where, error)
    col = _indices(col, cols, "column index", where, error)
    if row.size != col.size:
        raise error(f"{where}: {row.size} row indices for {col.size} column indices")
    data = _values(data, row.size, where, error, finite)
    return sp.coo_matrix((data, (row, col)), shape=(rows, cols)).tocsr()


def check_edge_index(edge_index: Any, num_nodes: int, where: Any,
                     error: type[DataError] = DataError) -> np.ndarray:
    """A (2, E) integer edge list whose node ids all lie in [0, num_nodes); else `error`."""
    edge_index = np.asarray(edge_index)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise error(f"{where}: edge_index must be (2, E), got {edge_index.shape}")
    _indices(edge_index.ravel(), int(num_nodes), "edge_index", where, error)
    return edge_index


def load_sparse_npz(archive: Any, where: str | Path, error: type[DataError] = DataError,
                    *, finite: bool = True) -> sp.csr_matrix:
    """A matrix saved by ``scipy.sparse.save_npz`` (CSR, CSC or COO), as CSR, from the
    opened ``np.load`` archive, each array checked before scipy sees it (`sp.load_npz` builds
    the matrix unchecked)."""
    fmt = archive["format"]
    fmt = fmt.item().decode() if fmt.dtype.kind == "S" else str(fmt)
    if fmt == "csr":
        return check_csr(archive["indptr"], archive["indices"], archive["data"],
                         archive["shape"], where, error, finite=finite)
    if fmt == "csc":
        shape = np.asarray(archive["shape"])[::-1]
        return check_csr(archive["indptr"], archive["indices"], archive["data"], shape,
                         where, error, minor="row", finite=finite).T.tocsr()
    if fmt == "coo":
        return check_coo(archive["row"], archive["col"], archive["data"], archive["shape"],
                         where, error, finite=finite)
    raise error(f"{where}: sparse format {fmt!r} is not read; save the matrix as CSR, CSC "
                "or COO")
