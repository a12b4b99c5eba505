"""as_operand: sparse at or below the density threshold, dense above, for every input kind."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.sparse import DEFAULT_SPARSITY_THRESHOLD, SparseTensor, as_operand


def matrix(density: float) -> np.ndarray:
    """A 10 × 10 matrix with exactly density·100 nonzeros."""
    count = round(density * 100)
    out = np.zeros(100, dtype=np.float32)
    out[:count] = np.arange(1, count + 1)
    return out.reshape(10, 10)


@pytest.mark.parametrize("kind", ["numpy", "scipy", "tensor", "sparse"])
@pytest.mark.parametrize("density, sparse", [(0.05, True), (0.10, True), (0.11, False)])
def test_threshold_decides_for_every_input_kind(kind, density, sparse):
    m = matrix(density)
    given = {"numpy": m, "scipy": sp.csr_matrix(m), "tensor": Tensor(m),
             "sparse": SparseTensor.from_dense(m)}[kind]
    out = as_operand(given, sparsity_threshold=0.1)
    assert isinstance(out, SparseTensor if sparse else Tensor)
    dense = out.to_dense() if sparse else out.data
    np.testing.assert_array_equal(dense, m)
    assert out.dtype == np.float32


def test_default_threshold_and_explicit_zeros():
    assert DEFAULT_SPARSITY_THRESHOLD == 0.1
    m = sp.csr_matrix((np.array([1.0, 0.0, 0.0]), np.array([0, 1, 2]), np.array([0, 3, 3, 3, 3, 3])),
                      shape=(5, 5))
    assert m.nnz == 3  # two explicit zeros: density by nonzeros is 1/25
    assert isinstance(as_operand(m, 0.05), SparseTensor)
    assert as_operand(m).dtype == np.float64  # float64 input keeps its precision


def test_a_densified_sparse_tensor_stays_differentiable_in_its_values():
    v = Tensor(np.ones(60, dtype=np.float32), requires_grad=True)
    A = SparseTensor.from_dense(matrix(0.6)).with_values(v)
    D = as_operand(A, 0.1)
    assert isinstance(D, Tensor)
    (D * Tensor(np.arange(100, dtype=np.float32).reshape(10, 10))).sum().backward()
    np.testing.assert_array_equal(v.grad, np.arange(60))


@pytest.mark.parametrize("threshold", [0.0, 0.1, 1.0])
def test_a_dense_tensor_that_requires_grad_has_the_same_gradient_at_any_threshold(threshold):
    """Issue #12, defect 7: sparsified, it got a gradient at its nonzeros only; now it stays
    dense (a gradient at every entry, its zeros included), whatever the threshold."""
    T = Tensor(matrix(0.05), requires_grad=True)
    D = as_operand(T, threshold)
    assert D is T
    (D @ Tensor(np.ones((10, 1), dtype=np.float32))).sum().backward()
    np.testing.assert_array_equal(T.grad, np.ones((10, 10)))
    assert isinstance(as_operand(T.detach(), 0.1), SparseTensor)  # a constant still sparsifies
    assert as_operand(T, 0.1, dtype=np.float64).dtype == np.float64


def test_a_model_code_path_runs_on_either_operand():
    m = matrix(0.3)
    X = Tensor(np.ones((10, 2), dtype=np.float32))
    sparse, dense = as_operand(m, 0.5), as_operand(m, 0.1)
    assert isinstance(sparse, SparseTensor) and isinstance(dense, Tensor)
    np.testing.assert_array_equal((sparse @ X).data, (dense @ X).data)


@pytest.mark.parametrize("args, error, message", [
    ((np.ones((3, 3)), 1.5), HyperparameterError, "sparsity_threshold must be in [0, 1], got 1.5"),
    ((np.ones(3), 0.1), ShapeError, "as_operand needs a 2-d matrix, got shape (3,)"),
])
def test_bad_arguments(args, error, message):
    with pytest.raises(error) as info:
        as_operand(*args)
    assert message in str(info.value)
