"""BLAS threads through ctypes: every OpenBLAS the process loaded takes the setting."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from mgsparse import kernels
from mgsparse.engine import Function, Tensor
from mgsparse.engine.tape import Tape, recording
from mgsparse.kernels import blas
from mgsparse.sparse import SparseTensor, spmm


def test_blas_is_set_to_one_thread_where_numpy_brings_openblas():
    if not blas._openblas_libraries():
        pytest.skip("numpy is not linked to OpenBLAS here")
    before = blas.blas_threads()
    try:
        assert blas.limit_blas_threads(1) >= 1 and set(blas.blas_threads()) == {1}
    finally:
        for (_, put), n in zip(blas._openblas_libraries(), before):
            put(n)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux /proc")
def test_the_libraries_are_scanned_again_only_after_more_modules_load(monkeypatch):
    """/proc/self/maps is read once per count of loaded modules: a new OpenBLAS comes only
    with an extension module's import (scipy.linalg's, after numpy's)."""
    reads = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        reads.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(blas, "_found", (-1, []))
    monkeypatch.setattr("builtins.open", counting_open)
    first = blas._openblas_libraries()
    assert blas._openblas_libraries() is first and reads == ["/proc/self/maps"]
    monkeypatch.setitem(sys.modules, "a_module_loaded_since", types.ModuleType("loaded"))
    assert len(blas._openblas_libraries()) == len(first)
    assert reads == ["/proc/self/maps"] * 2


@pytest.fixture
def two_blas_threads():
    """Every loaded OpenBLAS set to 2 threads as a caller would (ctypes), restored after."""
    libs = blas._openblas_libraries()
    if not libs:
        pytest.skip("numpy is not linked to OpenBLAS here")
    before = blas.blas_threads()
    for _, put in libs:
        put(2)
    yield libs
    for (_, put), n in zip(libs, before):
        put(n)


def test_the_callers_blas_threads_are_the_same_after_products_on_the_pool(two_blas_threads):
    """Before: one `Tensor @ Tensor` left every OpenBLAS in the process on 1 thread."""
    seen = []

    def block(s, e):  # what a block's BLAS call runs on
        seen.append(blas.blas_threads())
        return np.ones((4, 4)) @ np.ones((4, 4))

    rng = np.random.default_rng(0)
    a = Tensor(rng.standard_normal((20000, 64)).astype(np.float32))
    w = Tensor(rng.standard_normal((64, 16)).astype(np.float32))
    A = SparseTensor.from_edge_index(rng.integers(0, 20000, (2, 100000)), 20000)
    with kernels.num_threads(2):
        assert blas.blas_threads() == [2] * len(two_blas_threads)
        assert a.size * 16 >= kernels.tuning.MIN_PARALLEL_WORK  # the pooled path
        y = a @ w
        z = spmm(A, y)
        kernels.run_blocks(block, [(0, 1), (1, 2)])
        assert blas.blas_threads() == [2] * len(two_blas_threads)
    assert blas.blas_threads() == [2] * len(two_blas_threads)
    assert seen == [[1] * len(two_blas_threads)] * 2  # inside a parallel run: one thread
    np.testing.assert_allclose(y.data, a.data @ w.data, rtol=1e-5, atol=1e-5)
    assert z.shape == (20000, 16)


class SeesBlas(Function):
    """y = 2x, recording the BLAS thread counts its forward and backward run at."""

    seen: list = []  # noqa: RUF012

    @staticmethod
    def forward(ctx, x):
        SeesBlas.seen.append(("forward", blas.blas_threads()))
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        SeesBlas.seen.append(("backward", blas.blas_threads()))
        return g * 2.0


@pytest.mark.parametrize("threads", [1, 2])
def test_ops_backward_and_tapes_run_blas_on_one_thread_and_give_the_count_back(
        two_blas_threads, threads):
    """The same bits at any pool size and from a tape as eagerly: mgsparse's own BLAS calls
    run on one thread whatever the caller set, and the caller's count is back after each."""
    ones = [1] * len(two_blas_threads)
    SeesBlas.seen = []
    x = Tensor(np.ones(5), requires_grad=True)
    with kernels.num_threads(threads):
        with recording() as ops:
            loss = SeesBlas.apply(x).sum()
        assert blas.blas_threads() == [2] * len(ones)
        tape = Tape.of(ops, loss, backward=True)  # before the backward frees the graph
        loss.backward()
        assert blas.blas_threads() == [2] * len(ones)
        tape.run()
    assert blas.blas_threads() == [2] * len(ones)
    assert SeesBlas.seen == [("forward", ones), ("backward", ones)] * 2
    np.testing.assert_array_equal(x.grad, np.full(5, 4.0))  # two backwards added
