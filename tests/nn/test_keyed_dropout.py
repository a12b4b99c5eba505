"""Keyed dropout: masks that depend on (key, node id, feature) only — so any split of the rows
draws the same masks — and models that use them by default."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.gcn import GCN
from mgsparse.nn.keyed_dropout import keep_scale, keyed_dropout, stream_key


def ones(n: int, f: int) -> Tensor:
    return Tensor(np.ones((n, f), dtype=np.float32))


def test_rows_keep_their_mask_under_any_split():
    key = stream_key(7, 3, 1)
    full = keyed_dropout(ones(50, 6), 0.5, True, key).data
    ids = np.array([41, 3, 17, 0, 49])
    part = keyed_dropout(ones(5, 6), 0.5, True, key, node_ids=ids).data
    assert np.array_equal(part, full[ids])


def test_sparse_values_get_the_dense_mask_at_their_entries(rng):
    dense = (rng.random((30, 8)) < 0.3).astype(np.float32)
    A = SparseTensor.from_dense(dense)
    key = stream_key(1, 0, 0)
    dropped = keyed_dropout(A, 0.4, True, key).to_dense().data
    assert np.array_equal(dropped, dense * keyed_dropout(ones(30, 8), 0.4, True, key).data)


def test_keep_rate_and_scaling():
    scale = keep_scale(stream_key(0, 0, 0), np.arange(2000), 50, 0.3, np.float32)
    assert set(np.unique(scale)) == {np.float32(0), np.float32(65536 / 45875)}  # p: 19661/65536
    assert scale.mean() == pytest.approx(1.0, abs=0.01)  # inverted dropout keeps the mean
    assert (scale == 0).mean() == pytest.approx(0.3, abs=0.01)


def test_blocks_of_rows_hash_like_one_block():
    """Both paths hash ~1M entries at a time; 3M entries in several blocks must give the
    same masks by the dense and the per-entry path."""
    ids, width, key = np.arange(3000), 1000, stream_key(5, 1, 2)
    dense = keep_scale(key, ids, width, 0.5, np.float32)
    rows, cols = np.divmod(np.arange(ids.size * width), width)
    entries = keep_scale(key, ids, width, 0.5, np.float32, entries=(rows, cols))
    assert np.array_equal(dense.ravel(), entries)


def test_keys_differ_by_step_and_layer():
    masks = [keyed_dropout(ones(40, 10), 0.5, True, stream_key(0, s, layer)).data
             for s, layer in [(0, 0), (1, 0), (0, 1)]]
    assert not np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[0], masks[2])


def test_gradient_is_the_mask():
    x = Tensor(np.full((6, 4), 2.0), requires_grad=True)
    y = keyed_dropout(x, 0.5, True, stream_key(1, 2, 3))
    y.sum().backward()
    assert np.array_equal(x.grad, y.data / 2.0)


def test_eval_and_zero_p_are_identity_and_p_is_checked():
    x = ones(3, 3)
    assert keyed_dropout(x, 0.5, False, 1) is x and keyed_dropout(x, 0.0, True, 1) is x
    with pytest.raises(HyperparameterError, match=r"must be in \[0, 1\), got 1"):
        keyed_dropout(x, 1.0, True, 1)


def test_gcn_on_a_row_subset_drops_the_rows_of_the_full_model():
    """The model-level contract distributed training relies on: the same seed, the same
    step, node_ids set → the dropped input of a subset is the subset of the dropped input."""
    x, ids = Tensor(np.ones((20, 5), dtype=np.float32)), np.array([2, 19, 7])
    seen = {}
    for name, rows in (("full", None), ("part", ids)):
        model = GCN(5, 4, 3, rng=np.random.default_rng(0))
        model.keyed_masks, model.node_ids = True, rows
        model.convs[0].forward = lambda h, adj, edge_weight=None, n=name: seen.setdefault(
            n, h.data) @ np.zeros((5, 3), np.float32)
        model.stack(model.convs[:1], x if rows is None else Tensor(x.data[rows]), None)
    assert np.array_equal(seen["part"], seen["full"][ids])


def test_generator_dropout_stays_available():
    model = GCN(5, 4, 3, rng=np.random.default_rng(0))
    model.keyed_masks = False
    out = model._dropout(ones(10, 5), 0, 0)
    assert model.dropout_key is None and np.isin(out.data, [0, 2]).all()


def test_keyed_dropout_scales_by_the_drawn_keep_probability_near_p_one():
    """E[keep·scale] = 1: the scale is 1/P(keep) for the 16-bit threshold, not 1/(1-p)."""
    scale = keep_scale(stream_key(0, 0, 0), np.arange(64), 16, 0.99, np.float64)
    assert set(np.unique(scale)) == {0.0, 65536 / 655}  # t = round(0.99·65536) = 64881
