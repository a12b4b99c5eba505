"""`GraphTask`: full-batch node classification. Each model gets the operand it reads (Â for a
GCN, the edge list for GAT and GraphSAGE, nothing for an MLP); operands are placed sparse or
dense by their density; the task's dtype is its model's."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data import karate_club, sbm
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.run import GraphTask, Scores, fit, make_task
from mgsparse.run import placed as placed_module  # where the whole graph's Â is built
from mgsparse.sparse import SparseTensor
from tests.conftest import make_config


@pytest.fixture(scope="module")
def karate():
    return karate_club()


@pytest.fixture
def no_norm_adj(monkeypatch):
    """Fail the test if anything builds Â."""
    def refuse(*args, **kwargs):
        raise AssertionError("Â was built for a model that does not read it")

    monkeypatch.setattr(placed_module, "normalized_adjacency", refuse)


# ---------------------------------------------------------------- the operand each model reads


def test_a_gcn_gets_the_normalised_adjacency(karate):
    task = GraphTask(make_config(), karate, dtype=np.float64)
    want = normalized_adjacency(karate.edge_index, 34, dtype=np.float64)
    want = want.toarray() if hasattr(want, "toarray") else np.asarray(want.to_scipy().toarray())
    assert isinstance(task.operand, Tensor)  # 16% dense: above the 0.1 threshold
    np.testing.assert_allclose(task.operand.data, want, rtol=1e-12)
    assert set(task.operands()) == {"features", "adjacency"}
    assert task.placement["adjacency"].startswith("dense (density 16.4")


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
        model = task.build_model(np.random.default_rng(0))  # float64, as the task
        (batch,) = list(task.batches(model, np.random.default_rng(0)))
        loss, count = batch()
        assert count == len(task.train_idx)
        loss.backward()
        grads.append((float(loss.data), [p.grad for p in model.parameters()]))
    (loss_s, g_s), (loss_d, g_d) = grads
    assert loss_s == pytest.approx(loss_d, rel=1e-12)
    for a, b in zip(g_s, g_d):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_a_float64_task_builds_a_float64_model_that_steps(karate):
    """The task's dtype reaches its parameters: the first step does not mix dtypes."""
    for kind in ("gcn", "sage", "gat", "mlp"):
        task = GraphTask(make_config(model={"kind": kind}), karate, dtype=np.float64)
        model = task.build_model(np.random.default_rng(0))
        assert {p.data.dtype for p in model.parameters()} == {np.dtype(np.float64)}, kind
        (batch,) = list(task.batches(model, np.random.default_rng(0)))
        loss, _ = batch()
        loss.backward()
        assert loss.data.dtype == np.float64 and np.isfinite(float(loss.data)), kind
        assert all(p.grad.dtype == np.float64 for p in model.parameters()), kind


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


# ---------------------------------------------------------------- layers decide the block form

SBM = {"num_nodes": 1000, "split": "random", "num_val": 100, "num_test": 200}  # 80 train rows


@pytest.mark.parametrize(("kind", "layer"), [("gcn", "MyGCNConv"), ("sage", "MySAGEConv"),
                                             ("gat", "MyGATConv")])
def test_a_subclass_of_each_layer_trains_on_its_receptive_field(subclassed_layers, kind,
                                                                 layer):
    subclassed_layers()
    config = make_config("synthetic", dataset=SBM, model={"kind": kind}, train={"epochs": 30})
    task = make_task(config)
    assert len(task.train_idx) < task.num_nodes / 2
    assert {type(c).__name__ for c in task.build_model(np.random.default_rng(0)).convs} == {
        layer}
    assert task.placement["training rows"].startswith("receptive field: 80 <- ")
    assert task.placement["scored rows"].startswith("receptive field: 380 <- ")
    assert "receptive field" not in task.placement  # no reason to fall back
    (run,) = fit(config, task).runs
    assert len(run.rows) == 30 and all(np.isfinite(r.loss) for r in run.rows)
    assert run.test_acc > 0.25 + 0.2  # 4 balanced classes: chance is 0.25


def test_a_layer_without_a_block_form_trains_on_the_whole_graph_under_auto(subclassed_layers):
    subclassed_layers(block_form=False)
    config = make_config("synthetic", dataset=SBM, model={"kind": "sage"}, train={"epochs": 2})
    task = make_task(config)
    assert task.placement["receptive field"] == (
        "not used: MySAGEConv has no block form (an on_block method) (the whole graph instead)")
    assert "training rows" not in task.placement and "scored rows" not in task.placement
    assert task.placement["adjacency"] == f"edge list ({task.edge_index.shape[1]:,} edges)"
    (run,) = fit(config, task).runs
    assert len(run.rows) == 2 and np.isfinite(run.rows[-1].loss)


@pytest.mark.parametrize(("train", "setting"), [
    ({"receptive_field": True}, "set train.receptive_field: false to train on the whole graph"),
    ({"batch_size": 16}, "set train.batch_size: null to train on the whole graph"),
])
def test_a_layer_without_a_block_form_asked_to_run_on_blocks_is_one_config_error(
        subclassed_layers, train, setting):
    subclassed_layers(block_form=False)
    config = make_config("synthetic", dataset=SBM, model={"kind": "sage"}, train=train)
    with pytest.raises(ConfigError) as caught:
        make_task(config)  # while the task is made: no step has run
    message = str(caught.value)
    assert "\n" not in message and message.endswith(setting)
    assert "MySAGEConv has no block form (an on_block method)" in message


def test_an_sgc_series_propagates_its_features_once(karate, monkeypatch):
    """Âᴷ X is computed by the first model of a series and handed to the others: one
    propagation for --runs 10, the product the same object in every model."""
    import mgsparse.nn.sgc as sgc_module

    calls = []
    real = sgc_module.sgc_features
    monkeypatch.setattr(sgc_module, "sgc_features", lambda *a: calls.append(1) or real(*a))
    task = GraphTask(make_config(model={"kind": "sgc", "k": 2}), karate, dtype=np.float64)
    models = [task.build_model(np.random.default_rng(seed)) for seed in range(3)]
    logits = [task.logits(m) for m in models]
    assert len(calls) == 1 and all(m._cache[3] is models[0]._cache[3] for m in models)
    want = np.linalg.matrix_power(np.asarray(task.operand.data), 2) @ np.asarray(
        task.features.data if isinstance(task.features, Tensor) else task.features.to_dense())
    np.testing.assert_allclose(np.asarray(models[2]._cache[3].data), want, rtol=1e-10)
    assert logits[0].shape == (34, 2)
