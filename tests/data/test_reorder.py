"""Node orderings (`mgsparse.data.reorder`): each is a permutation, RCM packs a shuffled path
into bandwidth 1, the degree order puts hubs first, and a permuted graph is the same graph
(every edge, weight, feature row, label and split mask kept with its node)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data import Graph, karate_club
from mgsparse.data.graph import undirected_edges
from mgsparse.data.reorder import ORDERS, inverse, node_order, permute_graph, reordered
from mgsparse.errors import ConfigError


def bandwidth(edge_index: np.ndarray) -> int:
    return int(np.abs(edge_index[0] - edge_index[1]).max())


def shuffled_path(n: int = 200, seed: int = 0) -> np.ndarray:
    """A path 0-1-...-(n-1) under a random numbering: its bandwidth is near n."""
    label = np.random.default_rng(seed).permutation(n)
    return undirected_edges(label[:-1], label[1:], n)


@pytest.mark.parametrize("method", ORDERS[1:])
def test_every_order_is_a_permutation(method):
    graph = karate_club()
    perm = node_order(graph.edge_index, graph.num_nodes, method)
    assert perm.dtype == np.int64 and np.array_equal(np.sort(perm), np.arange(34))
    assert np.array_equal(perm[inverse(perm)], np.arange(34))
    assert np.array_equal(inverse(perm)[perm], np.arange(34))


def test_none_is_the_files_own_order_and_an_unknown_method_is_one_line():
    graph = karate_club()
    assert node_order(graph.edge_index, 34, "none") is None
    assert reordered(graph, "none") == (graph, None)
    with pytest.raises(ConfigError, match=r"^dataset.reorder must be one of none, rcm, degree "
                                          r"\(got 'metis'\)$"):
        node_order(graph.edge_index, 34, "metis")


def test_rcm_gives_a_shuffled_path_bandwidth_one():
    edges = shuffled_path()
    assert bandwidth(edges) > 100
    perm = node_order(edges, 200, "rcm")
    assert bandwidth(inverse(perm)[edges]) == 1


def test_rcm_reads_a_one_way_edge_list_as_undirected():
    edges = shuffled_path()
    one_way = edges[:, edges[0] < edges[1]]
    perm = node_order(one_way, 200, "rcm")
    assert bandwidth(inverse(perm)[one_way]) == 1


def test_degree_order_is_descending_in_degree_ties_in_file_order():
    # in-degrees: node 0: 1, node 1: 3, node 2: 1, node 3: 2, node 4: 0
    edges = np.array([[1, 0, 2, 3, 4, 4, 0], [0, 1, 1, 1, 3, 3, 2]])
    assert node_order(edges, 5, "degree").tolist() == [1, 3, 0, 2, 4]


def test_a_permuted_graph_is_the_same_graph_under_new_ids():
    rng = np.random.default_rng(3)
    n = 30
    edges = shuffled_path(n, seed=1)
    weight = rng.random(edges.shape[1]).astype(np.float32)
    masks = [rng.random(n) < 0.3 for _ in range(3)]
    graph = Graph(x=sp.random(n, 6, density=0.4, format="csr", dtype=np.float32, random_state=2),
                  y=rng.integers(0, 3, n), edge_index=edges, num_nodes=n, num_classes=3,
                  train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], name="t",
                  edge_weight=weight)
    moved, perm = reordered(graph, "rcm")
    assert not np.array_equal(perm, np.arange(n))  # it did renumber
    assert np.array_equal(moved.x.toarray(), graph.x.toarray()[perm])
    assert np.array_equal(moved.y, graph.y[perm])
    for name, mask in zip(("train_mask", "val_mask", "test_mask"), masks):
        assert np.array_equal(np.sort(perm[np.flatnonzero(getattr(moved, name))]),
                              np.flatnonzero(mask))
    # canonical order: sorted by (source, target)
    keys = moved.edge_index[0] * n + moved.edge_index[1]
    assert np.all(np.diff(keys) > 0)
    # each edge, mapped back to the file's ids, carries its own weight
    back = {(int(s), int(t)): float(w) for s, t, w in
            zip(perm[moved.edge_index[0]], perm[moved.edge_index[1]], moved.edge_weight)}
    assert back == {(int(s), int(t)): float(w) for s, t, w in zip(*edges, weight)}
    assert moved is not graph and permute_graph(graph, np.arange(n)).edge_index.tolist() == \
        edges.tolist()
