"""The thread setting, fixed work blocks, and results that do not depend on the thread count."""

from __future__ import annotations

import itertools
import os
import threading
import time

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, kernels
from mgsparse.engine.masks import keep_mask
from mgsparse.errors import HyperparameterError
from mgsparse.kernels.buffers import Buffers
from mgsparse.nn import functional as F
from mgsparse.nn.gcn import GCN
from mgsparse.sparse import gcn_norm, num_threads, set_num_threads


@pytest.fixture(autouse=True)
def restore_threads():
    before = kernels.get_num_threads()
    yield
    set_num_threads(before)


# ---------------------------------------------------------------- the setting


def test_default_is_the_environment_variable_else_the_allowed_cores(monkeypatch):
    monkeypatch.setenv("MGSPARSE_NUM_THREADS", "3")
    assert kernels.default_num_threads() == 3
    monkeypatch.delenv("MGSPARSE_NUM_THREADS")
    assert kernels.default_num_threads() == len(os.sched_getaffinity(0))
    assert set_num_threads(None) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_a_bad_environment_value_is_a_one_line_error(monkeypatch, bad):
    monkeypatch.setenv("MGSPARSE_NUM_THREADS", bad)
    with pytest.raises(HyperparameterError, match="MGSPARSE_NUM_THREADS must be a whole number"):
        kernels.default_num_threads()


def test_set_and_context_restore(monkeypatch):
    assert set_num_threads(3) == 3 and kernels.get_num_threads() == 3
    with num_threads(1) as n:
        assert n == 1 and kernels.get_num_threads() == 1
    assert kernels.get_num_threads() == 3
    with pytest.raises(HyperparameterError):
        set_num_threads(0)


@pytest.mark.parametrize("rows, sizes", [(4095, [4095]), (4097, [2049, 2048]),
                                         (9700, [2425] * 4), (12_288, [3072] * 4),
                                         (400_000, [6250] * 64)])
def test_blocks_are_about_equal_and_even_in_count(rows, sizes):
    """Two threads take equal shares: 9,700 rows were cut 4,096 + 4,096 + 1,508."""
    assert [b - a for a, b in kernels.row_blocks(rows)] == sizes


def test_blocks_cover_the_rows_once_and_ignore_the_thread_count():
    for rows in (0, 1, 4095, 4097, 1_000_003):
        blocks = kernels.row_blocks(rows)
        assert blocks[0][0] == 0 and blocks[-1][1] == rows
        assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    indptr = np.cumsum(np.r_[0, np.arange(50_000) % 7])
    cut = kernels.nnz_blocks(indptr)
    assert cut[0][0] == 0 and cut[-1][1] == 50_000 and len(cut) == 50_000 // 4096


# ---------------------------------------------------------------- exact for any thread count


def _gcn_gradients(threads: int, every: int, n: int = 20_000, f: int = 64) -> list[np.ndarray]:
    """Gradients of one dropout GCN step on a random graph with several row blocks."""
    set_num_threads(threads)
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, n, 5 * n), rng.integers(0, n, 5 * n)
    edges = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)
    adj = gcn_norm(SparseTensor.from_edge_index(edges, n))
    x = Tensor(rng.standard_normal((n, f)).astype(np.float32))
    model = GCN(f, 16, 5, rng=np.random.default_rng(1))
    loss = F.cross_entropy(model(x, adj), rng.integers(0, 5, n), np.arange(0, n, every))
    loss.backward()
    return [p.grad for p in model.parameters()]


@pytest.mark.parametrize("every", [7, 997])  # loss on 1 node in 7 / on 21 nodes (row-sparse)
def test_gcn_gradients_are_bitwise_equal_on_one_and_three_threads(every):
    one, three = _gcn_gradients(1, every), _gcn_gradients(3, every)
    assert len(one) == 4
    for a, b in zip(one, three):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- dropout masks

