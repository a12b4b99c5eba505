"""`GraphBatch` and `GraphClassifier`: a batch of graphs is block diagonal (each graph's logits
are its own, whatever else is in the batch), every layer kind and readout trains, and the
model's kinds are the catalog's."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.catalog import GRAPH_CLASSIFIER_KINDS
from mgsparse.engine import no_grad
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import functional as F
from mgsparse.nn.graphnet import GRAPH_KINDS, GraphBatch, GraphClassifier
from mgsparse.run.tasks.graphs import graph_batch
from tests.run.tasks.test_graphs import toy_graphs


def test_the_kinds_are_the_catalogs():
    assert GRAPH_KINDS == GRAPH_CLASSIFIER_KINDS


def test_batch_operand_is_block_diagonal_and_built_once():
    gs = toy_graphs(6)
    b = graph_batch(gs, np.array([4, 1, 2]))
    A = b.operand("gin").to_dense().data
    sizes = gs.nodes_per_graph[[4, 1, 2]]
    owner = np.repeat(np.arange(3), sizes)
    rows, cols = np.nonzero(A)
    assert rows.size == b.edge_index.shape[1] > 0
    assert np.array_equal(owner[rows], owner[cols])  # no entry between two graphs
    assert b.operand("gin") is b.operand("gin")
    assert b.segments.counts.tolist() == sizes.tolist()
    with pytest.raises(HyperparameterError, match="no graph-batch operand"):
        b.operand("mlp")


@pytest.mark.parametrize("kind", GRAPH_KINDS)
def test_a_graphs_logits_do_not_depend_on_its_batch_mates(kind):
    gs = toy_graphs(8)
    model = GraphClassifier(gs.num_features, 8, 2, layers=2, kind=kind, heads=2,
                            rng=np.random.default_rng(0)).eval()
    with no_grad():
        alone = np.concatenate([model(graph_batch(gs, [g])).data for g in range(8)])
        together = model(graph_batch(gs, np.arange(8))).data
        shuffled = model(graph_batch(gs, np.arange(8)[::-1])).data[::-1]
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(shuffled, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind, readout", [("gin", "sum"), ("gin", "mean"), ("gin", "max"),
                                           ("gcn", "mean"), ("sage", "max"), ("gat", "sum")])
def test_every_kind_and_readout_learns_the_toy_task(kind, readout):
    """Cycles vs paths of the same sizes: the training loss falls by half in 60 steps."""
    from mgsparse.optim import Adam

    gs = toy_graphs(24)
    model = GraphClassifier(gs.num_features, 16, 2, layers=3, dropout=0.0, kind=kind,
                            readout=readout, heads=2, rng=np.random.default_rng(1))
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
        GraphClassifier(3, 10, 2, kind="gat", heads=4)


def test_an_empty_graph_reads_out_zero_and_still_gets_logits():
    batch = GraphBatch(np.ones((3, 2), np.float32), np.array([[0, 1], [1, 0]]),
                       np.array([0, 0, 2]), 3)
    model = GraphClassifier(2, 4, 2, layers=1, rng=np.random.default_rng(0)).eval()
    with no_grad():
        out = model(batch).data
    assert out.shape == (3, 2) and np.all(np.isfinite(out))
    heads_bias = sum(h.bias.data for h in model.heads)
    np.testing.assert_allclose(out[1], heads_bias, rtol=1e-6)  # graph 1 has no nodes
