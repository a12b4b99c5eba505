"""Node orderings (`mgsparse.data.reorder`): each is a permutation, RCM packs a shuffled path
into bandwidth 1, the degree order puts hubs first, METIS numbers each part in one run (and
says which extra to install when pymetis is missing), and a permuted graph is the same graph
(every edge, weight, feature row, label and split mask kept with its node)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data import Graph, karate_club
from mgsparse.data.graph import undirected_edges
from mgsparse.data.reorder import ORDERS, inverse, metis_order, node_order, permute_graph, reordered
from mgsparse.errors import ConfigError


def bandwidth(edge_index: np.ndarray) -> int:
    return int(np.abs(edge_index[0] - edge_index[1]).max())


def shuffled_path(n: int = 200, seed: int = 0) -> np.ndarray:
    """A path 0-1-...-(n-1) under a random numbering: its bandwidth is near n."""
    label = np.random.default_rng(seed).permutation(n)
    return undirected_edges(label[:-1], label[1:], n)


@pytest.mark.parametrize("method", ORDERS[1:])
def test_every_order_is_a_permutation(method, monkeypatch):
    if method == "metis":
        pytest.importorskip("pymetis")
        monkeypatch.setattr("mgsparse.data.reorder.METIS_BLOCK", 8)  # 5 parts, not 1
    graph = karate_club()
    perm = node_order(graph.edge_index, graph.num_nodes, method)
    assert perm.dtype == np.int64 and np.array_equal(np.sort(perm), np.arange(34))
    assert np.array_equal(perm[inverse(perm)], np.arange(34))
    assert np.array_equal(inverse(perm)[perm], np.arange(34))


def test_none_is_the_files_own_order_and_an_unknown_method_is_one_line():
    graph = karate_club()
    assert node_order(graph.edge_index, 34, "none") is None
    assert reordered(graph, "none") == (graph, None)
    with pytest.raises(ConfigError, match=r"^dataset.reorder must be one of none, rcm, degree, "
                                          r"metis \(got 'spectral'\)$"):
        node_order(graph.edge_index, 34, "spectral")


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


def interleaved_cliques(size: int = 10) -> np.ndarray:
    """Two disconnected cliques of `size` nodes, the even ids one, the odd ids the other."""
    evens, odds = np.arange(0, 2 * size, 2), np.arange(1, 2 * size, 2)
    src = np.r_[np.repeat(evens, size), np.repeat(odds, size)]  # every ordered pair of a clique
    dst = np.r_[np.tile(evens, size), np.tile(odds, size)]
    keep = src != dst
    return undirected_edges(src[keep], dst[keep], 2 * size)


def test_metis_puts_each_clique_in_one_run_of_ids():
    pytest.importorskip("pymetis")
    perm = metis_order(interleaved_cliques(), 20, block=10)
    assert np.array_equal(np.sort(perm), np.arange(20))
    assert {frozenset(perm[:10] % 2), frozenset(perm[10:] % 2)} == {frozenset({0}),
                                                                   frozenset({1})}
    assert np.all(np.diff(perm[:10]) > 0) and np.all(np.diff(perm[10:]) > 0)  # file order kept


def test_metis_is_a_permutation_fixed_by_its_seed_with_each_part_in_file_order():
    pytest.importorskip("pymetis")
    edges = shuffled_path(500, seed=2)
    perm = metis_order(edges, 500, block=64, seed=5)  # 8 parts
    assert perm.dtype == np.int64 and np.array_equal(np.sort(perm), np.arange(500))
    assert np.array_equal(metis_order(edges, 500, block=64, seed=5), perm)
    assert np.count_nonzero(np.diff(perm) < 0) <= 7  # 8 increasing runs at most: one a part
    inv = inverse(perm)  # the path's edges now join near ids: few cross a part
    assert np.median(np.abs(inv[edges[0]] - inv[edges[1]])) < bandwidth(edges) / 10
    assert np.array_equal(metis_order(edges, 500, block=500), np.arange(500))  # one part


def test_metis_without_pymetis_names_the_extra_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # import pymetis -> ImportError
    with pytest.raises(ConfigError, match=r"^dataset.reorder: metis needs pymetis, which is not "
                                          r"installed: pip install pymetis \(or pip install -e "
                                          r"'\.\[distributed\]' in the mgsparse checkout\)$"):
        node_order(karate_club().edge_index, 34, "metis")


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
