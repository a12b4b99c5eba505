"""The scalar references and the scalar fallback of failed backward passes (every SparseFunction)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mgsparse import gradcheck
from mgsparse.checks import CASES
from mgsparse.checks.case import analytic_grads, functions_reached, scalar_grads
from mgsparse.engine import Tensor, Value
from mgsparse.errors import GradcheckError, MgsparseError
from mgsparse.sparse import FALLBACK_MAX_NNZ, ScalarFallbackWarning, SparseTensor, ops, spmm
from mgsparse.sparse import reference as ref


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _a_case_through(fn_class) -> str:
    """The first sparse case of the registry whose graph runs through `fn_class`."""
    return next(name for name, case in CASES.items()
                if name.startswith("sparse.") and fn_class in functions_reached(case))


SPARSE_FUNCTIONS = sorted(_subclasses(ops.SparseFunction), key=lambda c: c.__name__)


def test_scalar_references_by_hand():
    A = SparseTensor([[0, 0, 1], [0, 1, 0]], [2.0, 3.0, 4.0], (2, 2))
    s = A._structure
    v, X = ref.to_values(A.values.data), ref.to_values(np.array([[1.0], [10.0]]))
    np.testing.assert_array_equal(ref.data_of(ref.spmm(v, X, s)), [[32], [4]])
    np.testing.assert_array_equal(ref.data_of(ref.sddmm(X, X, s)), [1, 10, 10])
    np.testing.assert_array_equal(ref.data_of(ref.scatter_add(v, np.array([1, 1, 0]), 3)), [4, 5, 0])
    np.testing.assert_array_equal(ref.data_of(ref.gather(v, np.array([2, 2]))), [4, 4])
    grads = ref.scalar_vjp(ref.spmm, (A.values, Tensor(np.array([[1.0], [10.0]])), s),
                           np.ones((2, 1)))
    np.testing.assert_array_equal(grads[0], [1, 10, 1])  # dv_k = X[col_k]
    np.testing.assert_array_equal(grads[1], [[6], [3]])  # dX = Aᵀ·1
    assert grads[2] is None


def test_value_arrays_round_trip():
    vals = ref.to_values(np.array([[1.5, -2.0]]))
    assert vals.shape == (1, 2) and all(isinstance(x, Value) for x in vals.ravel())
    np.testing.assert_array_equal(ref.data_of(vals), [[1.5, -2.0]])


def test_every_sparse_function_names_its_reference():
    assert all(cls.reference is not None and cls.op_name != "sparse op"
               for cls in SPARSE_FUNCTIONS)


# ---------------------------------------------------------------- fallback


def _broken(ctx, g):
    raise RuntimeError("broken on purpose")


@pytest.mark.parametrize("fn_class", SPARSE_FUNCTIONS, ids=lambda c: c.__name__)
def test_failed_backward_falls_back_to_the_scalar_decomposition(fn_class, monkeypatch):
    case = CASES[_a_case_through(fn_class)]
    inputs = case.inputs("small", seed=5)
    weights = np.random.default_rng(6).standard_normal(case.fn(*inputs).shape)
    _, want = analytic_grads(case.fn, inputs, weights)
    monkeypatch.setattr(fn_class, "vjp", staticmethod(_broken))
    with pytest.warns(ScalarFallbackWarning, match=f"{fn_class.op_name}: backward failed "
                      r"\(RuntimeError: broken on purpose\); using the scalar decomposition"):
        _, got = analytic_grads(case.fn, inputs, weights)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_failed_backward_on_a_large_input_raises_naming_the_op(monkeypatch):
    monkeypatch.setattr(ops.SpMM, "vjp", staticmethod(_broken))
    rng = np.random.default_rng(0)
    n = 100
    A = SparseTensor(rng.integers(0, n, size=(2, 3000)),
                     Tensor(np.ones(3000, dtype=np.float32), requires_grad=True), (n, n))
    Y = spmm(A, np.ones((n, 2), dtype=np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either: it raises
        with pytest.raises(MgsparseError) as info:
            Y.sum().backward()
    assert str(info.value) == (
        "spmm: backward failed (RuntimeError: broken on purpose) and the input holds 3,200 "
        f"stored numbers, above the scalar-fallback limit of {FALLBACK_MAX_NNZ:,}")


def test_negative_control_a_wrong_backward_is_caught(monkeypatch):
    """A backward that is 1% off must fail finite differences and the scalar oracle."""
    right = ops.SpMM.vjp

    def wrong(ctx, g):
        dv, dX, _ = right(ctx, g)
        return dv * 1.01, dX, None

    monkeypatch.setattr(ops.SpMM, "vjp", staticmethod(wrong))
    case = CASES["sparse.spmm"]
    inputs = case.inputs("small")
    with pytest.raises(GradcheckError, match="input 0 of shape"):
        gradcheck(case.fn, inputs)
    weights = np.ones(case.fn(*inputs).shape)
    (_, (dv, _)), (_, (sv, _)) = (analytic_grads(case.fn, inputs, weights),
                                  scalar_grads(case.scalar, inputs, weights))
    assert not np.allclose(dv, sv)
