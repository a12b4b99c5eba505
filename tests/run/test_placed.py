"""`PlacedGraph`: a graph's operands placed once (sparse or dense by density, never a dense
array past 80% of the budget), the whole-graph operand built when first read, receptive fields
kept until an operand changes, and the dense -> sparse switch the memory budget pulls."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data import karate_club
from mgsparse.engine import Tensor
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.run.placed import UNBUILT, PlacedGraph, place
from mgsparse.sparse import SparseTensor


@pytest.fixture
def karate():
    return karate_club()


def test_place_keeps_sparse_at_or_below_the_threshold():
    m = sp.csr_matrix(np.diag([1.0, 2.0, 0.0, 4.0]))  # density 3/16
    sparse, why = place(m, 0.1875, np.float32)
    assert isinstance(sparse, SparseTensor) and sparse.dtype == np.float32
    assert why == "sparse (density 18.75% <= threshold 18.75%)"
    dense, why = place(m, 0.1, np.float64)
    assert isinstance(dense, Tensor) and dense.data.dtype == np.float64
    np.testing.assert_array_equal(dense.data, m.toarray())
    assert why == "dense (density 18.75% > threshold 10.00%)"


def test_place_never_builds_a_dense_array_larger_than_the_budget():
    """The 80% rule is the budget's, applied once to the estimated step; placing only refuses
    to allocate what no placement within the budget could hold."""
    m = sp.csr_matrix(np.diag([1.0, 2.0, 0.0, 4.0]))  # dense: 64 bytes in float32
    kept, why = place(m, 0.1, np.float32, budget=63)
    assert isinstance(kept, SparseTensor)
    assert why == "sparse (dense would need 6.10e-05 MB of a 6.01e-05 MB budget)"
    dense, _ = place(m, 0.1, np.float32, budget=64)  # 64 of 64: built, the rule decides
    assert isinstance(dense, Tensor)


def test_the_whole_graph_operand_is_built_when_first_read(karate):
    placed = PlacedGraph.from_graph(karate, "norm_adj", 0.1, np.float64)
    assert set(placed.operands()) == {"features"} and "adjacency" not in placed.placement
    want = normalized_adjacency(karate.edge_index, 34, dtype=np.float64)
    np.testing.assert_allclose(placed.operand.data, want.to_scipy("csr").toarray(), rtol=1e-12)
    assert placed.placement["adjacency"].startswith("dense (density 16.4")
    assert placed.densities["adjacency"] == pytest.approx((156 + 34) / 34**2)
    assert placed.operands()["adjacency"] is placed.operand  # built once


def test_an_operand_deferred_or_refused_is_not_held(karate):
    placed = PlacedGraph.from_graph(karate, "norm_adj", 0.1)
    placed.defer_operand("sampled blocks", operand=None)
    assert placed.operand is None and set(placed.operands()) == {"features"}
    assert placed.placement["adjacency"] == "sampled blocks"
    assert placed.densities["adjacency"] == pytest.approx(156 / 34**2)
    later = PlacedGraph.from_graph(karate, "edge_index", 0.1)
    later.defer_operand("built on demand")
    assert later._operand is UNBUILT and set(later.operands()) == {"features"}
    assert later.operand is later.edge_index  # still there when asked for
    assert later.placement["adjacency"] == "edge list (156 edges)"


def test_the_switch_turns_the_largest_dense_operand_sparse_and_drops_the_fields(karate):
    placed = PlacedGraph.from_graph(karate, "norm_adj", 0.0)  # threshold 0: all dense
    _ = placed.operand
    assert placed.dense_operands() == ["features", "adjacency"]  # 34x34 each: a fixed order
    field = placed.field("training", np.array([0, 33]), layers=2)
    assert placed.field("training", np.array([0, 33]), layers=2) is field  # kept
    assert placed.placement["training rows"].startswith("receptive field: 2 <- ")
    dense = placed.features.data.copy()
    placed.make_sparse("features", "sparse (because)")
    assert isinstance(placed.features, SparseTensor) and placed.dense_operands() == ["adjacency"]
    np.testing.assert_array_equal(placed.features.to_scipy("csr").toarray(), dense)
    assert placed.placement["features"] == "sparse (because)"
    assert placed.field("training", np.array([0, 33]), layers=2) is not field  # re-gathered


def test_with_operands_is_a_copy_that_leaves_the_original_as_it_was(karate):
    placed = PlacedGraph.from_graph(karate, "norm_adj", 0.1)
    adjacency = placed.operand
    other = placed.with_operands(Tensor(np.zeros((34, 34), np.float32)), None)
    other.placement["extra"] = "x"
    assert placed.operand is adjacency and placed.features is not other.features
    assert "extra" not in placed.placement and set(other.operands()) == {"features"}


def test_held_operands_are_never_switched():
    x = np.ones((3, 2), np.float32)
    held = PlacedGraph.held(Tensor(x), None, {"features": "dense (given)"}, {"features": 1.0})
    assert held.dense_operands() == [] and held.operand is None
    assert held.num_nodes == 3 and held.num_features == 2
    assert repr(held) == "PlacedGraph(3x2 features, operands ['features'])"
