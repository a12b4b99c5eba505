"""The caller's arrays stay the caller's: a fixed matrix's caches freeze only copies mgsparse
owns, never the values array a caller built a SparseTensor from."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import kernels
from mgsparse.engine import Tensor
from mgsparse.sparse import SparseTensor, spmm

N = 40


def _unsorted(rng) -> tuple[np.ndarray, np.ndarray]:
    """Indices whose rows are not sorted (the CSR view permutes them) and their values."""
    idx = np.stack([rng.integers(0, N, 300), rng.integers(0, N, 300)])
    assert np.any(np.diff(idx[0]) < 0)
    return idx, rng.standard_normal(300).astype(np.float32)


@pytest.mark.parametrize("build", ["constructor", "from_edge_index", "with_values"])
def test_the_callers_values_stay_writable_after_products_that_hit_the_cache(build, rng):
    """Before: the first spmm froze the caller's array for good."""
    idx, values = _unsorted(rng)
    A = {"constructor": lambda: SparseTensor(idx, values, (N, N)),
         "from_edge_index": lambda: SparseTensor.from_edge_index(idx, N, values=values),
         "with_values": lambda: SparseTensor(idx, np.zeros(300, np.float32), (N, N)).with_values(values),
         }[build]()
    X = Tensor(rng.standard_normal((N, 5)).astype(np.float32))
    first, second = spmm(A, X).data, spmm(A, X).data  # the second reads the kept CSR copy
    view = A._structure.csr()
    assert view._permuted is not None and view._permuted[0]() is A.values.data  # cached
    assert values.flags.writeable and not np.shares_memory(values, A.values.data)
    np.testing.assert_array_equal(first, second)
    values *= 3.0  # the caller's write: A holds its own copy, so A (and its cache) is unchanged
    third = spmm(A, X).data
    np.testing.assert_array_equal(third, first)
    np.testing.assert_allclose(third, A.to_dense() @ X.data, rtol=1e-5, atol=1e-5)
    assert kernels.is_frozen(A.values.data)  # mgsparse's copy, frozen for its cache


def test_a_callers_tensor_of_values_is_never_frozen_and_its_writes_are_seen(rng):
    """A Tensor is taken as it is: mgsparse keeps no copy of its array, so nothing goes stale."""
    idx, values = _unsorted(rng)
    A = SparseTensor(idx, Tensor(values), (N, N))
    assert A.values.data is values
    X = Tensor(rng.standard_normal((N, 5)).astype(np.float32))
    first = spmm(A, X).data
    spmm(A, X)
    assert values.flags.writeable and not kernels.is_frozen(values)
    values *= 3.0
    np.testing.assert_allclose(spmm(A, X).data, 3.0 * first, rtol=1e-5, atol=1e-5)


def test_a_fixed_symmetric_matrix_from_the_callers_scipy_matrix_leaves_it_writable(rng):
    import scipy.sparse as sp
    a = sp.random(N, N, density=0.2, format="csr", random_state=3, dtype=np.float32)
    m = sp.csr_matrix(a + a.T)
    m.sort_indices()
    A = SparseTensor.from_scipy(m)
    X = Tensor(rng.standard_normal((N, 5)).astype(np.float32))
    results = [spmm(A, X).data for _ in range(3)]  # the third takes the symmetric path
    assert A._structure.csr()._symmetric[1] is True
    assert m.data.flags.writeable
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
