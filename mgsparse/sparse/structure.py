"""The sparsity pattern of a SparseTensor, with its CSR views built once and shared.

A `Structure` holds the COO indices (2, nnz) int64 and the shape — never values. Every
`SparseTensor` made from another by `with_values` (dropout, value-wise nonlinearities,
normalisation) shares its structure, so the row-sorted CSR view, the transpose and the
coalescing plan are each computed once per pattern, not once per call. That matters on
the hot path of GCN training, where the same adjacency is multiplied twice per epoch.
The transpose's CSR view is the CSR view of the transposed structure: a transpose swaps the
two index rows and keeps the value order, so `A.T` costs nothing and reuses both views.
How a product runs on a view is the kernels' (`kernels.csr_matmul`, `kernels.csr_t_matmul`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mgsparse import kernels
from mgsparse.kernels import CSRView


class Structure:
    """An immutable COO pattern: `indices` (2, nnz) int64 and `shape` (rows, cols)."""

    __slots__ = ("_T", "__weakref__", "_csr", "_keys", "_plan", "canonical", "indices", "shape")

    def __init__(self, indices: np.ndarray, shape: tuple[int, int], canonical: bool = False,
                 csr: CSRView | None = None):
        self.indices = indices
        self.shape = shape
        self.canonical = canonical  # known sorted row-major without duplicates
        self._csr = csr
        self._T: Structure | None = None
        self._plan: tuple[np.ndarray, Structure] | None = None
        self._keys: np.ndarray | None = None

    row = property(lambda self: self.indices[0])
    col = property(lambda self: self.indices[1])
    nnz = property(lambda self: self.indices.shape[1])

    def __repr__(self) -> str:
        return f"Structure(shape={self.shape}, nnz={self.nnz}, canonical={self.canonical})"

    # --- cached views
    def csr(self) -> CSRView:
        if self._csr is None:
            self._csr = kernels.build_csr(self.row, self.col, self.shape)
        return self._csr

    def csr_matrix(self, values: np.ndarray) -> sp.csr_matrix:
        return self.csr().matrix(values)

    def transposed(self) -> Structure:
        """The transpose's pattern: index rows swapped, same value order, views shared."""
        if self._T is None:
            self._T = Structure(self.indices[::-1], (self.shape[1], self.shape[0]))
            self._T._T = self
        return self._T

    def csr_t_matrix(self, values: np.ndarray) -> sp.csr_matrix:
        """Aᵀ as CSR for values in this structure's COO order."""
        return self.transposed().csr_matrix(values)

    def matmul(self, values: np.ndarray, dense: np.ndarray, constant: bool = False,
               bias: np.ndarray | None = None) -> np.ndarray:
        """A·dense (+ bias), the forward of every sparse × dense product."""
        return kernels.csr_matmul(self.csr(), values, dense, constant, bias, self.canonical,
                                  lambda: self.transposed().csr())

    def t_matmul(self, values: np.ndarray, dense: np.ndarray, constant: bool = False
                 ) -> np.ndarray:
        """Aᵀ·dense, the backward of every sparse × dense product."""
        return kernels.csr_t_matmul(self.csr(), values, dense, constant,
                                    lambda: self.transposed().csr())

    def keys(self) -> np.ndarray:
        """Row-major linear index row·cols + col of every entry (int64)."""
        if self._keys is None:
            self._keys = self.row * np.int64(self.shape[1]) + self.col
        return self._keys

    def coalesce_plan(self) -> tuple[np.ndarray, Structure]:
        """(inverse, canonical): entry k of this pattern lands in slot inverse[k] of `canonical`."""
        if self._plan is None:
            if self.canonical:
                self._plan = (np.arange(self.nnz), self)
            else:
                uniq, inverse = np.unique(self.keys(), return_inverse=True)
                self._plan = (inverse.reshape(-1), from_keys(uniq, self.shape))
        return self._plan


def from_keys(keys: np.ndarray, shape: tuple[int, int]) -> Structure:
    """The canonical structure of sorted unique row-major keys."""
    cols = np.int64(max(shape[1], 1))
    indices = np.stack([keys // cols, keys % cols]).astype(np.int64, copy=False)
    out = Structure(indices, shape, canonical=True)
    out._keys = keys
    return out


def from_csr(m: sp.csr_matrix) -> Structure:
    """The structure of a CSR matrix (row-sorted already: its CSR view is its own arrays)."""
    shape = (int(m.shape[0]), int(m.shape[1]))
    row = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(m.indptr))
    indices = np.stack([row, m.indices.astype(np.int64)])
    idx = kernels.index_dtype(m.nnz, shape)
    csr = CSRView(m.indptr.astype(idx), m.indices.astype(idx), None, shape)
    canonical = bool(m.has_canonical_format)
    return Structure(indices, shape, canonical=canonical, csr=csr)
