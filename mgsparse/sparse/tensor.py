"""SparseTensor: a COO matrix whose stored values are an engine `Tensor`.

Storage: ``indices`` (2, nnz) int64 — row 0 the row index, row 1 the column index — and
``values``, a Tensor (nnz,) that may require grad; the pattern lives in a shared
`Structure` (see structure.py) with cached CSR views. Indices are never differentiable.

Canonical form: entries sorted row-major with no duplicates. It is not required — every
op accepts duplicates (they add, as in scipy) and any order — and `coalesce()` produces it
differentiably. `A.T` swaps the index rows without reordering the values (so it is free and
shares the CSR views); call `.T.coalesce()` for the transpose in canonical order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse import kernels
from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse.structure import Structure, from_csr

_FLOATS = (np.float32, np.float64)


def _check_shape(shape: Any) -> tuple[int, int]:
    try:
        rows, cols = (int(n) for n in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"SparseTensor shape must be (rows, cols), got {shape!r}") from None
    if rows < 0 or cols < 0:
        raise ShapeError(f"SparseTensor shape must be non-negative, got {(rows, cols)}")
    return rows, cols


def _check_indices(indices: Any, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(indices)
    if arr.size == 0:
        arr = arr.reshape(2, 0)
    if arr.ndim != 2 or arr.shape[0] != 2:
        raise ShapeError(f"SparseTensor indices must have shape (2, nnz), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer) and arr.size:
        raise ShapeError(f"SparseTensor indices must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        for axis, name in ((0, "row"), (1, "column")):
            lo, hi = int(arr[axis].min()), int(arr[axis].max())
            if lo < 0 or hi >= shape[axis]:
                bad = lo if lo < 0 else hi
                raise ShapeError(f"SparseTensor {name} index {bad} is out of range for shape {shape}")
    return arr


def _check_values(values: Any, nnz: int, dtype: Any = None, made_here: bool = False) -> Tensor:
    """The values as a Tensor, checked. An array (not a Tensor) becomes mgsparse's own: copied
    unless `made_here` (a constructor's fresh array), and recorded (`kernels.own`), so that a
    fixed matrix's caches may freeze it while the caller's array stays writable and theirs;
    a Tensor is taken as it is, and never frozen by a cache unless its owner froze it."""
    if not isinstance(values, Tensor):
        kind = np.asarray(values).dtype.kind
        if kind not in "fiub":
            raise ShapeError(f"SparseTensor values must be numeric, got dtype kind {kind!r}")
        given = values
        values = Tensor(values, dtype=dtype)  # the Tensor rule: float32 unless numpy float64
        if not made_here and isinstance(given, np.ndarray) and \
                np.may_share_memory(values.data, given):
            values = Tensor(values.data.copy())
        kernels.own(values.data)
    elif dtype is not None and values.dtype != np.dtype(dtype):
        values = values.astype(dtype)
    if values.dtype.type not in _FLOATS:
        raise ShapeError(f"SparseTensor values must be float32 or float64, got {values.dtype}")
    if values.shape != (nnz,):
        raise ShapeError(f"SparseTensor values must have shape ({nnz},) to match indices, "
                         f"got {values.shape}")
    if np.isnan(values.data).any():
        raise ShapeError("SparseTensor values contain NaN")
    return values


class SparseTensor:
    """A (rows, cols) sparse matrix: COO indices plus a differentiable values Tensor."""

    __array_ufunc__ = None  # numpy arrays and Tensors hand `@`/`*` with us to our __r*__
    # True on an operand that turned sparse mid-training (the memory budget's fallback): its
    # dropout draws the dense-shaped mask the dense operand drew (`sparse_dropout`)
    dense_stream = False

    def __init__(self, indices: Any, values: Any, shape: Any):
        shape = _check_shape(shape)
        idx = _check_indices(indices, shape)
        self._structure = Structure(idx, shape)
        self.values = _check_values(values, idx.shape[1])

    @classmethod
    def _make(cls, structure: Structure, values: Tensor) -> SparseTensor:
        """Internal constructor: no checks (ops build outputs they know to be valid)."""
        out = object.__new__(cls)
        out._structure, out.values = structure, values
        return out

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_edge_index(cls, edge_index: Any, num_nodes: int | None = None, values: Any = None,
                        dtype: Any = np.float32) -> SparseTensor:
        """The (num_nodes, num_nodes) adjacency A[source, target], an entry per edge (weight 1 by
        default), as PyG's; A.T @ X sums each node's incoming messages (see `gcn_norm`)."""
        edge_index = np.asarray(edge_index)
        if num_nodes is None:
            num_nodes = int(edge_index.max()) + 1 if edge_index.size else 0
        if values is None:
            values = np.ones(edge_index.shape[-1] if edge_index.ndim == 2 else 0, dtype=dtype)
        values = _check_values(values, edge_index.shape[-1] if edge_index.ndim == 2 else -1, dtype)
        return cls(edge_index, values, (num_nodes, num_nodes))

    @classmethod
    def from_scipy(cls, m: Any, dtype: Any = None) -> SparseTensor:
        """Any scipy sparse matrix/array; float32 unless it is float64 or `dtype` says otherwise."""
        if not sp.issparse(m):
            raise ShapeError(f"from_scipy needs a scipy sparse matrix, got {type(m).__name__}")
        if m.ndim != 2:
            raise ShapeError(f"from_scipy needs a 2-d matrix, got shape {m.shape}")
        if dtype is None:
            dtype = m.dtype if m.dtype.type in _FLOATS else np.float32
        csr = sp.csr_matrix(m)  # row-sorted entries; its arrays become the cached CSR view
        structure = from_csr(csr)
        return cls._make(structure, _check_values(csr.data.astype(dtype), csr.nnz, made_here=True))

    @classmethod
    def from_dense(cls, array: Any, dtype: Any = None) -> SparseTensor:
        """The nonzero entries of a 2-d array, in row-major order."""
        arr = np.asarray(array.data if isinstance(array, Tensor) else array)
        if arr.ndim != 2:
            raise ShapeError(f"from_dense needs a 2-d array, got shape {arr.shape}")
        if dtype is None:
            dtype = arr.dtype if arr.dtype.type in _FLOATS else np.float32
        row, col = np.nonzero(arr)
        indices = np.stack([row, col]).astype(np.int64)
        structure = Structure(indices, (int(arr.shape[0]), int(arr.shape[1])), canonical=True)
        return cls._make(structure, _check_values(arr[row, col].astype(dtype), len(row),
                                                  made_here=True))

    def with_values(self, values: Any) -> SparseTensor:
        """Same pattern (and cached CSR views), new values — the cheap way to change values. An
        array is copied, as the constructor copies it (`_check_values`); a Tensor is shared."""
        shape = values.shape if isinstance(values, Tensor) else np.shape(values)
        if shape != (self.nnz,):
            raise ShapeError(f"with_values: values must have shape ({self.nnz},), got {shape}")
        if not isinstance(values, Tensor):
            values = _check_values(values, self.nnz, self.dtype)
        return SparseTensor._make(self._structure, values)

    # ------------------------------------------------------------ properties
    indices = property(lambda self: self._structure.indices)
    row = property(lambda self: self._structure.row)
    col = property(lambda self: self._structure.col)
    shape = property(lambda self: self._structure.shape)
    nnz = property(lambda self: self._structure.nnz)
    dtype = property(lambda self: self.values.dtype)
    requires_grad = property(lambda self: self.values.requires_grad)
    ndim = 2

    @property
    def density(self) -> float:
        """nnz / (rows·cols): stored entries (duplicates counted), 0 for an empty shape."""
        rows, cols = self.shape
        return self.nnz / (rows * cols) if rows * cols else 0.0

    @property
    def T(self) -> SparseTensor:
        """The transpose: swapped index rows, same values Tensor (no copy, gradients flow)."""
        return SparseTensor._make(self._structure.transposed(), self.values)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"SparseTensor(shape={self.shape}, dtype={self.dtype}, nnz={self.nnz}{grad})"

    # ------------------------------------------------------------ conversions
    def to_dense(self) -> np.ndarray:
        """The dense (rows, cols) array, duplicates summed (for small matrices and tests)."""
        return self.to_scipy("coo").toarray()

    def to_scipy(self, format: str = "csr") -> sp.spmatrix:
        """A scipy copy in `format` ('csr', 'csc' or 'coo'), detached from the graph."""
        if format not in ("csr", "csc", "coo"):
            raise ShapeError(f"to_scipy: format must be 'csr', 'csc' or 'coo', got {format!r}")
        values = self.values.data
        if format == "coo":
            return sp.coo_matrix((values.copy(), (self.row.copy(), self.col.copy())), shape=self.shape)
        m = self._structure.csr_matrix(values).copy()  # a copy: callers may mutate it in place
        return m if format == "csr" else m.tocsc()

    def detach(self) -> SparseTensor:
        return SparseTensor._make(self._structure, self.values.detach())

    def astype(self, dtype: Any) -> SparseTensor:
        return self if np.dtype(dtype) == self.dtype else self.with_values(self.values.astype(dtype))

    def is_coalesced(self) -> bool:
        return self._structure.canonical

    # ------------------------------------------------------------ ops (defined in ops.py)
    def coalesce(self) -> SparseTensor: return ops.coalesce(self)
    def sum(self, axis: int | None = None) -> Tensor: return ops.sparse_sum(self, axis)
    def to_tensor(self) -> Tensor: return ops.to_tensor(self)

    def apply(self, fn: Callable[[Tensor], Tensor]) -> SparseTensor:
        """fn applied to the stored values only; the pattern (and its caches) is kept."""
        return self.with_values(fn(self.values))

    def relu(self) -> SparseTensor: return self.apply(Tensor.relu)
    def exp(self) -> SparseTensor: return self.apply(Tensor.exp)
    def leaky_relu(self, slope: float = 0.01) -> SparseTensor:
        return self.apply(lambda v: v.leaky_relu(slope))

    def __matmul__(self, other): return ops.matmul(self, other)
    def __rmatmul__(self, other): return ops.dense_matmul(other, self)
    def __add__(self, other): return ops.add(self, other)
    def __radd__(self, other): return ops.add(self, other)
    def __sub__(self, other): return ops.sub(self, other)
    def __rsub__(self, other): return ops.sub(self, other)
    def __mul__(self, other): return ops.mul(self, other)
    def __rmul__(self, other): return ops.mul(self, other)
    def __neg__(self): return self.with_values(-self.values)
    def __truediv__(self, scalar):
        if isinstance(scalar, SparseTensor) or (isinstance(scalar, Tensor) and scalar.ndim):
            raise ShapeError(f"div: a SparseTensor divides only by a scalar, got a "
                             f"{type(scalar).__name__} of shape {scalar.shape}")
        return ops.mul(self, 1.0 / float(scalar.item() if isinstance(scalar, Tensor) else scalar))

    def __rtruediv__(self, other):
        raise ShapeError(f"div: cannot divide a {type(other).__name__} by a SparseTensor "
                         "(its zeros); divide the stored values with A.apply(...)")


from mgsparse.sparse import ops  # last: ops needs SparseTensor defined above
