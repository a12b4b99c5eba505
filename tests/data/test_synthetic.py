"""Karate club facts, the stochastic block model's promises, and the 2-D toy sets."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.synthetic import karate_club, make_blobs, make_circles, make_moons, sbm
from mgsparse.errors import ConfigError


def edge_keys(g):
    return g.edge_index[0] * g.num_nodes + g.edge_index[1]


def test_karate_club_facts():
    g = karate_club()
    assert (g.num_nodes, g.num_edges // 2, g.num_classes) == (34, 78, 2)
    degree = np.bincount(g.edge_index[0], minlength=34)
    assert (degree[0], degree[33], degree[32], degree.sum()) == (16, 17, 12, 156)
    assert np.bincount(g.y).tolist() == [17, 17]
    assert g.y[0] == 0 and g.y[33] == 1  # Mr. Hi and the officer lead their factions
    assert g.y[[8, 9, 19]].tolist() == [0, 1, 0]  # networkx 'club' attribute
    np.testing.assert_array_equal(g.x.toarray(), np.eye(34))
    assert g.split_sizes() == (2, 6, 26)
    assert not (g.train_mask & g.test_mask).any()


@pytest.mark.parametrize("homophily", [0.1, 0.5, 0.9])
def test_sbm_honours_homophily_and_is_a_simple_undirected_graph(homophily):
    g = sbm(num_nodes=3000, num_classes=3, avg_degree=8, homophily=homophily, seed=1)
    src, dst = g.edge_index
    assert (src != dst).all()
    keys = edge_keys(g)
    assert np.unique(keys).size == keys.size
    assert set(keys.tolist()) == set((dst * g.num_nodes + src).tolist())
    assert (np.diff(keys) > 0).all()  # sorted by (source, target)
    measured = (g.y[src] == g.y[dst]).mean()
    assert abs(measured - homophily) < 0.03
    assert abs(g.num_edges / g.num_nodes - 8) < 0.05


def test_sbm_is_seeded_and_its_features_carry_the_class():
    a = sbm(num_nodes=1000, num_classes=4, num_features=40, seed=5)
    b = sbm(num_nodes=1000, num_classes=4, num_features=40, seed=5)
    c = sbm(num_nodes=1000, num_classes=4, num_features=40, seed=6)
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    assert (a.x != b.x).nnz == 0 and (a.train_mask == b.train_mask).all()
    assert not np.array_equal(a.y, c.y)
    # Words of class c's block (features 10c..10c+9) should dominate class c's rows.
    x = a.x.toarray().reshape(1000, 4, 10).sum(axis=2)  # (N, block)
    assert (x.argmax(axis=1) == a.y).mean() > 0.9
    assert np.bincount(a.y).tolist() == [250] * 4
    assert a.split_sizes() == (80, 306, 614)  # default_split_sizes: 20 per class, 920 rest


def test_sbm_explicit_split_sizes():
    g = sbm(num_nodes=500, num_classes=2, num_train_per_class=5, num_val=50, num_test=100)
    assert g.split_sizes() == (10, 50, 100)


@pytest.mark.parametrize("kwargs, message", [
    ({"homophily": 1.5}, r"homophily must be in \[0, 1\]"),
    ({"num_nodes": 5, "num_classes": 4}, "num_nodes >= 2 \\* num_classes"),
    ({"avg_degree": 5000}, "avg_degree"),
    ({"num_classes": 1, "homophily": 0.5}, "one class"),
])
def test_sbm_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        sbm(**kwargs)


def test_sbm_scales_to_many_nodes_without_quadratic_memory():
    g = sbm(num_nodes=200_000, num_classes=5, avg_degree=10, num_features=64, seed=0)
    assert g.num_edges == 2_000_000
    assert g.x.shape == (200_000, 64)


def test_moons_circles_blobs_shapes_labels_and_geometry():
    x, y = make_moons(200, noise=0.0, seed=0)
    assert x.shape == (200, 2) and x.dtype == np.float32 and y.dtype == np.int64
    assert np.bincount(y).tolist() == [100, 100]
    assert np.allclose(np.hypot(*x[y == 0].T), 1.0, atol=1e-5)  # outer moon: unit circle
    x, y = make_circles(101, noise=0.0, factor=0.3, seed=0)
    np.testing.assert_allclose(np.hypot(*x.T), np.where(y == 0, 1.0, 0.3), atol=1e-5)
    centres = np.array([[0.0, 0.0], [10.0, 10.0]])
    x, y = make_blobs(400, centers=centres, std=0.5, seed=0)
    np.testing.assert_allclose([x[y == k].mean(axis=0) for k in (0, 1)], centres, atol=0.15)
    x2, y2 = make_blobs(400, centers=centres, std=0.5, seed=0)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
