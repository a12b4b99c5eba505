"""Sparse ops: hand-computed values and gradients, errors, memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from mgsparse import kernels
from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.sparse import SparseTensor, ops, sddmm, sparse_dropout, spmm

# Every op's gradient against its three oracles at every size: tests/checks (the registry).


def A34(requires_grad=False) -> SparseTensor:
    """[[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 0, 4]] with (2, 3) stored as 1 + 3."""
    v = Tensor([1.0, 2.0, 3.0, 1.0, 3.0], requires_grad=requires_grad)
    return SparseTensor([[0, 0, 2, 2, 2], [1, 3, 0, 3, 3]], v, (3, 4))


# ---------------------------------------------------------------- products


def test_spmm_by_hand():
    A = A34(requires_grad=True)
    X = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2), requires_grad=True)
    Y = A @ X
    np.testing.assert_array_equal(Y.data, [[14, 17], [0, 0], [24, 31]])
    Y.backward(np.ones((3, 2), dtype=np.float32))
    np.testing.assert_array_equal(X.grad, [[3, 3], [1, 1], [0, 0], [6, 6]])
    np.testing.assert_array_equal(A.values.grad, [5, 13, 1, 13, 13])  # dv_k = G[row_k]·X[col_k]


def test_spmm_with_a_bias_by_hand():
    """A·X + b as one op: the product's rows plus b, and db = Σ_rows G."""
    A = A34(requires_grad=True)
    X = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2), requires_grad=True)
    b = Tensor([10.0, -1.0], requires_grad=True)
    Y = spmm(A, X, b)
    np.testing.assert_array_equal(Y.data, [[24, 16], [10, -1], [34, 30]])
    Y.backward(np.arange(6, dtype=np.float32).reshape(3, 2))
    np.testing.assert_array_equal(b.grad, [6, 9])
    np.testing.assert_array_equal(X.grad, [[12, 15], [0, 1], [0, 0], [16, 22]])
    np.testing.assert_array_equal(A.values.grad, [3, 7, 5, 59, 59])


@pytest.mark.parametrize("X, bias, message", [
    (np.ones((4, 2)), np.ones(3),
     "spmm: a bias for the product (3, 4) · (4, 2) must have shape (2,), got (3,)"),
    (np.ones(4), np.ones(1),
     "spmm: a bias for the product (3, 4) · (4,) must have shape (4,), got (1,)"),
])
def test_spmm_bias_shape_errors(X, bias, message):
    with pytest.raises(ShapeError) as info:
        spmm(A34(), X, bias)
    assert message in str(info.value)


def test_spmm_vector_and_numpy_operands():
    A = A34()
    np.testing.assert_array_equal((A @ np.ones(4)).data, [3, 0, 7])
    np.testing.assert_array_equal((np.ones((1, 3), dtype=np.float32) @ A).data, [[3, 1, 0, 6]])
    np.testing.assert_array_equal((Tensor(np.ones(3)) @ A.astype(np.float64)).data, [3, 1, 0, 6])


def test_sparse_features_times_weights_skips_the_values_gradient(monkeypatch):
    """A GCN's first layer: constant sparse features, dense weights; dW = Xᵀ·dY, no SDDMM."""
    calls = []
    monkeypatch.setattr(ops, "sddmm_kernel", lambda *a: calls.append(a))
    W = Tensor(np.ones((4, 2), dtype=np.float32), requires_grad=True)
    (A34() @ W).backward(np.ones((3, 2), dtype=np.float32))
    np.testing.assert_array_equal(W.grad, [[3, 3], [1, 1], [0, 0], [6, 6]])
    assert calls == []


@pytest.mark.parametrize("bad, message", [
    (np.ones((3, 2)), "spmm: cannot multiply sparse (3, 4) by dense (3, 2)"),
    (np.ones((4, 2, 1)), "spmm: cannot multiply sparse (3, 4) by dense (4, 2, 1)"),
])
def test_spmm_shape_errors(bad, message):
    with pytest.raises(ShapeError) as info:
        A34() @ bad
    assert message in str(info.value)


def test_mixed_dtypes_are_refused():
    with pytest.raises(ShapeError, match="different dtypes"):
        A34() @ Tensor(np.ones((4, 2)))  # float32 matrix, float64 operand


