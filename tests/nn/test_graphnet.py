"""`GraphBatch` and `GraphClassifier`: a batch of graphs is block diagonal (each graph's logits
are its own, whatever else is in the batch), every layer kind and readout trains, and the
model's kinds are the catalog's, each layer class building its own operand from the batch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mgsparse.catalog import GRAPH_CLASSIFIER_KINDS
from mgsparse.data.graphset import GraphSet
from mgsparse.engine import no_grad
from mgsparse.errors import ConfigError, HyperparameterError, ShapeError
from mgsparse.nn import functional as F
from mgsparse.nn.gin import GINConv
from mgsparse.nn.gine import GINEConv
from mgsparse.nn.graphnet import GraphBatch, GraphClassifier
from mgsparse.nn.layers import Linear
from mgsparse.run.build import graph_layer
from mgsparse.run.tasks.graphs import graph_batch
from tests.run.tasks.test_graphs import toy_graphs


def bonded(gs: GraphSet) -> GraphSet:
    """`gs` with two edge types, one-hot in edge_attr: 0 between nodes of equal parity of
    their ids, 1 otherwise (any fixed rule will do: the layers only need rows per edge)."""
    kind = (gs.edge_index.sum(axis=0) % 2).astype(np.int64)
    return dataclasses.replace(gs, edge_attr=np.eye(2, dtype=np.float32)[kind], edge_type=kind)


def test_every_catalog_kind_names_a_layer_that_builds_its_own_operand():
    for kind in GRAPH_CLASSIFIER_KINDS:
        layer = graph_layer(kind)
        assert callable(layer.for_graphs) and callable(layer.on_batch), kind
    assert graph_layer("gin") is GINConv and graph_layer("gine") is GINEConv
    with pytest.raises(ConfigError, match="model.kind 'mlp' has no layer for sets of graphs"):
        graph_layer("mlp")
    with pytest.raises(HyperparameterError, match="Linear is no graph layer"):
        GraphClassifier(3, 8, 2, layer=Linear)


def test_batch_operand_is_block_diagonal_and_built_once():
    gs = toy_graphs(6)
    b = graph_batch(gs, np.array([4, 1, 2]))
    conv = GINConv(2, 4, rng=np.random.default_rng(0))
    conv.on_batch(b)
    built = b.operand("sum_adjacency", lambda: pytest.fail("built twice"))
    A = built.to_dense().data
    sizes = gs.nodes_per_graph[[4, 1, 2]]
    owner = np.repeat(np.arange(3), sizes)
    rows, cols = np.nonzero(A)
    assert rows.size == b.edge_index.shape[1] > 0
    assert np.array_equal(owner[rows], owner[cols])  # no entry between two graphs
    conv.on_batch(b)  # a second layer reads the same operand
    assert b.operand("sum_adjacency", lambda: None) is built
    assert b.segments.counts.tolist() == sizes.tolist()


def test_a_batch_carries_each_edges_own_features_and_type():
    """Graphs 4, 1, 2 of a set with edge data: the batch's rows are those graphs' edges' rows,
    in the batch's edge order, cast to the batch's dtype."""
    gs = bonded(toy_graphs(6))
    idx = np.array([4, 1, 2])
    b = graph_batch(gs, idx, np.float64)
    edges = np.concatenate([np.arange(gs.edge_ptr[g], gs.edge_ptr[g + 1]) for g in idx])
    assert b.edge_attr.dtype == np.float64 and b.edge_attr.shape == (len(edges), 2)
    np.testing.assert_array_equal(b.edge_attr, gs.edge_attr[edges])
    np.testing.assert_array_equal(b.edge_type, gs.edge_type[edges])
    shift = np.repeat(np.cumsum([0, *gs.nodes_per_graph[idx][:-1]]) - gs.node_ptr[idx],
                      gs.edges_per_graph[idx])
    np.testing.assert_array_equal(b.edge_index, gs.edge_index[:, edges] + shift)
    assert "edge_features=2" in repr(b)
    with pytest.raises(ShapeError, match=r"GraphBatch: edge_attr is float32 of shape \(3, 2\)"):
        GraphBatch(b.x, b.edge_index, np.zeros(b.num_nodes, np.int64), 1,
                   edge_attr=np.zeros((3, 2), np.float32))


@pytest.mark.parametrize("kind", GRAPH_CLASSIFIER_KINDS)
def test_a_graphs_logits_do_not_depend_on_its_batch_mates(kind):
    gs = bonded(toy_graphs(8))
    model = GraphClassifier(gs.num_features, 8, 2, layers=2, layer=graph_layer(kind), heads=2,
                            edge_dim=gs.num_edge_features, rng=np.random.default_rng(0)).eval()
    with no_grad():
        alone = np.concatenate([model(graph_batch(gs, [g])).data for g in range(8)])
        together = model(graph_batch(gs, np.arange(8))).data
        shuffled = model(graph_batch(gs, np.arange(8)[::-1])).data[::-1]
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(shuffled, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind, readout", [("gin", "sum"), ("gin", "mean"), ("gin", "max"),
                                           ("gcn", "mean"), ("sage", "max"), ("gat", "sum"),
                                           ("gine", "sum")])
def test_every_kind_and_readout_learns_the_toy_task(kind, readout):
    """Cycles vs paths of the same sizes: the training loss falls by half in 60 steps."""
    from mgsparse.optim import Adam

    gs = bonded(toy_graphs(24))
    model = GraphClassifier(gs.num_features, 16, 2, layers=3, dropout=0.0,
                            layer=graph_layer(kind),
                            readout=readout, heads=2, edge_dim=gs.num_edge_features,
                            rng=np.random.default_rng(1))
    opt, batch = Adam(model.parameters(), lr=0.01), graph_batch(gs, np.arange(24))
    losses = []
    for _ in range(60):
        loss = F.cross_entropy(model(batch), batch.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.data))
    assert losses[-1] < 0.5 * losses[0], (kind, readout, losses[0], losses[-1])


def test_levels_heads_and_bad_arguments():
    gs = toy_graphs(4)
    model = GraphClassifier(gs.num_features, 8, 3, layers=4, rng=np.random.default_rng(0))
    assert len(model.heads) == 5 and len(model.norms) == 4  # the input's readout too
    assert model(graph_batch(gs, [0, 1, 2])).shape == (3, 3)
    assert model.embed(graph_batch(gs, [0, 1])).shape == (2, 8)
    with pytest.raises(ShapeError, match="takes a GraphBatch"):
        model(gs.x)
    with pytest.raises(HyperparameterError, match="readout 'median'"):
        GraphClassifier(3, 8, 2, readout="median")
    with pytest.raises(HyperparameterError, match="multiple of model.heads"):
        GraphClassifier(3, 10, 2, layer=graph_layer("gat"), heads=4)
    with pytest.raises(HyperparameterError, match="GINEConv reads edge features, and these "
                                                  "graphs have none"):
        GraphClassifier(3, 8, 2, layer=GINEConv)
    gine = GraphClassifier(gs.num_features, 8, 2, layer=GINEConv, edge_dim=2,
                           rng=np.random.default_rng(0))
    with pytest.raises(ShapeError, match="GINEConv reads edge features; this batch"):
        gine(graph_batch(gs, [0, 1]))


def test_an_empty_graph_reads_out_zero_and_still_gets_logits():
    batch = GraphBatch(np.ones((3, 2), np.float32), np.array([[0, 1], [1, 0]]),
                       np.array([0, 0, 2]), 3)
    model = GraphClassifier(2, 4, 2, layers=1, rng=np.random.default_rng(0)).eval()
    with no_grad():
        out = model(batch).data
    assert out.shape == (3, 2) and np.all(np.isfinite(out))
    heads_bias = sum(h.bias.data for h in model.heads)
    np.testing.assert_allclose(out[1], heads_bias, rtol=1e-6)  # graph 1 has no nodes
