"""Structure: cached CSR views and the two ways of computing Aᵀ·X."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.sparse import structure


@pytest.mark.parametrize("threshold", [0, 10**12])  # CSC view always / never
def test_t_matmul_is_the_transpose_product_on_both_paths(rng, monkeypatch, threshold):
    monkeypatch.setattr(structure, "CSC_TRANSPOSE_MIN_NNZ", threshold)
    rows, cols, nnz = 7, 5, 20
    indices = np.stack([rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)])  # duplicates too
    A = SparseTensor(indices, rng.standard_normal(nnz), (rows, cols))
    dense = rng.standard_normal((rows, 3))
    got = A._structure.t_matmul(A.values.data, dense)
    np.testing.assert_allclose(got, A.to_dense().T @ dense, atol=1e-12)

    X = Tensor(rng.standard_normal((cols, 3)), requires_grad=True)
    v = Tensor(A.values.data, requires_grad=True)
    assert gradcheck(lambda v, X: SparseTensor(indices, v, (rows, cols)) @ X, [v, X]).passed


def test_csr_view_is_built_once_per_pattern(rng):
    A = SparseTensor.from_dense((rng.random((6, 6)) < 0.4) * 1.0)
    B = A.with_values(A.values * 2.0)
    assert A._structure.csr() is B._structure.csr()