@pytest.mark.parametrize("op", ["relu", "leaky_relu", "elu", "dropout", "bias", "sum"])
def test_elementwise_ops_by_row_blocks_are_bitwise_equal_across_threads(op, rng):
    """Above MIN_PARALLEL_ELEMENTS the activations and dropout run by row blocks on the pool:
    forward and backward give one thread's bits on two and three (and the formula's values)."""
    x0 = rng.standard_normal((kernels.tuning.MIN_PARALLEL_ELEMENTS // 64 + 77, 64)).astype(np.float32)
    g = rng.standard_normal(x0.shape).astype(np.float32)
    apply = {"relu": lambda x: x.relu(), "leaky_relu": lambda x: x.leaky_relu(0.2),
             "elu": lambda x: x.elu(),
             "dropout": lambda x: x.dropout(0.5, True, np.random.default_rng(4)),
             "bias": lambda x: x + Tensor(x0[7]),
             "sum": lambda x: x + Tensor(x0[::-1].copy())}[op]  # two arrays of one shape
    runs = []
    for threads in (1, 2, 3):
        x = Tensor(x0, requires_grad=True)
        with num_threads(threads):
            y = apply(x)
            y.backward(g)
        runs.append((y.data, x.grad))
    for y, dx in runs[1:]:
        np.testing.assert_array_equal(y, runs[0][0])
        np.testing.assert_array_equal(dx, runs[0][1])
    want = {"relu": np.maximum(x0, 0), "leaky_relu": np.where(x0 > 0, x0, 0.2 * x0),
            "elu": np.where(x0 > 0, x0, np.expm1(np.minimum(x0, 0))), "bias": x0 + x0[7],
            "sum": x0 + x0[::-1]}.get(op)
    if want is not None:
        np.testing.assert_array_equal(runs[0][0], want)
    assert len(kernels.row_blocks(len(x0))) > 1



@pytest.mark.parametrize("p", [0.5, 0.25, 0.1, 0.3, 0.9])  # bits, bytes, words
def test_keep_rate_is_within_five_sigma_of_one_minus_p(p):
    n = 400_000
    keep = keep_mask((n,), p, np.random.default_rng(11))
    sigma = np.sqrt(p * (1 - p) / n)
    assert abs(keep.mean() - (1 - p)) < 5 * sigma
    halves = keep.reshape(2, -1).mean(axis=1)  # no drift along the array: the difference
    assert abs(halves[0] - halves[1]) < 10 * sigma  # of two half means has s.d. 2σ


def test_dropout_scales_by_one_over_the_keep_probability_and_replays_from_a_seed():
    x = Tensor(np.ones((300, 7), dtype=np.float32))
    a = x.dropout(0.3, rng=np.random.default_rng(5)).data
    b = x.dropout(0.3, rng=np.random.default_rng(5)).data
    c = x.dropout(0.3, rng=np.random.default_rng(6)).data
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert set(np.unique(a)) == {0.0, np.float32(65536 / 45875)}  # p = 0.3 drawn as 19661/65536


def test_column_sums_is_the_sum_over_rows(rng):
    g = rng.standard_normal((5000, 7)).astype(np.float32)
    np.testing.assert_allclose(kernels.column_sums(g), g.sum(axis=0, dtype=np.float64),
                               rtol=1e-4)


def test_dropout_buffers_are_reused_only_once_nothing_holds_them():
    buffers = Buffers()
    x = Tensor(np.ones((64, 8), dtype=np.float32), requires_grad=True)
    first = x.dropout(0.5, rng=np.random.default_rng(0), buffers=buffers)
    second = x.dropout(0.5, rng=np.random.default_rng(1), buffers=buffers)
    assert second.data is not first.data  # `first` is alive: a new array
    kept = first.data.copy()
    first.sum().backward()
    del first
    third = x.dropout(0.5, rng=np.random.default_rng(0), buffers=buffers)
    assert len(buffers._slots) == 2
    assert any(np.shares_memory(third.data, s.memory) for s in buffers._slots)
    np.testing.assert_array_equal(third.data, kept)  # same seed, same values, reused array
    assert not np.shares_memory(third.data, second.data)


def _sum_of_blocks(_: int) -> int:
    return sum(kernels.run_blocks(lambda a, b: a + b, [(0, 1), (1, 2), (2, 3)]))


def test_a_forked_child_gets_a_pool_of_its_own():
    """Work handed to the parent's pool in a forked child would wait forever for threads
    that were not forked: the child must build its own (the accuracy tests fork workers)."""
    import multiprocessing

    kernels.set_num_threads(2)
    assert _sum_of_blocks(0) == 9  # the parent's pool exists and has run
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=lambda: results.put(_sum_of_blocks(0)))
    child.start()
    child.join(60)
    hung = child.is_alive()
    if hung:
        child.kill()
    assert not hung and results.get(timeout=5) == 9


def test_run_blocks_gives_results_in_block_order_and_the_caller_works_beside_the_helpers():
    """Blocks go to whichever thread asks next, the calling thread among them; the results
    come back in block order whoever ran them."""
    set_num_threads(2)
    ran_on = {}

    def block(start, stop):
        ran_on[start] = threading.get_ident()
        time.sleep(0.002)  # long enough that both threads take blocks
        return start * 10 + stop
    blocks = [(i, i + 1) for i in range(48)]
    assert kernels.run_blocks(block, blocks) == [i * 10 + i + 1 for i in range(48)]
    assert threading.get_ident() in ran_on.values() and len(set(ran_on.values())) == 2


def test_a_failing_block_is_raised_once_every_helper_has_stopped():
    """The first error comes back to the caller; no block starts after it, and none is still
    running (writing into an output) when it does."""
    set_num_threads(3)
    running, started = [0], []
    lock = threading.Lock()

    def block(start, stop):
        with lock:
            running[0] += 1
            started.append(start)
        try:
            time.sleep(0.002)
            if start == 5:
                raise ValueError("block 5 failed")
        finally:
            with lock:
                running[0] -= 1
    with pytest.raises(ValueError, match="block 5 failed"):
        kernels.run_blocks(block, [(i, i + 1) for i in range(64)])
    assert running[0] == 0 and 5 in started and len(started) < 64


def test_the_fused_bias_and_the_argmax_by_blocks_are_one_calls_bits(rng):
    """`matmul(a, b, bias)` adds the bias inside each block, as a second pass over the
    product would, and `argmax_rows` cuts its rows in blocks as one call would: bit for
    bit, at 1, 2 and 3 threads."""
    a = rng.standard_normal((kernels.tuning.MIN_PARALLEL_ELEMENTS // 16 + 33, 16)).astype(np.float32)
    w = rng.standard_normal((16, 40)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    z = np.round(a @ w, 1)  # ties: the first maximum wins, as numpy's argmax
    for threads in (1, 2, 3):
        set_num_threads(threads)
        np.testing.assert_array_equal(kernels.matmul(a, w, bias), kernels.matmul(a, w) + bias)
        np.testing.assert_array_equal(kernels.argmax_rows(z), z.argmax(axis=1))
    assert len(kernels.row_blocks(len(a))) > 1


def test_blocks_that_cut_their_own_work_in_blocks_run_it_on_their_thread():
    """A block may call a blocked kernel itself: that inner call runs on the block's thread
    (the helpers are busy with the outer blocks), and nothing waits on itself."""
    set_num_threads(2)
    inner = [(j, j + 1) for j in range(8)]
    got = kernels.run_blocks(lambda s, e: sum(kernels.run_blocks(lambda a, b: a * b, inner)),
                              [(i, i + 1) for i in range(16)])
    assert got == [sum(j * (j + 1) for j in range(8))] * 16


def test_an_interrupt_in_the_calling_thread_stops_the_helpers_too(monkeypatch):
    """Ctrl-C reaching the caller between two blocks is raised as it is, once the helpers
    have finished the block they were on and started no other."""
    set_num_threads(2)
    caller, asks, started = threading.get_ident(), [0], []
    take = kernels.pool._Counter.next

    def next_block(counter):
        if threading.get_ident() == caller:
            asks[0] += 1
            if asks[0] == 3:
                raise KeyboardInterrupt
        return take(counter)
    monkeypatch.setattr(kernels.pool._Counter, "next", next_block)

    def block(start, stop):
        started.append(start)
        time.sleep(0.002)
    with pytest.raises(KeyboardInterrupt):
        kernels.run_blocks(block, [(i, i + 1) for i in range(64)])
    count = len(started)
    time.sleep(0.05)
    assert len(started) == count < 32


@pytest.mark.parametrize("rows", [1, 5, 1023, 1024, 1030, 4099])
@pytest.mark.parametrize("width", [0, 1, 7, 16, 40, 64, 100])
def test_add_rows_is_numpys_broadcast_add_bit_for_bit(rows, width, rng):
    """Tiled or not (rows under TILED_ROWS, a remainder of rows past the last tile, widths
    that do not divide TILED_WIDTH), in place or not, float32 and float64."""
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((rows, width)).astype(dtype)
        b = rng.standard_normal(width).astype(dtype)
        expected = np.add(a, b)
        out = np.full_like(a, np.nan)
        assert kernels.add_rows(a, b, out) is out
        np.testing.assert_array_equal(out, expected)
        kernels.add_rows(a, b, a)  # in place, as a product's bias is added
        np.testing.assert_array_equal(a, expected)


def test_add_rows_takes_the_plain_call_for_a_strided_array(rng):
    base = rng.standard_normal((3000, 32)).astype(np.float32)
    a, b = base[:, ::2], rng.standard_normal(16).astype(np.float32)  # not C-contiguous
    out = np.empty((3000, 16), np.float32)
    np.testing.assert_array_equal(kernels.add_rows(a, b, out), a + b)


def test_add_rows_takes_the_plain_call_for_other_shapes(rng):
    """A 1-d product plus a scalar-like bias, a 3-d array: numpy's broadcast add, unchanged."""
    for a, b in ((rng.standard_normal(5), rng.standard_normal(1)),
                 (rng.standard_normal((4, 3, 2)), rng.standard_normal(2))):
        out = np.empty_like(a)
        np.testing.assert_array_equal(kernels.add_rows(a, b, out), a + b)


