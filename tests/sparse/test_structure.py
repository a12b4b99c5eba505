"""Structure: cached CSR views, Aᵀ·X on the transpose's view or A's CSR read as CSC, the
permuted-values cache, and A·X of a fixed symmetric Â by its CSR read as CSC."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse import SparseTensor, Tensor, gradcheck, kernels
from mgsparse.kernels import CSRView


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


def _previous_t_matmul(A: SparseTensor, dense: np.ndarray) -> np.ndarray:
    """Aᵀ·dense as it was computed before the CSC path: the values permuted into the
    transpose's CSR view, then its CSR kernel."""
    return A._structure.transposed().csr().matmul(A.values.data, dense)


def _row_sorted_cases(rng, dtype) -> dict[str, SparseTensor]:
    """Random patterns whose values are in CSR order (the CSC path's case) and one that is not."""
    m = sp.random(40, 30, density=0.15, format="csr", dtype=dtype, random_state=3)
    m = sp.csr_matrix(m.multiply(np.arange(40)[:, None] % 4 != 0))  # every 4th row empty
    m.eliminate_zeros()
    rows, cols = 25, 35
    row = np.sort(rng.integers(0, rows, 200))  # row-sorted, columns unsorted, duplicates
    unsorted = SparseTensor(np.stack([row, rng.integers(0, cols, 200)]),
                            rng.standard_normal(200).astype(dtype), (rows, cols))
    canonical = SparseTensor.from_scipy(m)
    return {"canonical, empty rows": canonical, "duplicates, unsorted columns": unsorted,
            "transposed view": canonical.T, "empty": SparseTensor.from_scipy(sp.csr_matrix(
                (6, 4), dtype=dtype))}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_t_matmul_reading_the_csr_as_csc_is_bitwise_the_transposed_view(rng, dtype):
    """A's own CSR read as CSC (no values permuted) gives the bits of the transpose's view."""
    for name, A in _row_sorted_cases(rng, dtype).items():
        rows = A.shape[0]
        g = rng.standard_normal((rows, 16)).astype(dtype)
        for dense in (g, g[:, :1], g[:, 3], np.asfortranarray(g), g.T.copy().T):
            got = A._structure.t_matmul(A.values.data, dense)
            want = _previous_t_matmul(A, dense)
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert got.tobytes() == want.tobytes(), name
        took_csc = A._structure.csr().t_matmul(A.values.data, g) is not None
        assert took_csc == (name != "transposed view"), name  # its values are not in CSR order


@pytest.mark.parametrize("width, sliced", [(1, False), (4, True), (8, True)])
def test_t_matmul_as_csc_at_one_thread_is_bitwise_the_product_at_two(rng, width, sliced):
    """Where the transpose's product is cut (>= 2 × MIN_BLOCK_ROWS output rows), one thread
    reads A as CSC in one call; two read it by A's column slices (a dense side of at least
    `kernels.tuning.MIN_WIDTH` columns) or run the transpose's row blocks: the same bits."""
    cols = 2 * kernels.tuning.MIN_BLOCK_ROWS + 5
    m = sp.random(300, cols, density=0.01, format="csr", dtype=np.float32, random_state=4)
    A = SparseTensor.from_scipy(m)
    g = rng.standard_normal((300, width)).astype(np.float32)
    with kernels.num_threads(2):
        assert (A._structure.csr().t_matmul(A.values.data, g) is not None) == sliced
        two = A._structure.t_matmul(A.values.data, g)
        assert (A._structure._T is None) == sliced  # slices need no transpose
    with kernels.num_threads(1):
        assert A._structure.csr().t_matmul(A.values.data, g) is not None
        one = A._structure.t_matmul(A.values.data, g)
    assert one.tobytes() == two.tobytes()


def _random_pattern(n: int, density: float, seed: int, dtype=np.float64) -> sp.csr_matrix:
    """About density·n² random entries (sp.random would draw from all n² positions)."""
    r = np.random.default_rng(seed)
    k = int(density * n * n)
    m = sp.csr_matrix((r.random(k).astype(dtype), (r.integers(0, n, k), r.integers(0, n, k))),
                      shape=(n, n))
    m.sum_duplicates()
    return m


