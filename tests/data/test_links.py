"""The leak-free edge split (`mgsparse.data.links`): held-out edges out of the training graph in
both directions, negatives that are never edges, self-loops or repeats, and the same seed
giving the same split bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.links import (
    both_ways,
    canonical_edges,
    contains,
    draw_non_edges,
    pair_keys,
    split_edges,
)
from mgsparse.data.synthetic import karate_club, sbm
from mgsparse.errors import ConfigError


@pytest.fixture(scope="module")
def graph():
    """An undirected SBM of 300 nodes (both directions stored), and its split."""
    g = sbm(num_nodes=300, num_classes=3, avg_degree=8.0, homophily=0.8, num_features=8, seed=1)
    return g, split_edges(g.edge_index, g.num_nodes, val=0.1, test=0.2, seed=3)


def keys_of(pairs, n):
    return set(pair_keys(pairs, n).tolist())


def test_split_sizes_are_the_floors_of_the_fractions_and_partition_the_edges(graph):
    g, s = graph
    undirected = g.num_edges // 2
    assert s.sizes() == {"train_pos": undirected - undirected // 10 - int(0.2 * undirected),
                         "val_pos": undirected // 10, "val_neg": undirected // 10,
                         "test_pos": int(0.2 * undirected), "test_neg": int(0.2 * undirected),
                         "train_graph": 2 * (undirected - undirected // 10
                                             - int(0.2 * undirected))}
    every = np.concatenate([s.train_pos, s.val_pos, s.test_pos], axis=1)
    assert (every[0] < every[1]).all()  # each undirected edge once, as u < v
    assert sorted(pair_keys(every, g.num_nodes)) == sorted(
        pair_keys(canonical_edges(g.edge_index, g.num_nodes, True), g.num_nodes))


def test_no_held_out_edge_is_in_the_training_graph_in_either_direction(graph):
    g, s = graph
    n = g.num_nodes
    training = keys_of(s.train_graph, n)
    for held in (s.val_pos, s.test_pos):
        assert not keys_of(held, n) & training
        assert not keys_of(held[::-1], n) & training
    assert training == keys_of(both_ways(s.train_pos), n)  # the training edges, both ways
    assert np.array_equal(s.train_keys, np.sort(pair_keys(s.train_graph, n)))


def test_fixed_negatives_are_non_edges_of_the_whole_graph_without_loops_or_repeats(graph):
    g, s = graph
    n, whole = g.num_nodes, keys_of(g.edge_index, g.num_nodes)
    negatives = np.concatenate([s.val_neg, s.test_neg], axis=1)
    assert (negatives[0] != negatives[1]).all() and (negatives[0] < negatives[1]).all()
    assert not keys_of(negatives, n) & whole and not keys_of(negatives[::-1], n) & whole
    assert len(keys_of(negatives, n)) == negatives.shape[1]  # none twice, across both splits


def test_training_negatives_avoid_training_edges_and_change_every_draw(graph):
    g, s = graph
    rng = np.random.default_rng(0)
    first, second = s.sample_negatives(500, rng), s.sample_negatives(500, rng)
    for neg in (first, second):
        assert neg.shape == (2, 500) and (neg[0] < neg[1]).all()
        assert not contains(s.train_keys, pair_keys(neg, g.num_nodes)).any()
        assert len(keys_of(neg, g.num_nodes)) == 500
    assert keys_of(first, g.num_nodes) != keys_of(second, g.num_nodes)


def test_the_same_seed_gives_the_same_split_bit_for_bit(graph):
    g, s = graph
    again = split_edges(g.edge_index, g.num_nodes, val=0.1, test=0.2, seed=3)
    other = split_edges(g.edge_index, g.num_nodes, val=0.1, test=0.2, seed=4)
    for name in ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg", "train_graph"):
        a, b = getattr(s, name), getattr(again, name)
        assert a.dtype == b.dtype == np.int64 and a.tobytes() == b.tobytes()
    assert not np.array_equal(s.val_pos, other.val_pos)


def test_a_directed_split_holds_each_directed_edge_out_alone():
    edges = np.array([[0, 1, 2, 3, 4, 5, 1, 2, 3, 0, 6, 7], [1, 2, 3, 4, 5, 6, 0, 0, 0, 5, 7, 0]])
    s = split_edges(edges, 8, val=0.25, test=0.25, seed=0, undirected=False)
    assert s.sizes()["val_pos"] == 3 and s.sizes()["train_graph"] == 6
    assert not keys_of(s.val_pos, 8) & keys_of(s.train_graph, 8)
    assert not keys_of(s.val_neg, 8) & keys_of(edges, 8)


def test_a_directed_graph_cannot_be_split_as_undirected():
    with pytest.raises(ConfigError, match=r"^link.undirected: true, but the graph is directed "
                                          r"\(some edge u -> v has no v -> u\); set "
                                          r"link.undirected: false$"):
        split_edges(np.array([[0, 1], [1, 2]]), 3)


@pytest.mark.parametrize("val, test, message", [
    (0.5, 0.5, r"^link.val \+ link.test must be < 1 \(got 0.5 \+ 0.5\)$"),
    (0.01, 0.1, (r"^the graph has too few edges to split: 78 candidate edges give 71 "
                 r"training, 0 validation and 7 test edges")),
])
def test_a_split_that_leaves_a_set_empty_is_refused(val, test, message):
    g = karate_club()
    with pytest.raises(ConfigError, match=message):
        split_edges(g.edge_index, g.num_nodes, val=val, test=test)


def test_self_loops_and_repeated_edges_are_not_candidates():
    edges = np.array([[0, 0, 1, 1, 1, 2, 2, 3], [0, 1, 0, 0, 2, 1, 3, 2]])
    assert canonical_edges(edges, 4, True).tolist() == [[0, 1, 2], [1, 2, 3]]


def test_non_edges_are_drawn_in_rounds_and_refused_when_too_few_exist():
    n = 5
    complete_but_one = np.array([(u, v) for u in range(n) for v in range(u + 1, n)
                                 if (u, v) != (1, 3)]).T
    keys = np.sort(pair_keys(complete_but_one, n))
    got = draw_non_edges(keys, n, 1, np.random.default_rng(0), True)
    assert got.tolist() == [[1], [3]]  # the one pair left, found by rejection
    with pytest.raises(ConfigError, match=r"^the graph has 1 node pairs that are not edges, "
                                          r"fewer than the 2 negatives asked for$"):
        draw_non_edges(keys, n, 2, np.random.default_rng(0), True)
