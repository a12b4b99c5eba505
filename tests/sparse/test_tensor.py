"""SparseTensor: construction and validation, conversions, coalesce, transpose, cached views."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse import SparseTensor as TopLevelSparseTensor
from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse import SparseTensor

IDX = [[0, 2, 0, 1], [1, 0, 1, 2]]  # (0, 1) stored twice, row 1 and column ... all used


def small() -> SparseTensor:
    return SparseTensor(IDX, [1.0, 2.0, 3.0, 4.0], (3, 4))


# ---------------------------------------------------------------- construction


def test_top_level_reexport_is_the_same_class():
    assert TopLevelSparseTensor is SparseTensor


def test_attributes_and_repr():
    A = small()
    assert A.shape == (3, 4) and A.nnz == 4 and A.dtype == np.float32
    assert A.indices.dtype == np.int64 and A.indices.shape == (2, 4)
    np.testing.assert_array_equal(A.row, [0, 2, 0, 1])
    np.testing.assert_array_equal(A.col, [1, 0, 1, 2])
    assert A.density == pytest.approx(4 / 12)
    assert repr(A) == "SparseTensor(shape=(3, 4), dtype=float32, nnz=4)"
    A.values.requires_grad = True
    assert repr(A).endswith("nnz=4, requires_grad=True)")


def test_to_dense_sums_duplicates():
    np.testing.assert_array_equal(small().to_dense(),
                                  [[0, 4, 0, 0], [0, 0, 4, 0], [2, 0, 0, 0]])


def test_float64_numpy_values_keep_their_precision():
    A = SparseTensor(IDX, np.array([1.0, 2, 3, 4]), (3, 4))
    assert A.dtype == np.float64


@pytest.mark.parametrize("indices, values, shape, message", [
    ([[0, 3], [0, 0]], [1, 1], (3, 3), "row index 3 is out of range for shape (3, 3)"),
    ([[0, 0], [0, -1]], [1, 1], (3, 3), "column index -1 is out of range"),
    ([[0.0, 1.0], [0, 0]], [1, 1], (3, 3), "indices must be integers, got dtype float64"),
    ([0, 1, 2], [1, 1, 1], (3, 3), "indices must have shape (2, nnz), got (3,)"),
    ([[0, 1], [0, 1]], [1, 1, 1], (3, 3), "values must have shape (2,) to match indices, got (3,)"),
    ([[0, 1], [0, 1]], [1, np.nan], (3, 3), "values contain NaN"),
    ([[0, 1], [0, 1]], [1, 1], (3, -3), "shape must be non-negative, got (3, -3)"),
    ([[0, 1], [0, 1]], [1, 1], (3,), "shape must be (rows, cols), got (3,)"),
    ([[0, 1], [0, 1]], ["a", "b"], (3, 3), "values must be numeric"),
])
def test_invalid_input_raises_a_clear_error(indices, values, shape, message):
    with pytest.raises(ShapeError) as info:
        SparseTensor(indices, values, shape)
    assert message in str(info.value)


def test_empty_and_zero_size_matrices():
    A = SparseTensor(np.zeros((2, 0), dtype=np.int64), np.zeros(0), (4, 3))
    assert A.nnz == 0 and A.density == 0.0
    np.testing.assert_array_equal(A.to_dense(), np.zeros((4, 3)))
    B = SparseTensor([], [], (0, 0))
    assert B.nnz == 0 and B.density == 0.0 and B.to_dense().shape == (0, 0)


def test_from_edge_index_defaults_to_unit_weights():
    A = SparseTensor.from_edge_index(np.array([[0, 1, 2], [1, 2, 0]]), num_nodes=4)
    assert A.shape == (4, 4) and A.dtype == np.float32
    np.testing.assert_array_equal(A.values.data, [1, 1, 1])
    assert SparseTensor.from_edge_index(np.array([[0, 5], [1, 2]])).shape == (6, 6)
    with pytest.raises(ShapeError, match="row index 7 is out of range for shape"):
        SparseTensor.from_edge_index(np.array([[7], [1]]), num_nodes=4)


def test_from_scipy_and_from_dense_round_trip(rng):
    dense = rng.standard_normal((5, 6)) * (rng.random((5, 6)) < 0.3)
    for A in (SparseTensor.from_scipy(sp.coo_matrix(dense)), SparseTensor.from_dense(dense)):
        assert A.dtype == np.float64 and A.is_coalesced() and A.nnz == np.count_nonzero(dense)
        np.testing.assert_array_equal(A.to_dense(), dense)
        for fmt in ("csr", "csc", "coo"):
            m = A.to_scipy(fmt)
            assert m.format == fmt
            np.testing.assert_array_equal(m.toarray(), dense)
    assert SparseTensor.from_scipy(sp.csr_matrix(np.eye(3, dtype=np.int64))).dtype == np.float32
    with pytest.raises(ShapeError, match="from_scipy needs a scipy sparse matrix, got ndarray"):
        SparseTensor.from_scipy(dense)
    with pytest.raises(ShapeError, match="format must be 'csr', 'csc' or 'coo', got 'bsr'"):
        SparseTensor.from_dense(dense).to_scipy("bsr")


def test_to_scipy_is_a_copy_that_cannot_corrupt_the_cache():
    A = small()
    m = A.to_scipy()
    m.sum_duplicates()  # rewrites indices/indptr in place
    m.data[:] = 100
    np.testing.assert_array_equal(A.to_dense(), [[0, 4, 0, 0], [0, 0, 4, 0], [2, 0, 0, 0]])


# ---------------------------------------------------------------- coalesce


def test_coalesce_sorts_and_sums_duplicates_and_routes_gradients_back():
    A = SparseTensor(IDX, Tensor([1.0, 2, 3, 4], requires_grad=True), (3, 4))
    C = A.coalesce()
    assert C.is_coalesced() and not A.is_coalesced()
    np.testing.assert_array_equal(C.indices, [[0, 1, 2], [1, 2, 0]])
    np.testing.assert_array_equal(C.values.data, [4, 4, 2])
    C.values.backward(np.array([10.0, 20.0, 30.0], dtype=np.float32))
    # both copies of (0, 1) receive the gradient of their sum
    np.testing.assert_array_equal(A.values.grad, [10, 30, 10, 20])
    assert C.coalesce() is C


def test_coalesce_plan_is_shared_by_with_values_siblings():
    A = small()
    B = A.with_values(np.ones(4, dtype=np.float32))
    A.coalesce()
    plan = A._structure._plan
    assert plan is not None and B.coalesce()._structure is plan[1]
    np.testing.assert_array_equal(B.coalesce().values.data, [2, 1, 1])


# ---------------------------------------------------------------- transpose and cached views


def test_transpose_is_free_and_differentiable():
    A = SparseTensor(IDX, Tensor([1.0, 2, 3, 4], requires_grad=True), (3, 4))
    T = A.T
    assert T.shape == (4, 3) and T.values is A.values and T.T._structure is A._structure
    np.testing.assert_array_equal(T.to_dense(), A.to_dense().T)
    T.coalesce().values.sum().backward()
    np.testing.assert_array_equal(A.values.grad, [1, 1, 1, 1])


def test_csr_views_are_built_once_and_shared():
    A = small()
    B = A.with_values(Tensor(np.arange(4, dtype=np.float32)))
    assert B._structure is A._structure
    view = A._structure.csr()
    assert B._structure.csr() is view and A.T._structure.csr() is A._structure.transposed().csr()
    np.testing.assert_array_equal(view.indptr, [0, 2, 3, 4])
    m = B._structure.csr_matrix(B.values.data)
    np.testing.assert_array_equal(m.toarray(), B.to_dense())
    mt = B._structure.csr_t_matrix(B.values.data)
    np.testing.assert_array_equal(mt.toarray(), B.to_dense().T)


def test_with_values_checks_the_length():
    with pytest.raises(ShapeError, match=r"with_values: values must have shape \(4,\), got \(3,\)"):
        small().with_values(np.ones(3))


def test_sparse_package_imports_no_upper_layer():
    code = ("import sys, mgsparse.sparse; "
            "bad = [m for m in ('typer', 'rich', 'mgsparse.cli', 'mgsparse.nn', 'mgsparse.optim') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