def test_sddmm_by_hand_and_in_blocks(monkeypatch, rng):
    X, Y = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    A = A34().astype(np.float64)
    want = np.einsum("ij,ij->i", X[A.row], Y[A.col])
    np.testing.assert_allclose(sddmm(A, X, Y).values.data, want)
    monkeypatch.setattr(kernels.tuning, "SDDMM_CHUNK", 10)  # two rows per block: three blocks
    np.testing.assert_allclose(ops.sddmm_kernel(A.row, A.col, X, Y), want)
    with pytest.raises(ShapeError, match=r"sddmm: pattern \(3, 4\) needs X"):
        sddmm(A, X, X)


def test_spspmm_keeps_structural_zeros():
    """Entries that cancel numerically stay in the pattern, so their gradient still flows."""
    A = SparseTensor([[0, 0], [0, 1]], Tensor([1.0, -1.0], requires_grad=True), (1, 2))
    B = SparseTensor([[0, 1], [0, 0]], Tensor([1.0, 1.0], requires_grad=True), (2, 1))
    C = A @ B
    assert C.nnz == 1 and C.values.data[0] == 0 and C.is_coalesced()
    C.values.backward(np.ones(1, dtype=np.float32))
    np.testing.assert_array_equal(A.values.grad, [1, 1])
    np.testing.assert_array_equal(B.values.grad, [1, -1])
    with pytest.raises(ShapeError, match=r"spspmm: cannot multiply sparse \(1, 2\) by sparse \(1, 2\)"):
        A @ A


# ---------------------------------------------------------------- elementwise


def test_add_is_the_union_and_mul_the_intersection():
    A = A34()
    B = SparseTensor([[1, 2], [1, 3]], [5.0, 6.0], (3, 4))
    S = A + B
    assert S.is_coalesced()
    np.testing.assert_array_equal(S.indices, [[0, 0, 1, 2, 2], [1, 3, 1, 0, 3]])
    np.testing.assert_array_equal(S.to_dense(), A.to_dense() + B.to_dense())
    np.testing.assert_array_equal((A - B).to_dense(), A.to_dense() - B.to_dense())
    P = A * B
    np.testing.assert_array_equal(P.indices, [[2], [3]])
    np.testing.assert_array_equal(P.values.data, [24])  # (1 + 3) · 6: duplicates add first


def test_scalar_and_dense_products():
    A = A34()
    np.testing.assert_array_equal((2 * A).to_dense(), 2 * A.to_dense())
    np.testing.assert_array_equal((A / 2).to_dense(), A.to_dense() / 2)
    np.testing.assert_array_equal((-A).to_dense(), -A.to_dense())
    D = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal((A * D).to_dense(), A.to_dense() * D)
    np.testing.assert_array_equal((D * A).to_dense(), A.to_dense() * D)
    r = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    np.testing.assert_array_equal((A * r).to_dense(), A.to_dense() * r)  # row scaling
    s = Tensor(np.float32(3.0), requires_grad=True)
    (A * s).values.sum().backward()
    assert s.grad == pytest.approx(10.0)


@pytest.mark.parametrize("expr, message", [
    (lambda A: A + 1.0, "add: a SparseTensor adds only to a SparseTensor (got float)"),
    (lambda A: A - np.ones((3, 4)), "sub: a SparseTensor subtracts only a SparseTensor"),
    (lambda A: A + A.T, r"add: shapes (3, 4) and (4, 3) differ"),
    (lambda A: A * A.T, r"mul: shapes (3, 4) and (4, 3) differ"),
    (lambda A: A * np.ones((2, 4)), "mul: dense (2, 4) does not broadcast to sparse (3, 4)"),
    (lambda A: A.sum(axis=2), "sum: axis must be None, 0 or 1 for a sparse matrix, got 2"),
    # issue #12, defect 9: a dense operand on the left raised a raw TypeError
    (lambda A: Tensor(np.ones((3, 4))) + A, "add: a SparseTensor adds only to a SparseTensor"),
    (lambda A: np.ones((3, 4)) + A, "add: a SparseTensor adds only to a SparseTensor"),
    (lambda A: Tensor(np.ones((3, 4))) - A, "sub: a SparseTensor subtracts only a SparseTensor"),
    (lambda A: Tensor(np.ones((3, 4))) / A, "div: cannot divide a Tensor by a SparseTensor"),
    (lambda A: 2.0 / A, "div: cannot divide a float by a SparseTensor"),
    (lambda A: A / Tensor(np.ones((3, 4))), "div: a SparseTensor divides only by a scalar"),
])
def test_elementwise_errors(expr, message):
    with pytest.raises(ShapeError) as info:
        expr(A34())
    assert message in str(info.value)