def _gcn_adjacency(n: int, density: float, seed: int, dtype=np.float32) -> SparseTensor:
    """D^-1/2 (A + I) D^-1/2 of a random undirected graph: symmetric entry for entry."""
    a = _random_pattern(n, density, seed)
    a = ((a + a.T + sp.eye(n)) > 0).astype(np.float64)
    d = sp.diags(np.asarray(a.sum(axis=1)).ravel() ** -0.5)
    m = sp.csr_matrix(d @ a @ d, dtype=dtype)
    m.sort_indices()
    return SparseTensor.from_scipy(m)


def test_symmetric_is_entry_for_entry_and_kept_for_the_array(rng):
    A = _gcn_adjacency(60, 0.05, seed=5)
    view, v = A._structure.csr(), A.values.data
    assert view.symmetric(v) is None and v.flags.writeable  # first seen: not sorted
    assert view.symmetric(v) is True
    assert view._symmetric[0]() is v and not v.flags.writeable  # kept, and cannot go stale
    skewed = v.copy()
    k = np.flatnonzero(view.indices != np.repeat(np.arange(60), np.diff(view.indptr)))[0]
    skewed[k] = np.nextafter(skewed[k], np.float32(1))  # one entry off by one unit, not its mirror
    callers = skewed.copy()  # an array mgsparse does not own: never asked about, never frozen
    assert [view.symmetric(callers) for _ in range(3)] == [None] * 3 and callers.flags.writeable
    kernels.own(skewed)
    assert view.symmetric(skewed) is None and view.symmetric(skewed) is False
    one_sided = SparseTensor.from_dense(np.tril(A.to_dense()))  # the lower triangle
    rect = SparseTensor.from_scipy(sp.random(5, 7, density=0.5, format="csr", random_state=1))
    for other in (one_sided, rect):
        other_view, w = other._structure.csr(), other.values.data
        assert other_view.symmetric(w) is None and other_view.symmetric(w) is False


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_fixed_symmetric_product_reads_its_csr_as_csc_with_the_same_bits(rng, dtype,
                                                                          monkeypatch):
    """Â·X of a fixed symmetric Â is Âᵀ·X by the CSC kernel on Â's own CSR (at two threads
    by its column slices), bitwise the CSR kernel's row blocks; a fixed non-symmetric A and a
    trainable A keep the CSR kernel."""
    n = 2 * kernels.tuning.MIN_BLOCK_ROWS + 7  # two blocks of rows: the pool cuts it at 2 threads
    A = _gcn_adjacency(n, 3 / n, seed=6, dtype=dtype)
    s, v = A._structure, A.values.data
    X = rng.standard_normal((n, 16)).astype(dtype)
    rows_kernel = s.csr().matmul(v, X)
    as_csc, t_matmul = [], CSRView.t_matmul  # which products take the CSC path

    def spy(view, *args, **kwargs):
        as_csc.append(view)
        return t_matmul(view, *args, **kwargs)
    monkeypatch.setattr(CSRView, "t_matmul", spy)
    with kernels.num_threads(1):
        first = s.matmul(v, X, constant=True)  # the CSR kernel: an array seen once
        assert as_csc == []
        one = s.matmul(v, X, constant=True)
        assert as_csc == [s.csr()]  # the CSC path, on A's own CSR
        assert s.csr()._symmetric[1] is True and s._T is None  # no transpose built
    with kernels.num_threads(2):
        two = s.matmul(v, X, constant=True)
        narrow = s.matmul(v, X[:, :4], constant=True)  # too narrow to slice: the row blocks
    assert as_csc == [s.csr()] * 3 and list(s.csr()._slices) == [2]
    assert one.tobytes() == rows_kernel.tobytes() == two.tobytes() == first.tobytes()
    assert narrow.tobytes() == s.csr().matmul(v, np.ascontiguousarray(X[:, :4])).tobytes()
    np.testing.assert_allclose(one, A.to_scipy() @ X, rtol=1e-5, atol=1e-6)

    B = SparseTensor.from_scipy(_random_pattern(n, 3 / n, seed=7, dtype=dtype))
    with kernels.num_threads(1):
        for _ in range(2):
            got = B._structure.matmul(B.values.data, X, constant=True)
        assert B._structure.csr()._symmetric[1] is False  # not symmetric: the CSR kernel
        assert B._structure._T is None  # no transpose built for it
        trainable = A._structure.matmul(A.values.data.copy(), X, constant=False)
    assert got.tobytes() == B._structure.csr().matmul(B.values.data, X).tobytes()
    assert trainable.tobytes() == rows_kernel.tobytes()
    assert len(as_csc) == 3  # neither the non-symmetric nor the trainable A took it


