"""Gradients zero outside a few rows: `sparse_rows` finds them (or reads only the rows a
record names), the weight gradient sums over them, the same answer at any thread count."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, kernels
from mgsparse.sparse import set_num_threads


@pytest.fixture(autouse=True)
def restore_threads():
    before = kernels.get_num_threads()
    yield
    set_num_threads(before)


def _row_sparse(rng, rows: int, cols: int, nonzero: int) -> np.ndarray:
    g = np.zeros((rows, cols))
    g[rng.choice(rows, nonzero, replace=False)] = rng.standard_normal((nonzero, cols))
    return g


def test_row_sparse_gradients_take_the_short_paths_and_agree_with_the_dense_products(rng):
    n = 3 * kernels.tuning.MIN_BLOCK_ROWS
    g = _row_sparse(rng, n, 5, 40)
    assert len(kernels.sparse_rows(g)) == 40
    assert kernels.sparse_rows(rng.standard_normal((n, 5))) is None  # dense: the full path
    a = rng.standard_normal((n, 64))
    np.testing.assert_allclose(kernels.matmul_tn(a, g), a.T @ g, atol=1e-10)
    A = SparseTensor(rng.integers(0, n, (2, 10 * n)), rng.standard_normal(10 * n), (n, n))
    expected = A.to_scipy().T @ g
    np.testing.assert_allclose(A._structure.t_matmul(A.values.data, g), expected, atol=1e-10)
    np.testing.assert_allclose(A._structure.t_matmul(A.values.data, g[:, 0]), expected[:, 0],
                               atol=1e-10)


def test_sparse_rows_stops_early_with_the_answer_of_the_whole_pass(rng):
    """`sparse_rows` finds the nonzero rows by row blocks and stops once they are more than
    a quarter: for every share of nonzero rows on both sides of the quarter it returns what
    the definition says (the rows, or None), a row of -0.0 counting as zero and a row
    holding a NaN as nonzero."""
    n = 10_000
    for share in (0.0, 0.1, 0.2499, 0.25, 0.2501, 0.26, 0.54, 1.0):
        g = np.zeros((n, 7))
        nonzero = rng.permutation(n)[:round(share * n)]
        g[nonzero] = rng.standard_normal((len(nonzero), 7))
        want = np.sort(nonzero)
        if len(nonzero) > 2:
            g[nonzero[0]] = np.nan  # still a nonzero row
            g[nonzero[1], :] = 0.0
            g[nonzero[1], 3] = 1e-300  # a tiny entry keeps its row
        zero_rows = np.setdiff1d(np.arange(n), nonzero)
        if len(zero_rows):
            g[zero_rows[0]] = -0.0  # a zero row, whatever its sign bits
        for threads in (1, 2, 3):  # blocks on the pool: the same answer
            set_num_threads(threads)
            got = kernels.sparse_rows(g)
            if len(want) > 0.25 * n:
                assert got is None, (share, threads)
            else:
                np.testing.assert_array_equal(got, want)
        got_1d = kernels.sparse_rows(g[:, 3])
        nz_1d = np.flatnonzero(g[:, 3])
        assert (got_1d is None) if len(nz_1d) > 0.25 * n else np.array_equal(got_1d, nz_1d)



def test_a_row_sparse_weight_gradient_and_a_long_argmax_are_the_same_at_any_thread_count(rng):
    """aᵀ·g over the nonzero rows of g runs by fixed blocks of those rows, and an argmax of many
    short rows by row blocks: the same bits at 1, 2 and 3 threads, equal to the full products."""
    n = 16 * kernels.tuning.MIN_BLOCK_ROWS  # 3 blocks' worth of nonzero rows: under a quarter
    a = rng.standard_normal((n, 64)).astype(np.float32)
    g = _row_sparse(rng, n, 16, 3 * kernels.tuning.MIN_BLOCK_ROWS).astype(np.float32)
    z = np.round(rng.standard_normal((n, 5)), 1)  # ties: the first maximum wins
    assert len(kernels.row_blocks(len(kernels.sparse_rows(g)))) > 1
    results = []
    for threads in (1, 2, 3):
        set_num_threads(threads)
        results.append(kernels.matmul_tn(a, g).tobytes())
        np.testing.assert_array_equal(kernels.argmax_rows(z), z.argmax(axis=1))
    assert results[0] == results[1] == results[2]
    np.testing.assert_allclose(np.frombuffer(results[0], np.float32).reshape(64, 16),
                               a.astype(np.float64).T @ g, rtol=1e-4, atol=1e-3)


def test_a_dense_gradient_is_freed_as_soon_as_its_last_reference_goes(rng):
    """`sparse_rows` stops its blocks without an exception: a raised one, kept in the pool's
    error list, made a reference cycle through its traceback that held every dense gradient
    it had looked at until the cyclic collector ran (+350 MB of peak RSS on the arxiv-shaped
    epoch at two threads)."""
    import gc
    import weakref

    for threads in (1, 2):
        set_num_threads(threads)
        gc.disable()
        try:
            g = rng.standard_normal((4 * kernels.tuning.MIN_BLOCK_ROWS, 8))
            alive = weakref.ref(g)
            assert kernels.sparse_rows(g) is None
            del g
            assert alive() is None, threads
        finally:
            gc.enable()


def test_a_gradients_recorded_rows_are_all_sparse_rows_reads(rng, monkeypatch):
    """`mark_rows` records the rows outside which a gradient is zero (a superset is allowed):
    `sparse_rows` reads g at those rows only and returns the whole pass's answer, the exact
    nonzero rows (NaN counting as nonzero); a record over a quarter leaves it to the pass.
    The record belongs to that array only and goes with it; `same_rows` carries it on."""
    n = 3 * kernels.tuning.MIN_BLOCK_ROWS
    g = _row_sparse(rng, n, 5, 40)
    g[np.flatnonzero(g.any(axis=1))[3], 2] = np.nan
    exact = kernels.sparse_rows(g)
    rows = np.union1d(exact, [0, 7])  # two zero rows added
    for h in (g, g[:, 1].copy()):  # 2-d and 1-d
        kernels.mark_rows(h, rows)
        with monkeypatch.context() as m:
            m.setattr(kernels.pool, "run_blocks", lambda *a, **k: pytest.fail("the whole array was read"))
            want = exact if h.ndim == 2 else np.flatnonzero(h)
            assert np.array_equal(kernels.sparse_rows(h), want)
    out = kernels.same_rows(g * 2.0, g)
    assert kernels.known_rows(out) is rows and kernels.known_rows(g.copy()) is None
    dense = kernels.mark_rows(rng.standard_normal((n, 3)), np.arange(n // 4 + 1))
    assert kernels.sparse_rows(dense) is None  # a record over a quarter: the pass decides
    key, before = id(g), len(kernels.rows._KNOWN_ROWS)
    del g, out, dense
    assert key not in kernels.rows._KNOWN_ROWS and len(kernels.rows._KNOWN_ROWS) == before - 3
