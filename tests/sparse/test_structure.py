"""Structure: cached CSR views, Aᵀ·X on the transpose's view, the permuted-values cache."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck


@pytest.mark.parametrize("constant", [False, True])  # permuted values cached or not
def test_t_matmul_is_the_transpose_product(rng, constant):
    rows, cols, nnz = 7, 5, 20
    indices = np.stack([rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)])  # duplicates too
    A = SparseTensor(indices, rng.standard_normal(nnz), (rows, cols))
    dense = rng.standard_normal((rows, 3))
    for _ in range(2):  # the second call reads the cache when constant
        got = A._structure.t_matmul(A.values.data, dense, constant=constant)
        np.testing.assert_allclose(got, A.to_dense().T @ dense, atol=1e-12)
    np.testing.assert_allclose(A._structure.t_matmul(A.values.data, dense[:, 0]),
                               A.to_dense().T @ dense[:, 0], atol=1e-12)

    X = Tensor(rng.standard_normal((cols, 3)), requires_grad=True)
    v = Tensor(A.values.data, requires_grad=True)
    assert gradcheck(lambda v, X: SparseTensor(indices, v, (rows, cols)) @ X, [v, X]).passed


def test_csr_view_is_built_once_per_pattern(rng):
    A = SparseTensor.from_dense((rng.random((6, 6)) < 0.4) * 1.0)
    B = A.with_values(A.values * 2.0)
    assert A._structure.csr() is B._structure.csr()


def test_permuted_values_are_cached_only_for_the_same_live_array(rng):
    indices = np.array([[2, 0, 1, 0], [0, 1, 1, 2]])  # not row-sorted: the view permutes
    A = SparseTensor(indices, rng.standard_normal(4), (3, 3))
    view = A._structure.csr()
    v = A.values.data
    first = view.data(v, constant=True)
    assert view.data(v, constant=True) is first
    other = v * 2  # a new array is never served the old permutation
    np.testing.assert_array_equal(view.data(other, constant=True), other[view.perm])
    assert view.data(v, constant=False) is not first
    with pytest.raises(ValueError, match="read-only"):  # a cached array cannot go stale
        v[0] = 1.0