def test_sums_and_value_wise_functions():
    A = A34()
    np.testing.assert_array_equal(A.sum(axis=1).data, [3, 0, 7])
    np.testing.assert_array_equal(A.sum(axis=0).data, [3, 1, 0, 6])
    assert A.sum().item() == 10
    B = SparseTensor([[0, 1], [1, 0]], [-2.0, 0.5], (2, 2))
    assert B.relu()._structure is B._structure  # the pattern (and its caches) is kept
    np.testing.assert_array_equal(B.relu().values.data, [0, 0.5])
    np.testing.assert_allclose(B.exp().values.data, np.exp([-2.0, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(B.leaky_relu(0.1).values.data, [-0.2, 0.5], rtol=1e-6)
    np.testing.assert_allclose(B.apply(lambda v: v * v).values.data, [4, 0.25])


# ---------------------------------------------------------------- dropout


def test_sparse_dropout_drops_values_only(rng):
    A = SparseTensor.from_dense(np.ones((300, 300), dtype=np.float32))
    D = sparse_dropout(A, 0.25, training=True, rng=rng)
    assert D._structure is A._structure  # never densified nor re-sorted
    kept = D.values.data != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(D.values.data[kept], 1 / 0.75)
    assert sparse_dropout(A, 0.5, training=False, rng=rng) is A
    assert sparse_dropout(A, 0.0, rng=rng) is A
    with pytest.raises(HyperparameterError, match=r"sparse_dropout: dropout probability must be in \[0, 1\), got 1"):
        sparse_dropout(A, 1, rng=rng)


def test_same_rng_seed_gives_the_same_mask():
    A = SparseTensor.from_dense(np.ones((20, 20), dtype=np.float32))
    a = sparse_dropout(A, 0.5, rng=np.random.default_rng(3)).values.data
    b = sparse_dropout(A, 0.5, rng=np.random.default_rng(3)).values.data
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- memory


def test_spmm_forward_backward_never_densifies():
    """200,000 × 200,000 with 1,000,000 nonzeros: a dense copy would need 160 GB; the whole
    forward+backward (CSR and CSRᵀ views included) must peak under 100 MB."""
    rng = np.random.default_rng(0)
    n, nnz, f = 200_000, 1_000_000, 16
    A = SparseTensor(rng.integers(0, n, size=(2, nnz)),
                     Tensor(rng.random(nnz, dtype=np.float32), requires_grad=True), (n, n))
    X = Tensor(rng.standard_normal((n, f), dtype=np.float32), requires_grad=True)
    g = np.ones((n, f), dtype=np.float32)
    owner = not tracemalloc.is_tracing()
    if owner:
        tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]  # what the operands' creation left aside
        tracemalloc.reset_peak()
        spmm(A, X).backward(g)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        if owner:
            tracemalloc.stop()
    assert X.grad.shape == (n, f) and A.values.grad.shape == (nnz,)
    assert peak < 100e6, f"peak {peak / 1e6:.1f} MB"


def test_a_large_scatter_add_sums_fixed_chunks_the_same_on_any_thread_count(rng):
    """Above the pool's size `scatter_sum` adds SCATTER_CHUNKS partial bincounts in chunk
    order: bitwise the same at 1, 2 and 3 threads, and bincount's sums to float64 rounding;
    small inputs are bincount itself. Gather's gradient and ScatterAdd take it."""
    from mgsparse import kernels

    n = kernels.tuning.MIN_PARALLEL_ELEMENTS + 12_345
    index = rng.integers(0, 50_000, n)
    v = rng.standard_normal(n).astype(np.float32)
    runs = []
    for threads in (1, 2, 3):
        with kernels.num_threads(threads):
            runs.append(ops.scatter_sum(index, v, 60_000))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    want = np.bincount(index, weights=v, minlength=60_000)
    np.testing.assert_allclose(runs[0], want, rtol=1e-12, atol=1e-12)
    assert runs[0].shape == (60_000,) and not runs[0][50_000:].any()
    small = rng.integers(0, 9, 100)
    np.testing.assert_array_equal(ops.scatter_sum(small, v[:100], 9),
                                  np.bincount(small, weights=v[:100], minlength=9))
    x = Tensor(rng.standard_normal(60_000).astype(np.float32), requires_grad=True)
    ops.Gather.apply(x, index).backward(v)
    np.testing.assert_array_equal(x.grad, runs[0].astype(np.float32))
