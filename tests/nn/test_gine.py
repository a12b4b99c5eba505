"""GINEConv: Hu et al.'s sum of ReLU(h_j + W·e_ji) against numpy on a hand-made graph, its block
form at fanout -1 equal to the whole graph's rows, and MUTAG's real bond labels reaching the
layer over loopback, where a GINE classifier trains."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.sampler import NeighborSampler
from mgsparse.data.sources import tu
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError, ShapeError
from mgsparse.nn.gine import GINEConv
from mgsparse.run import fit
from mgsparse.run.tasks.graphs import GraphClassificationTask, graph_batch
from tests.conftest import make_config, require_real_tu

EDGES = np.array([[0, 1, 1, 2, 3, 4, 0], [1, 0, 2, 1, 4, 3, 2]])  # node 5 alone


def layer(train_eps: bool = True) -> GINEConv:
    m = GINEConv(3, 4, 2, train_eps=train_eps, rng=np.random.default_rng(0), dtype=np.float64)
    m.eps.data[0] = 0.25
    return m.eval()


def numpy_gine(m: GINEConv, x: np.ndarray, edges: np.ndarray, attr: np.ndarray) -> np.ndarray:
    """The formula with np.add.at, then the layer's own MLP (in eval mode: fixed statistics)."""
    w, b = m.edge_lin.weight.data, m.edge_lin.bias.data
    messages = np.maximum(x[edges[0]] + attr @ w + b, 0.0)
    summed = np.zeros_like(x)
    np.add.at(summed, edges[1], messages)
    with no_grad():
        return m.mlp(Tensor(summed + (1 + m.eps.data[0]) * x)).data


def test_the_layer_is_the_formula():
    rng = np.random.default_rng(1)
    x, attr = rng.standard_normal((6, 3)), rng.standard_normal((7, 2))
    m = layer()
    with no_grad():
        out = m(Tensor(x), EDGES, attr).data
    np.testing.assert_allclose(out, numpy_gine(m, x, EDGES, attr), rtol=1e-12, atol=1e-12)
    assert m.edge_lin.weight.shape == (2, 3)  # PyG's Linear(edge_dim, in_channels)
    with no_grad():  # the bonds matter: another edge feature, another output at its target
        other = m(Tensor(x), EDGES, attr + np.array([[0.0, 0.0]] * 6 + [[5.0, -5.0]])).data
    changed = np.flatnonzero(np.abs(other - out).max(axis=1) > 1e-9)
    assert changed.tolist() == [2]  # edge 0 -> 2's target only
    with pytest.raises(ShapeError, match=r"GINEConv: edge_attr must be \(7, 2\) for 7 edges, "
                                         r"got \(6, 2\)"):
        m(Tensor(x), EDGES, attr[:6])


def test_the_block_form_at_fanout_minus_one_is_the_whole_graphs_rows():
    rng = np.random.default_rng(2)
    x, attr = rng.standard_normal((6, 3)), rng.standard_normal((7, 2))
    m = layer()
    block = NeighborSampler(EDGES, 6, [-1], edge_attr=attr).block(np.array([2, 5, 1]))
    with no_grad():
        whole = m(Tensor(x), EDGES, attr).data
        rows = m.on_block(block)(Tensor(x[block.n_id])).data
    np.testing.assert_allclose(rows, whole[[2, 5, 1]], rtol=1e-12, atol=1e-12)
    bare = NeighborSampler(EDGES, 6, [-1]).block(np.array([2]))
    with pytest.raises(ShapeError, match="this block carries no edge_attr"):
        m.on_block(bare)


def gine_config(**train):
    return make_config("mutag", model={"kind": "gine", "layers": 2, "hidden": 16,
                                       "readout": "sum"},
                       train={"batch_size": 32, "epochs": 10, **train})


def test_mutags_bonds_reach_the_layer_and_it_trains(serve_folder, tmp_path):
    url, _ = serve_folder(require_real_tu())
    graphs = tu.load("mutag", root=tmp_path, url=url)
    task = GraphClassificationTask(gine_config(), graphs)
    model = task.build_model(np.random.default_rng(0)).eval()
    batch = graph_batch(graphs, np.arange(graphs.num_graphs))
    with no_grad():
        logits = model(batch).data
        gather, scatter, e = batch.operand("gine_edges", lambda: pytest.fail("not built"))
        assert e.shape == (7_442, 4) and gather.shape == (7_442, 3_371)
        assert scatter.shape == (3_371, 7_442)
        np.testing.assert_array_equal(e.data, graphs.edge_attr)
        swapped = graph_batch(graphs, np.arange(graphs.num_graphs))  # bond types 0 <-> 1
        swapped.edge_attr = swapped.edge_attr[:, [1, 0, 2, 3]]
        assert np.abs(model(swapped).data - logits).max() > 1e-3
    result = fit(task.config, task)
    losses = [row.loss for row in result.runs[0].rows]
    assert len(losses) == 10 and losses[-1] < 0.7 * losses[0], losses
    assert result.runs[0].scores["train_acc"] > 0.8, result.runs[0].scores


def test_a_set_without_edge_features_or_a_node_dataset_is_refused():
    from tests.run.tasks.test_graphs import toy_graphs

    with pytest.raises(Exception, match="GINEConv reads edge features, and these graphs have "
                                        "none"):
        GraphClassificationTask(gine_config(), toy_graphs(10)).build_model(
            np.random.default_rng(0))
    with pytest.raises(ConfigError, match="model.kind 'gine' classifies sets of graphs only, "
                                          "and dataset 'karate' is not one"):
        make_config("karate", model={"kind": "gine"})
