"""Readouts (global add/mean/max pool): PyG's numbers on a batch with an empty graph, one
graph when `batch` is None, their gradients, and the lookup by name."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import global_add_pool, global_max_pool, global_mean_pool, global_pool
from mgsparse.nn.pool import READOUTS
from mgsparse.sparse import Segments

# Three graphs of 2, 0 and 3 nodes; 2 features.
X = np.array([[1.0, -2.0],
              [4.0, 0.5],
              [0.0, 3.0],
              [-1.0, 1.0],
              [2.0, -5.0]])
BATCH = np.array([0, 0, 2, 2, 2])


def leaf(x=X) -> Tensor:
    return Tensor(np.array(x, dtype=np.float64), requires_grad=True)


def reference(reduce: str) -> np.ndarray:
    """Graph by graph in numpy, an empty graph reading 0."""
    rows = [X[BATCH == b] for b in range(3)]
    fn = {"sum": np.sum, "mean": np.mean, "max": np.max}[reduce]
    return np.stack([fn(r, axis=0) if len(r) else np.zeros(2) for r in rows])


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_each_readout_matches_the_graph_by_graph_reference(reduce):
    out = READOUTS[reduce](leaf(), BATCH, 3)
    np.testing.assert_allclose(out.data, reference(reduce), atol=1e-15)
    assert not np.isnan(out.data).any() and out.shape == (3, 2)


def test_gradients_of_the_readouts():
    g = np.array([[1.0, 2.0], [9.0, 9.0], [3.0, 4.0]])  # graph 1 is empty: its 9s are lost
    grads = {}
    for name, fn in READOUTS.items():
        x = leaf()
        fn(x, BATCH, 3).backward(g)
        grads[name] = x.grad
    np.testing.assert_array_equal(grads["sum"], g[BATCH])
    np.testing.assert_allclose(grads["mean"], g[BATCH] / np.array([2, 2, 3, 3, 3])[:, None])
    np.testing.assert_array_equal(grads["max"], [[0, 0], [1, 2], [0, 4], [0, 0], [3, 0]])


@pytest.mark.parametrize("fn", list(READOUTS.values()))
def test_readouts_pass_a_float64_gradcheck(fn):
    x = leaf(np.random.default_rng(0).standard_normal((5, 2)))
    result = gradcheck(lambda x: fn(x, BATCH, 4), [x])
    assert result.passed and result.max_abs_err < 1e-8


def test_no_batch_means_one_graph_of_every_row():
    np.testing.assert_allclose(global_add_pool(leaf()).data, [X.sum(axis=0)])
    np.testing.assert_allclose(global_mean_pool(leaf()).data, [X.mean(axis=0)])
    np.testing.assert_allclose(global_max_pool(leaf()).data, [X.max(axis=0)])


def test_num_graphs_defaults_to_the_largest_id_plus_one_and_can_add_empty_graphs():
    assert global_add_pool(leaf(), BATCH).shape == (3, 2)
    out = global_mean_pool(leaf(), BATCH, 5)
    assert out.shape == (5, 2) and not out.data[3:].any()


def test_a_prebuilt_segments_is_reused_by_every_readout():
    seg = Segments(BATCH, 5, 3)
    for name, fn in READOUTS.items():
        np.testing.assert_allclose(fn(leaf(), seg).data, reference(name), atol=1e-15)


def test_global_pool_by_name_and_its_error():
    np.testing.assert_array_equal(global_pool(leaf(), BATCH, 3, "max").data, reference("max"))
    np.testing.assert_array_equal(global_pool(leaf(), BATCH, 3).data, reference("sum"))
    with pytest.raises(HyperparameterError, match=r"unknown readout 'min'; known: sum, mean, max"):
        global_pool(leaf(), BATCH, 3, "min")


def test_a_batch_that_does_not_fit_is_a_one_line_error():
    with pytest.raises(ShapeError, match=r"segment_max: batch has 4 ids but x has 5 rows"):
        global_max_pool(leaf(), BATCH[:4], 3)
    with pytest.raises(ShapeError, match=r"segment_mean: graph id 2 is outside \[0, 2\)"):
        global_mean_pool(leaf(), BATCH, 2)
