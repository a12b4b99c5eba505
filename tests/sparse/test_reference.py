"""The scalar references, the case registry, and the scalar fallback of failed backward passes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mgsparse import gradcheck
from mgsparse.engine import Tensor, Value
from mgsparse.errors import GradcheckError, MgsparseError
from mgsparse.sparse import (
    FALLBACK_MAX_NNZ,
    SPARSE_OPS,
    ScalarFallbackWarning,
    SparseTensor,
    analytic_grads,
    graph,
    ops,
    scalar_grads,
    spmm,
)
from mgsparse.sparse import reference as ref
from mgsparse.sparse.cases import random_pattern

# each SparseFunction and a registered case that runs through it
FUNCTIONS = [(ops.SpMM, "spmm"), (ops.Sddmm, "sddmm"), (ops.SpSpMM, "spspmm"),
             (ops.ScatterAdd, "coalesce"), (ops.Gather, "mul_sparse"),
             (graph.RowSoftmax, "row_softmax")]


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


def test_registry_covers_every_public_op():
    assert set(SPARSE_OPS) == {
        "spmm", "dense_spmm", "sparse_features", "sddmm", "spspmm", "add", "sub", "mul_sparse",
        "mul_scalar", "mul_dense", "sum_rows", "sum_cols", "coalesce", "transpose", "relu", "exp",
        "leaky_relu", "sparse_dropout", "add_self_loops", "gcn_norm", "gcn_norm_no_loops",
        "row_softmax"}
    functions = {cls for cls, _ in FUNCTIONS}
    assert functions == set(_subclasses(ops.SparseFunction))
    assert all(cls.reference is not None and cls.op_name != "sparse op" for cls in functions)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_random_patterns_have_empty_rows_columns_and_duplicates():
    idx = random_pattern(np.random.default_rng(0), (6, 5), 12)
    assert idx[0].max() < 5 and idx[1].max() < 4  # last row and last column empty
    keys = idx[0] * 5 + idx[1]
    assert len(np.unique(keys)) < len(keys)
    assert not np.all(np.diff(keys) >= 0)  # shuffled, not row-sorted


# ---------------------------------------------------------------- fallback


def _broken(ctx, g):
    raise RuntimeError("broken on purpose")


@pytest.mark.parametrize("fn_class, name", FUNCTIONS)
def test_failed_backward_falls_back_to_the_scalar_decomposition(fn_class, name, monkeypatch):
    case = SPARSE_OPS[name]
    inputs = case.build(np.random.default_rng(5), "small", np.float64)
    weights = np.random.default_rng(6).standard_normal(case.sparse(*inputs).shape)
    _, want = analytic_grads(case.sparse, inputs, weights)
    monkeypatch.setattr(fn_class, "vjp", staticmethod(_broken))
    with pytest.warns(ScalarFallbackWarning, match=f"{fn_class.op_name}: backward failed "
                      r"\(RuntimeError: broken on purpose\); using the scalar decomposition"):
        _, got = analytic_grads(case.sparse, inputs, weights)
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
    case = SPARSE_OPS["spmm"]
    inputs = case.build(np.random.default_rng(0), "small", np.float64)
    with pytest.raises(GradcheckError, match="input 0 of shape"):
        gradcheck(case.sparse, inputs)
    weights = np.ones(case.sparse(*inputs).shape)
    (_, (dv, _)), (_, (sv, _)) = (analytic_grads(case.sparse, inputs, weights),
                                  scalar_grads(case, inputs, weights))
    assert not np.allclose(dv, sv)
