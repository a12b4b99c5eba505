"""The reused-buffer pool: memory lent again only once free, and bounded when every batch of
a sampled run asks for a new shape."""

from __future__ import annotations

import numpy as np

from mgsparse.config import config_from_dict
from mgsparse.kernels.buffers import Buffers
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
    assert pool.nbytes == 8000 + 40 and len(pool._arrays) == 2
    del z
    pool.take((1700,), np.float64)  # 13,600 bytes: ≥ GROWTH × 8000 and ≥ the request
    assert pool.nbytes == max(13600, int(8000 * GROWTH)) + 40


def test_the_pool_holds_at_most_max_arrays_however_many_outputs_live():
    pool = Buffers(max_arrays=2)
    live = [pool.take((4, 4), np.float32) for _ in range(5)]
    assert len(pool._arrays) == 2 and pool.nbytes == 2 * 64
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
