"""`GraphTask`: full-batch node classification. Each model gets the operand it reads (Â for a
GCN, the edge list for GAT and GraphSAGE, nothing for an MLP); operands are placed sparse or
dense by their density."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mgsparse.data import karate_club, sbm
from mgsparse.engine import Tensor
from mgsparse.nn import functional as F
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.run import GraphTask, Scores
from mgsparse.sparse import SparseTensor
from tests.conftest import make_config

graph_task = sys.modules[GraphTask.__module__]  # where GraphTask, `place` and its Â live
place = graph_task.place


@pytest.fixture(scope="module")
def karate():
    return karate_club()


@pytest.fixture
def no_norm_adj(monkeypatch):
    """Fail the test if anything builds Â."""
    def refuse(*args, **kwargs):
        raise AssertionError("Â was built for a model that does not read it")

    monkeypatch.setattr(graph_task, "normalized_adjacency", refuse)


# ---------------------------------------------------------------- the operand each model reads


def test_a_gcn_gets_the_normalised_adjacency(karate):
    task = GraphTask(make_config(), karate, dtype=np.float64)
    want = normalized_adjacency(karate.edge_index, 34, dtype=np.float64)
    want = want.toarray() if hasattr(want, "toarray") else np.asarray(want.to_scipy().toarray())
    assert isinstance(task.operand, Tensor)  # 16% dense: above the 0.1 threshold
    np.testing.assert_allclose(task.operand.data, want, rtol=1e-12)
    assert set(task.operands()) == {"features", "adjacency"}
    assert task.placement["adjacency"].startswith("dense (density 0.164")


@pytest.mark.parametrize("kind", ["gat", "sage"])
def test_gat_and_sage_get_the_edge_list_and_no_norm_adj(karate, no_norm_adj, kind):
    task = GraphTask(make_config(model={"kind": kind}), karate)
    assert isinstance(task.operand, np.ndarray) and task.operand.dtype == np.int64
    np.testing.assert_array_equal(task.operand, karate.edge_index)
    assert task.placement["adjacency"] == "edge list (156 edges)"
    assert task.operands()["adjacency"] is task.operand
    model = task.build_model(np.random.default_rng(0))
    assert task.logits(model).shape == (34, 2)


def test_an_mlp_gets_no_graph_operand(karate, no_norm_adj):
    task = GraphTask(make_config(model={"kind": "mlp"}), karate)
    assert task.operand is None
    assert task.placement["adjacency"] == "not used (the model reads no graph)"
    assert set(task.operands()) == {"features"}
    model = task.build_model(np.random.default_rng(0))
    calls = []
    forward = model.forward
    model.forward = lambda *args: calls.append(len(args)) or forward(*args)
    assert task.logits(model).shape == (34, 2)
    assert calls == [1]  # called on the features alone


def test_a_gcn_that_learns_edge_weights_builds_no_fixed_norm_adj(karate, no_norm_adj):
    task = GraphTask(make_config(model={"learn_edge_weight": True}), karate)
    assert isinstance(task.operand, np.ndarray)
    model = task.build_model(np.random.default_rng(0))
    assert task.logits(model).shape == (34, 2)


# ---------------------------------------------------------------- placement


def test_place_keeps_sparse_at_or_below_the_threshold():
    import scipy.sparse as sp

    m = sp.csr_matrix(np.diag([1.0, 2.0, 0.0, 4.0]))  # density 3/16
    sparse, why = place(m, 0.1875, np.float32)
    assert isinstance(sparse, SparseTensor) and sparse.dtype == np.float32
    assert why == "sparse (density 0.188 <= threshold 0.1875)"
    dense, why = place(m, 0.1, np.float64)
    assert isinstance(dense, Tensor) and dense.data.dtype == np.float64
    np.testing.assert_array_equal(dense.data, m.toarray())
    assert why == "dense (density 0.188 > threshold 0.1)"


def test_sparse_and_dense_paths_give_the_same_loss_and_gradients():
    graph = sbm(num_nodes=60, num_classes=3, avg_degree=4, homophily=0.8, num_features=12,
                seed=3)
    grads = []
    for threshold in (1.0, 0.0):
        config = make_config("synthetic", sparse={"sparsity_threshold": threshold},
                             model={"dropout": 0.0})
        task = GraphTask(config, graph, dtype=np.float64)
        want = SparseTensor if threshold == 1.0 else Tensor
        assert isinstance(task.operand, want) and isinstance(task.features, want)
        model = task.build_model(np.random.default_rng(0))
        for p in model.parameters():  # float64 for an exact comparison
            p.data = p.data.astype(np.float64)
        (batch,) = list(task.batches(model, np.random.default_rng(0)))
        loss, count = batch()
        assert count == len(task.train_idx)
        loss.backward()
        grads.append((float(loss.data), [p.grad for p in model.parameters()]))
    (loss_s, g_s), (loss_d, g_d) = grads
    assert loss_s == pytest.approx(loss_d, rel=1e-12)
    for a, b in zip(g_s, g_d):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- one epoch, scores, restore


def test_a_graph_epoch_is_one_full_batch_step_on_the_training_nodes(karate):
    task = GraphTask(make_config(model={"dropout": 0.0}), karate)
    model = task.build_model(np.random.default_rng(0))
    batches = list(task.batches(model, np.random.default_rng(0)))
    assert len(batches) == 1
    loss, count = batches[0]()
    assert count == 2 and loss.requires_grad
    want = F.cross_entropy(task.logits(model), task.y, task.train_idx)
    assert float(loss.data) == pytest.approx(float(want.data), rel=1e-6)


def test_evaluate_is_the_accuracy_of_the_argmax_on_each_split(karate):
    task = GraphTask(make_config(), karate)
    model = task.build_model(np.random.default_rng(0))
    scores = task.evaluate(model)
    assert isinstance(scores, Scores) and not model.training
    logits = task.logits(model).data
    pred = logits.argmax(axis=1)
    for idx, acc in ((task.train_idx, scores.train_acc), (task.val_idx, scores.val_acc),
                     (task.test_idx, scores.test_acc)):
        assert acc == pytest.approx(np.mean(pred[idx] == karate.y[idx]))
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    val = task.val_idx
    assert scores.val_loss == pytest.approx(-np.mean(logp[val, karate.y[val]]), rel=1e-5)


def test_restore_rebuilds_the_model_in_eval_mode(karate):
    task = GraphTask(make_config(), karate)
    model = task.build_model(np.random.default_rng(7))
    state = model.state_dict()
    again = task.restore(state)
    assert not again.training
    assert all(np.array_equal(again.state_dict()[k], v) for k, v in state.items())
    assert task.evaluate(again) == task.evaluate(model)


def test_first_loss_is_the_first_training_step_with_its_graph(karate):
    task = GraphTask(make_config(), karate)
    model = task.build_model(np.random.default_rng(0))
    loss = task.first_loss(model, seed=0)
    assert loss.shape == () and loss.requires_grad and loss._ctx is not None
    assert model.training
