"""ColumnSlices: A's CSR cut by column ranges, each a CSR over all of A's rows, scattering
Aᵀ·X on the pool with the bits of the one CSC call."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import _sparsetools

from mgsparse import kernels
from mgsparse.kernels.inplace import own
from mgsparse.kernels.slices import ColumnSlices


def _one_call(m: sp.csr_matrix, X: np.ndarray) -> np.ndarray:
    """Aᵀ·X by scipy's CSC kernel on A's CSR, in one call: the reference bits."""
    rows, cols = m.shape
    out = np.zeros((cols, X.shape[1]), dtype=X.dtype)
    _sparsetools.csc_matvecs(cols, rows, X.shape[1], m.indptr, m.indices, m.data,
                             X.reshape(-1), out.reshape(-1))
    return out


def _unsorted_with_repeats(rng, rows: int, cols: int, nnz: int) -> sp.csr_matrix:
    """Rows in order, but columns within a row unsorted and repeated (CSR as built from COO
    entries sorted stably by row), plus empty rows and columns."""
    r = np.sort(rng.integers(0, rows - 3, nnz))  # the last 3 rows empty
    c = rng.integers(0, cols // 2, nnz) * 2  # odd columns empty
    indptr = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(r, minlength=rows), out=indptr[1:])
    data = rng.standard_normal(nnz).astype(np.float32)
    return sp.csr_matrix((data, c.astype(np.int32), indptr), shape=(rows, cols))


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_slices_hold_every_entry_once_in_stored_order(rng, count):
    m = _unsorted_with_repeats(rng, 500, 900, 6000)
    cut = ColumnSlices(m.indptr, m.indices, m.shape, count)
    assert cut.count == count
    seen = np.concatenate(cut.positions)
    assert np.array_equal(np.sort(seen), np.arange(m.nnz))  # each entry in exactly one slice
    sizes = [len(p) for p in cut.positions]
    assert max(sizes) - min(sizes) <= m.nnz // count // 2  # about equal in entries
    for pointers, indices, positions in zip(cut.pointers, cut.indices, cut.positions):
        assert np.all(np.diff(positions) > 0)  # stored order kept
        assert np.array_equal(indices, m.indices[positions])
        row_of = np.repeat(np.arange(500), np.diff(m.indptr))
        assert np.array_equal(np.repeat(np.arange(500), np.diff(pointers)), row_of[positions])
    lows = [idx.min() for idx in cut.indices]
    highs = [idx.max() for idx in cut.indices]
    assert all(h < lo for h, lo in zip(highs, lows[1:]))  # disjoint column ranges, in order


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("count", [2, 5])
def test_scatter_is_bitwise_the_one_csc_call(rng, threads, count):
    """Output row i gets its entries in the one call's order in any slice: the same bits."""
    m = _unsorted_with_repeats(rng, 700, 1000, 9000)
    X = rng.standard_normal((700, 16)).astype(np.float32)
    cut = ColumnSlices(m.indptr, m.indices, m.shape, count)
    with kernels.num_threads(threads):
        got = cut.scatter(m.data, X, np.full((1000, 16), np.nan, np.float32))
    want = _one_call(m, X)
    assert got.tobytes() == want.tobytes()  # every slice zeroed its own rows, all rows covered
    np.testing.assert_allclose(got, m.T @ X, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bias_added_by_each_slice_is_bitwise_the_product_plus_the_bias(rng, threads):
    """Each slice adds the bias to its own rows after its scatter: the bits of zeros, the one
    call, then `+ b`, with the output handed in uninitialised."""
    m = _unsorted_with_repeats(rng, 700, 1000, 9000)
    X = rng.standard_normal((700, 16)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    cut = ColumnSlices(m.indptr, m.indices, m.shape, 4)
    with kernels.num_threads(threads):
        got = cut.scatter(m.data, X, np.full((1000, 16), np.inf, np.float32), bias=b)
    assert got.tobytes() == (_one_call(m, X) + b).tobytes()


def test_a_fixed_arrays_slices_are_kept_and_the_array_frozen(rng):
    m = _unsorted_with_repeats(rng, 300, 400, 2000)
    cut = ColumnSlices(m.indptr, m.indices, m.shape, 2)
    values, X = m.data.copy(), rng.standard_normal((300, 8)).astype(np.float32)
    cut.scatter(values, X, np.zeros((400, 8), np.float32), constant=True)
    assert cut._kept is None and values.flags.writeable  # not mgsparse's: never kept or frozen
    own(values)
    first = cut.scatter(values, X, np.zeros((400, 8), np.float32), constant=True)
    kept = cut._kept[1]
    again = cut.scatter(values, X, np.zeros((400, 8), np.float32), constant=True)
    assert cut._kept[1] is kept and first.tobytes() == again.tobytes()
    with pytest.raises(ValueError, match="read-only"):
        values[0] = 1.0  # a write would meet stale slices: refused
    other = own(m.data * 2)  # another array: sliced afresh, not the kept copy
    doubled = cut.scatter(other, X, np.zeros((400, 8), np.float32), constant=True)
    assert doubled.tobytes() == _one_call(sp.csr_matrix((other, m.indices, m.indptr),
                                                        shape=m.shape), X).tobytes()
    changing = cut.scatter(other + 1, X, np.zeros((400, 8), np.float32))  # gathered per call
    assert cut._kept[1] is not kept and cut._kept[0]() is other
    np.testing.assert_allclose(changing, (sp.csr_matrix((other + 1, m.indices, m.indptr),
                                                        shape=m.shape)).T @ X, rtol=1e-4,
                               atol=1e-5)


def test_a_fixed_arrays_slices_drop_their_positions_once_and_cut_them_anew_when_asked(rng):
    """A fixed A's slices keep its values in place of the positions (4 bytes an entry a
    slicing); a later array, fixed or changing, cuts them again, the same, and keeps them."""
    m = _unsorted_with_repeats(rng, 300, 400, 2000)
    cut = ColumnSlices(m.indptr, m.indices, m.shape, 3)
    before = [p.copy() for p in cut.positions]
    X = rng.standard_normal((300, 8)).astype(np.float32)
    values = own(m.data.copy())
    cut.scatter(values, X, np.zeros((400, 8), np.float32), constant=True)
    assert cut._positions is None  # dropped: only the kept values are read now
    held = sum(a.nbytes for a in cut.pointers + cut.indices + cut._kept[1])
    assert held == 3 * 301 * 4 + 2000 * 4 + 2000 * 4
    again = cut.scatter(values, X, np.zeros((400, 8), np.float32), constant=True)
    assert cut._positions is None and again.tobytes() == _one_call(m, X).tobytes()
    other = own((m.data * 3).astype(np.float32))
    got = cut.scatter(other, X, np.zeros((400, 8), np.float32))  # changing values: gathered
    want = _one_call(sp.csr_matrix((other, m.indices, m.indptr), shape=m.shape), X)
    assert got.tobytes() == want.tobytes()
    assert all(np.array_equal(a, b) for a, b in zip(cut._positions, before))
    cut.scatter(other, X, np.zeros((400, 8), np.float32), constant=True)
    assert cut._positions is not None  # cut anew once: kept from then on


def test_few_columns_give_fewer_slices_never_an_empty_range(rng):
    m = sp.csr_matrix(rng.standard_normal((50, 3)).astype(np.float32))
    cut = ColumnSlices(m.indptr, m.indices, m.shape, 8)
    assert cut.count <= 3
    X = rng.standard_normal((50, 8)).astype(np.float32)
    got = cut.scatter(m.data, X, np.zeros((3, 8), np.float32))
    assert got.tobytes() == _one_call(m, X).tobytes()


def test_a_vector_scattered_in_slices_is_bitwise_the_one_call(rng, monkeypatch):
    """A vector product whose output outgrows SLICE_BYTES where the pool does not cut the
    work (one thread, or too few rows) is cut into slices like a matrix's: it took
    X.shape[1] of a 1-d X and failed."""
    from mgsparse import kernels
    from mgsparse.sparse.structure import Structure

    m = sp.random(600, 500, density=0.02, random_state=1, format="csr", dtype=np.float32)
    coo = m.tocoo()
    structure = Structure(np.stack([coo.row, coo.col]).astype(np.int64), m.shape,
                          canonical=True)
    x = rng.standard_normal(600).astype(np.float32)
    monkeypatch.setattr(kernels.tuning, "SLICE_BYTES", 256)  # 2,000 output bytes: ~8 slices
    with kernels.num_threads(1):
        got = structure.t_matmul(coo.data, x)
    one = np.zeros(500, np.float32)
    _sparsetools.csc_matvec(500, 600, m.indptr, m.indices, m.data, x, one)
    assert got.tobytes() == one.tobytes()


def test_the_count_follows_the_threads_and_the_output_size(monkeypatch):
    from mgsparse import kernels
    from mgsparse.kernels import slices

    monkeypatch.setattr(kernels.tuning, "SLICE_BYTES", 1 << 20)
    wide, narrow = np.zeros((10, 64), np.float32), np.zeros((10, 4), np.float32)
    rows = 2 * kernels.tuning.MIN_BLOCK_ROWS  # cut by the pool at 2 threads
    with kernels.num_threads(1):
        assert slices.count(rows, narrow) == 1  # 128 kB of output: one call
        assert slices.count(rows, wide) == 2  # 2 MB: two slices of about 1 MB
        assert slices.count(8 * rows, wide) == 16  # 16 MB
    with kernels.num_threads(2):
        assert slices.count(rows, wide) == 2 and slices.count(8 * rows, wide) == 16
        assert slices.count(3 * rows // 2, wide) == 4  # three slices' worth: two per thread
        assert slices.count(rows, narrow) == 2  # narrow columns slice too
        assert slices.count(rows, np.zeros(10, np.float32)) == 0  # a vector: the row blocks
        assert slices.count(100, narrow) == 1  # too few rows for the pool: one call
    assert slices.scatter_pays(rows, wide) and not slices.scatter_pays(rows, narrow)
    assert not slices.scatter_pays(rows, np.zeros(10, np.float32))  # a vector: never