@pytest.mark.parametrize("shape", [(40, 70), (70, 40)])
def test_a_fixed_rectangular_block_keeps_the_csr_kernel(rng, shape):
    """A receptive field's block (T targets × S sources) is fixed but not symmetric: every
    product, for a 2-d, a Fortran-ordered and a 1-d operand, is the CSR kernel's, no transpose
    built; an operand of another dtype keeps scipy's mixed-dtype path."""
    rows, cols = shape
    m = sp.random(rows, cols, density=0.2, format="csr", dtype=np.float32, random_state=9)
    m.sort_indices()
    A = SparseTensor.from_scipy(m)
    s, v = A._structure, A.values.data
    X = rng.standard_normal((cols, 5)).astype(np.float32)
    with kernels.num_threads(1):
        s.matmul(v, X, constant=True)  # first sight
        for dense in (X, np.asfortranarray(X), X[:, 2]):
            got = s.matmul(v, dense, constant=True)
            assert got.tobytes() == s.csr().matmul(v, dense).tobytes()
        assert s.csr()._symmetric[1] is False and s._T is None
        mixed = s.matmul(v, X.astype(np.float64), constant=True)
    np.testing.assert_allclose(mixed, m.toarray().astype(np.float64) @ X, rtol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bias_added_inside_the_product_is_bitwise_the_product_plus_the_bias(rng, threads):
    """Row blocks of the CSR kernel (a gradient-carrying A), the CSC read of a fixed symmetric
    Â (its second product) and scipy's mixed-dtype path each give A·X + b to the bit."""
    n = 2 * kernels.tuning.MIN_BLOCK_ROWS + 5  # several row blocks at two threads
    A = _gcn_adjacency(n, 0.001, seed=6)
    X = rng.standard_normal((n, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    s, values = A._structure, A.values.data
    with kernels.num_threads(threads):
        want = s.csr().matrix(values) @ X + b
        for constant in (False, True, True):  # the third call: the kept symmetric answer
            got = s.matmul(values, X, constant=constant, bias=b)
            assert got.dtype == np.float32 and got.tobytes() == want.tobytes(), constant
        mixed = s.matmul(values, X.astype(np.float64), bias=b.astype(np.float64))
        np.testing.assert_allclose(mixed, want, rtol=1e-5, atol=1e-5)
        # the CSC read above was taken: one call, or the column slices at two threads
        assert s.csr().symmetric(values) is True
        assert list(s.csr()._slices) == ([2] if threads == 2 else [])


def test_slices_of_two_counts_are_both_kept(rng):
    """Products of two widths on one pattern take two slice counts: each built once."""
    A = _gcn_adjacency(300, 0.05, seed=10)
    view = A._structure.csr()
    two, three = view.column_slices(2), view.column_slices(3)
    assert view.column_slices(2) is two and view.column_slices(3) is three
    assert (two.count, three.count) == (2, 3)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_gradient_zero_outside_a_few_rows_takes_those_rows_with_scipys_bits(rng, threads,
                                                                               dtype):
    """Aᵀ·G for G nonzero on few rows takes only A's rows there: the bits of scipy's
    `A[rows].T @ G[rows]`, at any thread count, and a mixed dtype agrees with the product."""
    n = 3 * kernels.tuning.MIN_BLOCK_ROWS
    A = _gcn_adjacency(n, 4 / n, seed=11, dtype=dtype)
    s, values = A._structure, A.values.data
    rows = np.sort(rng.choice(n, 60, replace=False))
    G = np.zeros((n, 16), dtype=dtype)
    G[rows] = rng.standard_normal((60, 16))
    m = s.csr().matrix(values)
    with kernels.num_threads(threads):
        assert np.array_equal(kernels.sparse_rows(G), rows)
        got = s.t_matmul(values, G)
        mixed = s.t_matmul(values, G.astype(np.float64 if dtype == np.float32 else np.float32))
    want = np.asarray(m[rows].T @ G[rows])
    assert got.dtype == dtype and got.tobytes() == want.tobytes()
    np.testing.assert_allclose(mixed, m.T @ G, rtol=1e-5, atol=1e-6)
