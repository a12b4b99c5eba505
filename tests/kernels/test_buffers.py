"""The reused-buffer pool: memory lent again only once free, and bounded when every batch of
a sampled run asks for a new shape."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.engine import Function, Tensor
from mgsparse.kernels.buffers import Buffers, output_array
from mgsparse.kernels.tuning import GROWTH
from mgsparse.run import make_task
from mgsparse.run.task import shuffle_generator


def test_a_free_buffer_is_lent_again_and_a_held_one_never():
    pool = Buffers()
    a = pool.take((100, 8), np.float64)
    assert a.shape == (100, 8) and a.dtype == np.float64 and a.flags.c_contiguous
    b = pool.take((100, 8), np.float64)  # `a` is alive: new memory
    assert not np.shares_memory(a, b) and pool.nbytes == 2 * 6400
    view = a[3:5]
    del a
    c = pool.take((100, 8), np.float64)  # a view of `a` still reads it: not lent
    assert not np.shares_memory(c, view) and not np.shares_memory(c, b)
    addresses = {t.__array_interface__["data"][0] for t in (view.base, b, c)}
    del b, c, view
    d = pool.take((100, 8), np.float64)
    assert d.__array_interface__["data"][0] in addresses and pool.nbytes == 3 * 6400


def test_any_shape_that_fits_reuses_the_smallest_free_buffer_and_a_larger_one_grows_it():
    pool = Buffers()
    big, small = pool.take((1000,), np.float32), pool.take((10,), np.float32)
    del big, small
    x = pool.take((7, 3), np.float32)  # 84 bytes: the 40-byte buffer is too small
    assert x.nbytes == 84 and pool.nbytes == 4000 + 40
    y = pool.take((2, 5), np.float32)  # fits the 40-byte one
    assert pool.nbytes == 4000 + 40 and not np.shares_memory(x, y)
    del x, y
    z = pool.take((2000,), np.float32)  # too large for both: the 4000-byte one grows
    assert pool.nbytes == 8000 + 40 and len(pool._slots) == 2
    del z
    pool.take((1700,), np.float64)  # 13,600 bytes: ≥ GROWTH × 8000 and ≥ the request
    assert pool.nbytes == max(13600, int(8000 * GROWTH)) + 40


def test_the_pool_holds_at_most_max_arrays_however_many_outputs_live():
    pool = Buffers(max_arrays=2)
    live = [pool.take((4, 4), np.float32) for _ in range(5)]
    assert len(pool._slots) == 2 and pool.nbytes == 2 * 64
    assert all(not np.shares_memory(a, b) for i, a in enumerate(live) for b in live[i + 1:])


def test_a_sampled_run_holds_flat_memory_however_many_batch_shapes_it_sees():
    """Each sampled batch has its own block sizes, so dropout asks for a new shape every step:
    a pool keyed by shape grew without bound (here 18 → 44 MB from epoch 5 to 30)."""
    config = config_from_dict({
        "dataset": {"name": "synthetic", "split": "random", "num_nodes": 3000,
                    "num_train_per_class": 150, "num_val": 100, "num_test": 100},
        "model": {"kind": "sage", "dropout": 0.5}, "train": {"seed": 0, "batch_size": 64},
        "sampler": {"fanouts": [5, 5]}, "monitor": {"memory": False}})
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    rng, held = shuffle_generator(0), []
    for _ in range(30):
        for batch in task.batches(model, rng):
            loss, _ = batch()
            loss.backward()
        held.append(model.buffers.nbytes)
    assert held[4] > 0  # dropout drew from the pool
    assert held[-1] <= 1.1 * held[4], [h // 1000 for h in held]


class _SavesItsOutput(Function):
    """y = x·1 into a pooled buffer, saved for the backward: a context is its only holder."""

    @staticmethod
    def forward(ctx, x, pool):
        out = output_array(pool, x)
        np.multiply(x, 1.0, out=out)
        ctx.save_for_backward(out)
        return out * 2.0  # the output is a new array: only the context holds `out`

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, None


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture(params=["exact", "one fewer"])
def refcounts(request, monkeypatch):
    """Also under an interpreter that counts one reference fewer (3.14 borrows stack
    references): the pool must not read counts at all."""
    if request.param == "one fewer":
        real = sys.getrefcount
        # - 2: the wrapper's own parameter is one reference more
        monkeypatch.setattr(sys, "getrefcount", lambda a: real(a) - 2)
    return request.param


def test_a_buffer_held_by_a_tensor_a_context_or_a_view_is_never_lent_again(refcounts):
    pool = Buffers()
    x = Tensor(np.ones((50, 4)), requires_grad=True)
    held = x.dropout(0.5, rng=np.random.default_rng(0), buffers=pool)  # a Tensor's .data
    y = _SavesItsOutput.apply(x, pool)  # a saved context's array
    view = pool.take((50, 4), np.float64).T[1:]  # only a view of the lent array survives
    assert pool.lent == 3 and pool.nbytes == 3 * 1600
    for _ in range(3):
        fresh = pool.take((50, 4), np.float64)
        assert not any(np.shares_memory(fresh, a) for a in (held.data, y._ctx.saved_tensors[0],
                                                            view))
        del fresh  # freed at once: the next take lends it again, never one of the three
    assert pool.nbytes == 4 * 1600 and pool.lent == 3


def test_a_buffer_is_lent_again_once_its_tensor_context_and_views_are_gone(refcounts):
    pool = Buffers()
    x = Tensor(np.ones((50, 4)), requires_grad=True)
    held = x.dropout(0.5, rng=np.random.default_rng(0), buffers=pool)
    y = _SavesItsOutput.apply(x, pool)
    view = pool.take((50, 4), np.float64).T[1:]
    addresses = {_address(held.data), _address(y._ctx.saved_tensors[0]), _address(view.base)}
    y.sum().backward()  # frees the context: its buffer is free
    assert pool.lent == 2
    del held, view
    assert pool.lent == 0
    again = [pool.take((50, 4), np.float64) for _ in range(3)]
    assert {_address(a) for a in again} == addresses and pool.nbytes == 3 * 1600
