"""Segment reductions: numbers by hand, the max's tie rule and empty segments, any row order,
the pooling matrix, and one-line errors. (Their gradients against all three oracles at every
size run from the registry, in tests/checks.)"""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse import (
    Segments,
    SparseTensor,
    pooling_matrix,
    segment_max,
    segment_mean,
    segment_reduce,
    segment_sum,
)

# Five rows in four segments: segment 0 = rows 0, 1; segment 1 empty; segment 2 = rows 2-4;
# segment 3 empty (the last one). Row 1 ties row 0 in feature 1, row 4 ties row 2 in feature 0.
X = np.array([[1.0, 5.0],
              [3.0, 5.0],
              [2.0, 0.0],
              [-1.0, -4.0],
              [2.0, -3.0]])
BATCH = np.array([0, 0, 2, 2, 2])
B = 4


def leaf(x=X) -> Tensor:
    return Tensor(np.array(x, dtype=np.float64), requires_grad=True)


def test_sum_mean_and_max_by_hand():
    np.testing.assert_array_equal(segment_sum(leaf(), BATCH, B).data,
                                  [[4, 10], [0, 0], [3, -7], [0, 0]])
    np.testing.assert_allclose(segment_mean(leaf(), BATCH, B).data,
                               [[2, 5], [0, 0], [1, -7 / 3], [0, 0]], atol=1e-15)
    np.testing.assert_array_equal(segment_max(leaf(), BATCH, B).data,
                                  [[3, 5], [0, 0], [2, 0], [0, 0]])


def test_max_gradient_goes_to_the_first_arg_max_row_only():
    x = leaf()
    g = np.arange(1.0, 9.0).reshape(4, 2)  # rows 1 and 3 (the empty segments) must be lost
    segment_max(x, BATCH, B).backward(g)
    np.testing.assert_array_equal(x.grad, [[0, 2],    # feature 1: rows 0 and 1 tie, row 0
                                           [1, 0],    # feature 0: 3 is segment 0's max
                                           [5, 6],    # feature 0: rows 2 and 4 tie, row 2
                                           [0, 0],
                                           [0, 0]])
    assert x.grad.sum() == g[[0, 2]].sum()  # every non-empty segment's gradient, once


@pytest.mark.parametrize("fn", [segment_sum, segment_mean, segment_max])
def test_empty_segments_give_zero_and_no_gradient(fn):
    x = leaf(np.ones((2, 3)))
    out = fn(x, np.array([1, 1]), 3)
    np.testing.assert_array_equal(out.data, [[0, 0, 0], [2 if fn is segment_sum else 1] * 3,
                                             [0, 0, 0]])
    out.backward(np.array([[5.0] * 3, [1.0] * 3, [7.0] * 3]))
    assert x.grad.max() <= 1.0  # nothing of the empty segments' 5 and 7 arrives


def test_an_all_minus_infinity_segment_next_to_empty_ones_is_never_nan():
    x = leaf(np.full((2, 3), -np.inf))
    out = segment_max(x, np.array([1, 1]), 3)
    assert np.array_equal(out.data[[0, 2]], np.zeros((2, 3)))
    assert np.all(out.data[1] == -np.inf)  # the true max of that segment
    out.backward(np.ones((3, 3)))
    assert np.array_equal(x.grad, [[1, 1, 1], [0, 0, 0]])  # tie of −∞: the first row


@pytest.mark.parametrize("fn", [segment_sum, segment_mean, segment_max])
def test_no_rows_at_all(fn):
    x = leaf(np.zeros((0, 3)))
    out = fn(x, np.zeros(0, dtype=np.int64), 2)
    assert out.shape == (2, 3) and not out.data.any()
    out.backward(np.ones((2, 3)))
    assert x.grad.shape == (0, 3)


@pytest.mark.parametrize("fn", [segment_sum, segment_mean, segment_max])
def test_any_row_order_gives_the_same_result(fn):
    """Rows permuted with their ids: the same output, the gradient permuted alike (on data
    without ties: a tie goes to the row that comes first in x as given)."""
    rng = np.random.default_rng(0)
    perm, data = np.array([3, 0, 4, 2, 1]), rng.standard_normal((5, 2))
    x, xs = leaf(data), leaf(data[perm])
    g = rng.standard_normal((B, 2))
    fn(x, BATCH, B).backward(g)
    out = fn(xs, BATCH[perm], B)
    out.backward(g)
    np.testing.assert_allclose(out.data, fn(leaf(data), BATCH, B).data, atol=1e-15)
    np.testing.assert_allclose(xs.grad, x.grad[perm], atol=1e-15)


def test_a_tie_in_shuffled_rows_goes_to_the_row_first_in_x():
    x = leaf([[2.0], [7.0], [2.0]])
    segment_max(x, np.array([1, 0, 1])).backward(np.array([[1.0], [5.0]]))
    np.testing.assert_array_equal(x.grad, [[5], [1], [0]])


