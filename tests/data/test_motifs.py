"""The planted-answer graphs: the counts their docstrings state, a ground truth that marks each
motif's own edges and nothing else, seeded generation, and the catalog's way to them."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data import load_section
from mgsparse.data.motifs import (
    HOUSE,
    ba_2motifs,
    ba_shapes,
    balanced_tree,
    barabasi_albert,
    cycle,
    planted,
    tree_cycles,
)
from mgsparse.data.sources import source_for
from mgsparse.errors import ConfigError


class Section:
    def __init__(self, name, **keys):
        self.name, self.seed, self.split, self.normalize_features = name, 0, "public", False
        self.__dict__.update(keys)


def _undirected(edge_index):
    return {(min(a, b), max(a, b)) for a, b in edge_index.T.tolist()}


def test_ba_shapes_counts_roles_and_split():
    p = ba_shapes()
    g = p.graph
    assert (g.num_nodes, g.num_edges, g.num_classes, g.num_features) == (700, 4110, 4, 10)
    assert np.bincount(g.y).tolist() == [300, 160, 160, 80]
    assert p.edge_mask.sum() == 960 and p.edge_mask.shape == (g.num_edges,)
    assert np.all(g.x == 1.0)
    assert g.split_sizes() == (560, 70, 70)
    for c in range(4):  # stratified: each class 80/10/10
        assert g.train_mask[g.y == c].sum() == round(0.8 * np.sum(g.y == c))
    assert np.array_equal(p.motif[300:305], [0] * 5) and np.all(p.motif[:300] == -1)


def test_every_house_is_whole_in_the_truth_and_nothing_else_is():
    """Each house's six edges (both ways) are marked; a marked edge joins two nodes of one
    house; the edge hanging a house from the base is not marked."""
    p = ba_shapes()
    src, dst = p.graph.edge_index
    marked = p.edge_mask
    assert np.all(p.motif[src[marked]] == p.motif[dst[marked]])
    assert np.all(p.motif[src[marked]] >= 0)
    per_house = np.bincount(p.motif[src[marked]], minlength=80)
    assert np.all(per_house == 12)
    house0 = {(a + 300, b + 300) for a, b in HOUSE.tolist()}
    assert {(min(e), max(e)) for e in house0} <= _undirected(p.graph.edge_index[:, marked])
    hanging = (p.motif[src] >= 0) & (p.motif[dst] == -1)
    assert hanging.sum() >= 80 and not marked[hanging].any()
    # roles: the roof (3) joins the two middle corners (1), which join the floor (2)
    y = p.graph.y
    roof_edges = marked & (y[src] == 3)
    assert np.all(y[dst[roof_edges]] == 1) and roof_edges.sum() == 160


def test_tree_cycles_counts_and_truth():
    p = tree_cycles()
    g = p.graph
    assert (g.num_nodes, g.num_edges, g.num_classes) == (991, 2162, 2)
    assert np.bincount(g.y).tolist() == [511, 480]
    assert p.edge_mask.sum() == 960  # 80 cycles x 6 edges x 2 directions
    src, dst = g.edge_index[:, p.edge_mask]
    assert np.all(p.motif[src] == p.motif[dst]) and np.all(g.y[src] == 1)


def test_the_base_graphs():
    tree = balanced_tree(8)
    assert tree.shape == (510, 2) and np.all(tree[:, 0] == (tree[:, 1] - 1) // 2)
    assert cycle(4).tolist() == [[0, 1], [1, 2], [2, 3], [3, 0]]
    rng = np.random.default_rng(0)
    pairs = barabasi_albert(3, 300, 5, rng)
    assert pairs.shape == (3, 295 * 5, 2)
    steps = pairs[0].reshape(295, 5, 2)
    # each new node joins 5 distinct older nodes
    assert all(len(set(s[:, 1])) == 5 and s[0, 0] > s[:, 1].max() for s in steps)
    degree = np.bincount(pairs[0].ravel(), minlength=300)
    assert degree[5:].min() >= 5 and degree.max() > 40  # preferential attachment: hubs
    assert not np.array_equal(pairs[0], pairs[1])  # every graph its own draw


def test_ba_2motifs_graphs_labels_and_truth():
    s = ba_2motifs()
    gs = s.graphs
    assert gs.num_graphs == 1000 and np.bincount(gs.y).tolist() == [500, 500]
    assert np.all(np.diff(gs.node_ptr) == 25)
    edges = np.diff(gs.edge_ptr)
    assert np.all(edges[gs.y == 0] == 2 * 26) and np.all(edges[gs.y == 1] == 2 * 25)
    truth = np.add.reduceat(s.edge_mask.astype(int), gs.edge_ptr[:-1])
    assert np.all(truth[gs.y == 0] == 12) and np.all(truth[gs.y == 1] == 10)
    local = gs.edge_index[:, s.edge_mask] % 25
    assert local.min() >= 20  # motif edges join motif nodes (local 20..24) only


def test_generation_is_seeded():
    a, b, c = ba_shapes(seed=3), ba_shapes(seed=3), ba_shapes(seed=4)
    assert np.array_equal(a.graph.edge_index, b.graph.edge_index)
    assert np.array_equal(a.edge_mask, b.edge_mask)
    assert np.array_equal(a.graph.train_mask, b.graph.train_mask)
    assert not np.array_equal(a.graph.train_mask, c.graph.train_mask)
    assert a.graph.edge_index.shape != c.graph.edge_index.shape or not np.array_equal(
        a.graph.edge_index, c.graph.edge_index)


def test_random_edges_are_new_pairs_and_a_fraction_of_the_edges():
    clean, noisy = ba_shapes(perturb=0.0), ba_shapes(perturb=0.1)
    assert clean.graph.num_edges == 2 * (1475 + 480 + 80)
    assert noisy.graph.num_edges == 2 * (1475 + 480 + 80 + 204)
    assert noisy.edge_mask.sum() == clean.edge_mask.sum() == 960


def test_the_catalog_loads_them_and_refuses_what_they_do_not_read():
    graph = load_section(Section("ba-shapes"))
    assert graph.num_nodes == 700 and graph.name == "ba-shapes"
    assert np.array_equal(graph.edge_index, planted("ba-shapes").graph.edge_index)
    full = load_section(Section("tree-cycles", split="full"))
    assert full.train_mask.sum() == 991 - full.val_mask.sum() - full.test_mask.sum()
    graphs = load_section(Section("ba-2motifs"))
    assert graphs.num_graphs == 1000
    assert load_section(Section("ba-2motifs", split="full")).num_graphs == 1000  # not read
    with pytest.raises(ConfigError, match="set of graphs"):
        source_for("ba-2motifs").load("ba-2motifs", split="full")
    with pytest.raises(ConfigError, match="unknown planted"):
        planted("ba-houses")
    with pytest.raises(ConfigError, match="100 motifs need as many base nodes"):
        ba_shapes(num_base=50, num_motifs=100)
