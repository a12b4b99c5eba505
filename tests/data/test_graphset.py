"""`GraphSet`: the invariants checked on construction, `subset` against a loop over graphs,
`info` and the repr."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mgsparse.data.graph import undirected_edges
from mgsparse.data.graphset import GraphSet, ranges
from mgsparse.errors import DataError


def make_set(sizes=(3, 0, 2, 4), seed=0) -> GraphSet:
    """Graphs of the given node counts (one empty), each a path, features = global node id."""
    node_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    src = np.concatenate([np.arange(lo, hi - 1) for lo, hi in itertools.pairwise(node_ptr)])
    edge_index = undirected_edges(src, src + 1, int(node_ptr[-1]))
    edge_ptr = np.searchsorted(edge_index[0], node_ptr).astype(np.int64)
    x = np.arange(node_ptr[-1], dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    y = np.random.default_rng(seed).integers(0, 3, len(sizes))
    return GraphSet(x=x, edge_index=edge_index, node_ptr=node_ptr, edge_ptr=edge_ptr, y=y,
                    num_classes=3, name="paths")


def loop_subset(gs: GraphSet, idx) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The oracle: graph by graph, each graph's edges shifted to its new first node."""
    xs, edges = [np.empty((0, gs.num_features), np.float32)], [np.empty((2, 0), np.int64)]
    sizes, start = [], 0
    for g in idx:
        lo, hi = gs.node_ptr[g], gs.node_ptr[g + 1]
        xs.append(gs.x[lo:hi])
        edges.append(gs.edge_index[:, gs.edge_ptr[g]:gs.edge_ptr[g + 1]] - lo + start)
        sizes.append(int(hi - lo))
        start += hi - lo
    return np.concatenate(xs), np.concatenate(edges, axis=1), sizes


def test_sizes_and_pointers():
    gs = make_set()
    assert (len(gs), gs.num_graphs, gs.num_nodes, gs.num_edges) == (4, 4, 9, 2 * (2 + 1 + 3))
    assert gs.nodes_per_graph.tolist() == [3, 0, 2, 4]
    assert gs.edges_per_graph.tolist() == [4, 0, 2, 6]
    assert gs.graph_of_node().tolist() == [0, 0, 0, 2, 2, 3, 3, 3, 3]


@pytest.mark.parametrize("idx", [[2, 0], [3, 1, 3], [1], [], [-1, 0]])
def test_subset_matches_a_loop_over_graphs(idx):
    gs = make_set()
    sub = gs.subset(idx)
    x, edges, sizes = loop_subset(gs, [i % 4 for i in idx])
    np.testing.assert_array_equal(sub.x, x)
    np.testing.assert_array_equal(sub.edge_index, edges)
    assert sub.nodes_per_graph.tolist() == sizes
    assert sub.y.tolist() == gs.y[[i % 4 for i in idx]].tolist()


def test_subset_by_mask_keeps_order_and_renumbers_from_zero():
    sub = make_set().subset(np.array([False, False, True, True]))
    assert sub.node_ptr.tolist() == [0, 2, 6] and sub.edge_ptr.tolist() == [0, 2, 8]
    assert sub.edge_index[:, :2].tolist() == [[0, 1], [1, 0]]  # was nodes 3, 4
    assert sub.x[:, 0].tolist() == [3, 4, 5, 6, 7, 8]


def test_subset_out_of_range_is_refused():
    with pytest.raises(IndexError, match="graph index out of range for 4 graphs"):
        make_set().subset([4])


def test_ranges_is_concatenated_aranges():
    assert ranges([5, 0, 9], [2, 0, 3]).tolist() == [5, 6, 9, 10, 11]


def test_construction_checks_the_invariants():
    gs = make_set()
    fields = {k: getattr(gs, k) for k in ("x", "edge_index", "node_ptr", "edge_ptr", "y")}
    with pytest.raises(DataError, match=r"node_ptr must rise from 0 to 9"):
        GraphSet(**{**fields, "node_ptr": np.array([0, 3, 2, 5, 9])}, num_classes=3, name="p")
    with pytest.raises(DataError, match=r"edge_ptr has shape \(3,\)"):
        GraphSet(**{**fields, "edge_ptr": np.array([0, 4, 12])}, num_classes=3, name="p")
    across = fields["edge_index"].copy()
    across[1, 3] = 5  # an edge of graph 0 to node 5 of graph 3
    with pytest.raises(DataError, match=r"edge 3 \(2 -> 5\) leaves graph 0, which owns "
                                        r"nodes \[0, 3\)"):
        GraphSet(**{**fields, "edge_index": across}, num_classes=3, name="p")
    with pytest.raises(DataError, match=r"graph 1 has label 3, not a class id in \[0, 3\)"):
        GraphSet(**{**fields, "y": np.array([0, 3, 1, 1])}, num_classes=3, name="p")


def test_info_and_repr():
    gs = make_set()
    gs.y = np.array([0, 2, 2, 2])
    info = gs.info()
    assert info["graphs"] == 4 and info["nodes"] == 9 and info["edges"] == 12
    assert info["nodes_per_graph"] == {"mean": 2.25, "min": 0, "max": 4}
    assert info["edges_per_graph"] == {"mean": 3.0, "min": 0, "max": 6}
    assert info["class_counts"] == [1, 0, 3] and info["class_balance"] == [0.25, 0.0, 0.75]
    assert repr(gs) == ("GraphSet(name='paths', num_graphs=4, num_nodes=9, num_edges=12, "
                        "num_features=2, num_classes=3, x=dense float32)")
