"""Edge features and types ride with their edges: checked at construction, and kept row for row
through a GraphSet's subset, the node reordering, the caches and the sampler's blocks."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.cache import cached_graph, cached_graphset
from mgsparse.data.graph import Graph, undirected_edges, undirected_edges_from
from mgsparse.data.graphset import GraphSet
from mgsparse.data.reorder import permute_graph
from mgsparse.data.sampler import NeighborSampler
from mgsparse.errors import DataError

# A 5-node graph, 6 directed edges; edge k's features are (k, 10k) and its type k % 3, so any
# row that leaves its edge shows.
EDGES = np.array([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
ATTR = np.stack([np.arange(6), 10 * np.arange(6)], axis=1).astype(np.float32)
TYPE = np.arange(6) % 3


def graph(**edge_data) -> Graph:
    n = 5
    return Graph(x=np.eye(n, dtype=np.float32), y=np.zeros(n, np.int64), edge_index=EDGES,
                 num_nodes=n, num_classes=1, train_mask=np.ones(n, bool),
                 val_mask=np.zeros(n, bool), test_mask=np.zeros(n, bool), name="five",
                 **edge_data)


def row_of(edge_index: np.ndarray) -> np.ndarray:
    """The original edge id of each column of `edge_index` (ids of the module's graph)."""
    lookup = {(int(s), int(t)): k for k, (s, t) in enumerate(EDGES.T)}
    return np.array([lookup[(int(s), int(t))] for s, t in edge_index.T], dtype=np.int64)


@pytest.mark.parametrize("bad, message", [
    ({"edge_attr": ATTR[:5]}, (r"five: edge_attr is float32 of shape \(5, 2\); expected "
                               r"float of shape \(6, F_e\), one row per edge")),
    ({"edge_attr": ATTR[:, 0]}, r"edge_attr is float32 of shape \(6,\)"),
    ({"edge_attr": ATTR.astype(np.int64)}, r"edge_attr is int64 of shape \(6, 2\)"),
    ({"edge_type": TYPE[:4]}, (r"five: edge_type is int64 of shape \(4,\); expected "
                               r"integers of shape \(6,\)")),
    ({"edge_type": TYPE.astype(np.float32)}, r"edge_type is float32"),
    ({"edge_type": TYPE - 1}, r"five: edge_type holds -1; types are ids >= 0"),
])
def test_a_mismatch_is_one_error_naming_the_array(bad, message):
    with pytest.raises(DataError, match=message):
        graph(**bad)


def test_the_node_reordering_keeps_each_edges_row():
    perm = np.array([4, 2, 0, 3, 1])  # new node i is old node perm[i]
    moved = permute_graph(graph(edge_attr=ATTR, edge_type=TYPE), perm)
    old = perm[moved.edge_index]  # back to the old ids
    k = row_of(old)
    np.testing.assert_array_equal(moved.edge_attr, ATTR[k])
    np.testing.assert_array_equal(moved.edge_type, TYPE[k])
    assert sorted(k.tolist()) == list(range(6))


def test_undirected_edges_from_says_where_each_edge_came_from():
    """Each direction listed keeps its own line; a pair listed once gives both directions its
    line; a loop is dropped; a repeated line: the first one."""
    row, col = np.array([0, 1, 2, 2, 0, 3]), np.array([1, 0, 3, 2, 1, 2])
    edges, origin = undirected_edges_from(row, col, 4)
    np.testing.assert_array_equal(edges, undirected_edges(row, col, 4))
    assert edges.T.tolist() == [[0, 1], [1, 0], [2, 3], [3, 2]]
    assert origin.tolist() == [0, 1, 2, 5]


def test_a_subset_keeps_each_edges_row_and_the_cache_reads_them_back(tmp_path):
    node_ptr, edge_ptr = np.array([0, 3, 5]), np.array([0, 4, 6])
    gs = GraphSet(x=np.eye(5, dtype=np.float32), edge_index=EDGES, node_ptr=node_ptr,
                  edge_ptr=edge_ptr, y=np.array([0, 1]), num_classes=2, name="two",
                  edge_attr=ATTR, edge_type=TYPE)
    sub = gs.subset([1, 0, 1])
    np.testing.assert_array_equal(sub.edge_attr, ATTR[[4, 5, 0, 1, 2, 3, 4, 5]])
    np.testing.assert_array_equal(sub.edge_type, TYPE[[4, 5, 0, 1, 2, 3, 4, 5]])
    assert sub.edge_index[:, :2].tolist() == [[0, 1], [1, 0]]  # graph 1 first, renumbered
    back = cached_graphset(tmp_path / "gs.npz", "k", "two", lambda: gs)
    again = cached_graphset(tmp_path / "gs.npz", "k", "two", lambda: pytest.fail("rebuilt"))
    assert back is gs and again.num_edge_features == 2
    np.testing.assert_array_equal(again.edge_attr, ATTR)
    np.testing.assert_array_equal(again.edge_type, TYPE)
    with pytest.raises(DataError, match=r"two: edge_attr is float32 of shape \(5, 2\)"):
        GraphSet(x=gs.x, edge_index=EDGES, node_ptr=node_ptr, edge_ptr=edge_ptr, y=gs.y,
                 num_classes=2, name="two", edge_attr=ATTR[:5])


def test_a_graph_cache_reads_the_edge_data_back(tmp_path):
    g = graph(edge_attr=ATTR, edge_type=TYPE)
    cached_graph(tmp_path / "g.npz", "k", "five", lambda: g)
    again = cached_graph(tmp_path / "g.npz", "k", "five", lambda: pytest.fail("rebuilt"))
    np.testing.assert_array_equal(again.edge_attr, ATTR)
    np.testing.assert_array_equal(again.edge_type, TYPE)


def test_a_sampled_blocks_rows_are_its_edges_rows():
    """Targets 1 and 3: all their in-edges (fanout -1), then 1 of each (fanout 1): every
    block row is the row of the edge the block holds (its edge id)."""
    sampler = NeighborSampler(EDGES, 5, [-1], edge_attr=ATTR, edge_type=TYPE)
    block = sampler.block(np.array([1, 3]))
    assert block.edge_id.tolist() == [0, 3, 5]  # 0 -> 1, 2 -> 1, 4 -> 3
    np.testing.assert_array_equal(block.edge_attr, ATTR[[0, 3, 5]])
    np.testing.assert_array_equal(block.edge_type, TYPE[[0, 3, 5]])
    sampled = sampler.block(np.array([1, 3]), 1, np.random.default_rng(0))
    np.testing.assert_array_equal(sampled.edge_attr, ATTR[sampled.edge_id])
    assert sampled.nnz == 2
    plain = NeighborSampler(EDGES, 5, [-1]).block(np.array([1, 3]))
    assert plain.edge_id is None and plain.edge_attr is None and plain.edge_type is None
    with pytest.raises(DataError, match=r"NeighborSampler: edge_attr is float32 of shape"):
        NeighborSampler(EDGES, 5, [-1], edge_attr=ATTR[:2])