def test_vectors_and_float32_keep_their_shape_and_dtype():
    x = Tensor(np.array([1.0, 4.0, 2.0], dtype=np.float32), requires_grad=True)
    out = segment_max(x, np.array([0, 1, 1]))
    assert out.shape == (2,) and out.dtype == np.float32
    np.testing.assert_array_equal(out.data, [1, 4])
    out.backward(np.array([1.0, 2.0], dtype=np.float32))
    np.testing.assert_array_equal(x.grad, [1, 2, 0])
    assert segment_mean(x, np.array([0, 1, 1])).dtype == np.float32


def test_nan_propagates_as_torch_without_a_crash():
    x = leaf([[1.0], [np.nan], [2.0]])
    out = segment_max(x, np.array([0, 0, 0]))
    assert np.isnan(out.data[0, 0])
    out.backward(np.ones((1, 1)))
    assert x.grad.sum() == 1.0  # the gradient still goes to exactly one row


def test_pooling_matrix_is_the_one_hot_of_the_batch():
    P = pooling_matrix(BATCH, B, dtype=np.float64)
    want = np.zeros((B, 5))
    want[BATCH, np.arange(5)] = 1
    np.testing.assert_array_equal(P.to_dense(), want)
    assert P.is_coalesced() and not P.requires_grad
    M = pooling_matrix(BATCH, B, "mean", np.float64).to_dense()
    np.testing.assert_allclose(M, want / np.maximum(want.sum(axis=1, keepdims=True), 1))
    assert not pooling_matrix(BATCH[::-1], B).is_coalesced()  # unsorted: not canonical


def test_segments_are_built_once_and_reused():
    seg = Segments(BATCH, 5, B)
    assert seg.pooling("sum", np.float64) is seg.pooling("sum", np.float64)
    np.testing.assert_array_equal(segment_sum(leaf(), seg).data,
                                  segment_sum(leaf(), BATCH, B).data)
    assert repr(seg) == "Segments(rows=5, segments=4, empty=2)"
    assert seg.order is None and list(seg.starts) == [0, 2]


def test_segment_reduce_by_name():
    for name, fn in (("sum", segment_sum), ("mean", segment_mean), ("max", segment_max)):
        np.testing.assert_array_equal(segment_reduce(leaf(), BATCH, B, name).data,
                                      fn(leaf(), BATCH, B).data)
    with pytest.raises(ShapeError, match=r"unknown reduction 'min'; known: sum, mean, max"):
        segment_reduce(leaf(), BATCH, B, "min")


def test_num_segments_defaults_to_the_largest_id_plus_one():
    assert segment_sum(leaf(), BATCH).shape == (3, 2)


@pytest.mark.parametrize("batch, num, message", [
    (np.array([0, 0, 2]), B, r"segment_sum: batch has 3 ids but x has 5 rows"),
    (np.array([0, 0, 2, 2, 4]), B, (r"segment_sum: graph id 4 is outside \[0, 4\) "
                                    r"\(num_graphs=4\)")),
    (np.array([0, -1, 2, 2, 2]), B, r"graph id -1 is outside \[0, 4\)"),
    (np.array([0.0, 0, 2, 2, 2]), B, r"graph ids, got float64 \(5,\)"),
    (np.zeros((5, 1), dtype=np.int64), B, r"batch must be a 1-d integer array"),
])
def test_bad_batches_are_one_line_errors(batch, num, message):
    with pytest.raises(ShapeError, match=message):
        segment_sum(leaf(), batch, num)


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(ShapeError, match=r"need x of shape \(N,\) or \(N, F\), got \(5, 2, 1\)"):
        segment_max(leaf(X[:, :, None]), BATCH, B)
    with pytest.raises(ShapeError, match="pool dense rows; got a SparseTensor"):
        segment_sum(SparseTensor.from_dense(X), BATCH, B)
    with pytest.raises(ShapeError, match="the segments cover 5 rows but x has 2"):
        segment_max(leaf(X[:2]), Segments(BATCH, 5, B))
    with pytest.raises(ShapeError, match="num_graphs=3 but the segments hold 4"):
        segment_max(leaf(), Segments(BATCH, 5, B), 3)
    with pytest.raises(ShapeError, match="reduce must be 'sum' or 'mean', got 'max'"):
        pooling_matrix(BATCH, B, "max")


def test_a_large_batch_runs_vectorised():
    """100,000 rows in 10,000 graphs: no per-segment loop would finish this in a blink."""
    rng = np.random.default_rng(0)
    batch = np.sort(rng.integers(0, 10_000, 100_000))
    x = Tensor(rng.standard_normal((100_000, 8)), requires_grad=True)
    out = segment_max(x, batch, 10_000)
    out.backward(np.ones(out.shape))
    counts = np.bincount(batch, minlength=10_000)
    assert x.grad.sum() == 8 * (counts > 0).sum()
    first = batch == batch[0]
    np.testing.assert_array_equal(out.data[batch[0]], x.data[first].max(axis=0))
