"""Receptive fields: full-batch training and scoring computed on the rows they read equal the
whole-graph computation, and `train.receptive_field` chooses when they are used."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.engine import no_grad
from mgsparse.errors import ConfigError, ShapeError
from mgsparse.nn import functional as F
from mgsparse.run import GraphTask, make_task
from mgsparse.run.placed import load_graph
from mgsparse.run.task import shuffle_generator

SBM = {"name": "synthetic", "num_nodes": 600, "num_classes": 3, "avg_degree": 4,
       "num_features": 16, "split": "random", "num_train_per_class": 4, "num_val": 30,
       "num_test": 60, "normalize_features": False}

GAT_ONLY = {"gat": {"attn_dropout": 0.0, "heads": 2}}  # keys another kind would refuse


def config(kind: str = "gcn", receptive_field="auto", dataset=None, **model):
    return config_from_dict({
        "dataset": dataset or SBM,
        "model": {"kind": kind, "dropout": 0.0, **GAT_ONLY.get(kind, {}), **model},
        "train": {"seed": 3, "receptive_field": receptive_field}, "monitor": {"memory": False}})


def step(task: GraphTask, seed: int = 5):
    """(loss, gradients by name, scores) of one training step from a fixed initialisation."""
    model = task.build_model(np.random.default_rng(seed))
    (batch,) = list(task.batches(model, shuffle_generator(0)))
    loss, count = batch()
    assert count == len(task.train_idx)
    loss.backward()
    grads = {name: p.grad.copy() for name, p in model.named_parameters()}
    return float(loss.data), grads, task.evaluate(model)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gat"])
@pytest.mark.parametrize("dataset", ["karate", "sbm"])
def test_a_field_gives_the_whole_graphs_loss_gradients_and_scores(kind, dataset):
    ds = {"name": "karate"} if dataset == "karate" else SBM
    graph = load_graph(config(dataset=ds).dataset)
    whole = GraphTask(config(kind, False, ds), graph)
    field = GraphTask(config(kind, True, ds), graph)
    (loss_w, grads_w, scores_w), (loss_f, grads_f, scores_f) = step(whole), step(field)
    assert "training rows" in field.placement and "training rows" not in whole.placement
    assert loss_f == pytest.approx(loss_w, rel=1e-6)
    for name, grad in grads_w.items():
        np.testing.assert_allclose(grads_f[name], grad, rtol=1e-4, atol=1e-7, err_msg=name)
    assert scores_f.val_loss == pytest.approx(scores_w.val_loss, rel=1e-5)
    assert (scores_f.train_acc, scores_f.val_acc, scores_f.test_acc) == (
        scores_w.train_acc, scores_w.val_acc, scores_w.test_acc)


def test_the_field_holds_every_in_neighbour_of_the_rows_it_is_for():
    task = GraphTask(config(receptive_field=True), load_graph(config().dataset))
    field = task._field("training", task.train_idx)
    outer, inner = field.blocks
    assert np.array_equal(inner.n_id[:inner.num_targets], task.train_idx)
    targets = task.edge_index[1]
    for block in field.blocks:  # each target's sampled in-edges are all of its in-edges
        ids = block.n_id
        want = np.bincount(targets[np.isin(targets, ids[:block.num_targets])],
                           minlength=task.num_nodes)[ids[:block.num_targets]]
        np.testing.assert_array_equal(block.num_sampled, want)
    assert np.array_equal(outer.n_id[:outer.num_targets], inner.n_id)  # layer 2 reads layer 1
    assert task.placement["training rows"].startswith(
        f"receptive field: {len(task.train_idx)} <- {len(inner.n_id)} <- {len(outer.n_id)} "
        f"of 600 rows")


def test_auto_uses_a_field_only_for_a_minority_of_the_graph():
    sbm = load_graph(config().dataset)  # 12 training and 102 scored rows of 600
    task = GraphTask(config(), sbm)
    step(task)
    assert {"training rows", "scored rows"} <= set(task.placement)
    karate = GraphTask(config(dataset={"name": "karate"}), load_graph(config(
        dataset={"name": "karate"}).dataset))  # scores read every one of its 34 nodes
    step(karate)
    assert "training rows" in karate.placement and "scored rows" not in karate.placement


@pytest.mark.parametrize("settings", [{"receptive_field": False}, {"kind": "mlp"},
                                      {"learn_edge_weight": True}, {"keyed_dropout": True}])
def test_without_a_field_the_task_computes_the_whole_graph(settings):
    setting = settings.pop("receptive_field", "auto")
    task = GraphTask(config(receptive_field=setting, **settings), load_graph(config().dataset))
    step(task)
    assert "training rows" not in task.placement and "scored rows" not in task.placement


@pytest.mark.parametrize(("settings", "why"), [
    ({"kind": "mlp"}, "model.kind 'mlp' reads no graph"),
    ({"learn_edge_weight": True}, "model.learn_edge_weight rebuilds"),
    ({"keyed_dropout": True}, "model.keyed_dropout keys masks"),
])
def test_asking_for_a_field_a_run_cannot_use_is_a_config_error(settings, why):
    with pytest.raises(ConfigError, match=rf"train.receptive_field: true cannot apply: {why}"):
        config(receptive_field=True, **settings)
    with pytest.raises(ConfigError, match="sampled mini-batches"):
        config_from_dict({"dataset": SBM, "model": {"kind": "sage"},
                          "train": {"batch_size": 4, "receptive_field": True}})


def test_a_seed_gives_the_same_run_with_dropout_on_a_field():
    cfg = config_from_dict({"dataset": SBM, "model": {"kind": "gcn", "dropout": 0.5},
                            "train": {"seed": 1, "epochs": 5, "patience": None},
                            "monitor": {"memory": False}})
    losses = []
    for _ in range(2):
        task = make_task(cfg)
        model = task.build_model(np.random.default_rng(0))
        shuffle = shuffle_generator(0)
        losses.append([float(b()[0].data) for _ in range(3) for b in task.batches(model, shuffle)])
    assert losses[0] == losses[1] and len(set(losses[0])) == 3  # masks differ step to step


def test_a_sampled_task_keeps_its_own_training_and_layerwise_scores():
    cfg = config_from_dict({"dataset": SBM, "model": {"kind": "sage"},
                            "train": {"batch_size": 4}, "sampler": {"fanouts": [3, 2]},
                            "monitor": {"memory": False}})
    task = make_task(cfg)
    task.evaluate(task.build_model(np.random.default_rng(0)))
    assert "scored rows" not in task.placement


def test_the_setting_is_checked():
    message = r"train.receptive_field must be one of 'auto' or true or false \(got 'sometimes'\)"
    with pytest.raises(ConfigError, match=message):
        config(receptive_field="sometimes")


def test_with_fields_for_training_and_scores_the_whole_graph_operand_waits_until_asked():
    graph = load_graph(config().dataset)
    task = GraphTask(config(), graph)
    assert set(task.operands()) == {"features"}
    assert task.placement["adjacency"].startswith("built on demand")
    whole = GraphTask(config(receptive_field=False), graph)
    assert set(whole.operands()) == {"features", "adjacency"}
    np.testing.assert_array_equal(task.operand.to_scipy("csr").toarray(),  # built when read
                                  whole.operand.to_scipy("csr").toarray())
    assert set(task.operands()) == {"features", "adjacency"}


@pytest.mark.parametrize("receptive_field", [False, True])
def test_scores_check_their_targets_once_and_equal_the_checked_functions(receptive_field,
                                                                         monkeypatch):
    """The first evaluate checks the splits' targets as `F.cross_entropy` and `F.accuracy`
    do; later ones skip the checks and give those functions' scores, bit for bit."""
    task = GraphTask(config(receptive_field=receptive_field), load_graph(config().dataset))
    model = task.build_model(np.random.default_rng(5))
    first = task.evaluate(model)
    field = task._field("scored", task.scored_idx)
    assert (field is None) == (not receptive_field)
    with no_grad():
        logits = task.logits(model) if field is None else field.logits(model)
    y, (train, val, test) = (task.y, task.splits) if field is None else task._scored
    pred = logits.data.argmax(axis=1)
    assert first.val_loss == float(F.cross_entropy(logits, y, val).data)
    assert (first.train_acc, first.val_acc, first.test_acc) == tuple(
        F.accuracy(pred, y, rows) for rows in (train, val, test))
    monkeypatch.setattr(F.Targets, "__init__", lambda *a, **k: pytest.fail("checked again"))
    again = task.evaluate(model)
    assert [again[c] for c in again] == [first[c] for c in first]


def test_a_bad_label_in_the_scored_rows_is_still_refused_by_the_first_evaluate():
    task = GraphTask(config(receptive_field=False), load_graph(config().dataset))
    task.y = task.y.copy()
    task.y[task.val_idx[0]] = 7  # 3 classes
    model = task.build_model(np.random.default_rng(5))
    with pytest.raises(ShapeError, match=r"cross_entropy: target ids must be in \[0, 3\)"):
        task.evaluate(model)


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_a_fields_frozen_input_rows_meet_each_first_block_once(kind, monkeypatch):
    """Without dropout, the first layer's input is the field's gathered rows, frozen, and its
    block operand is frozen by the layer: each field (training, scores) then computes
    B·X (16 columns) once over three epochs (`FixedProduct`); the whole graph's likewise."""
    from mgsparse.run import build_optimizer, train_epoch
    from mgsparse.sparse import ops as sparse_ops

    calls = []
    forward = sparse_ops.SpMM.forward
    monkeypatch.setattr(sparse_ops.SpMM, "forward", staticmethod(
        lambda ctx, *a: calls.append(a[1].shape[1]) or forward(ctx, *a)))
    graph = load_graph(config().dataset)
    for setting, kept in ((True, 2), (False, 1)):
        task = GraphTask(config(kind, setting, hidden=8), graph)
        model = task.build_model(np.random.default_rng(0))
        optimizer = build_optimizer(task.config.optim, model)
        calls.clear()
        for _ in range(3):
            train_epoch(model, optimizer, task.batches(model, shuffle_generator(0)), None)
            task.evaluate(model)
        assert calls.count(16) == kept, (setting, calls)


def test_a_fields_blocks_carry_the_graphs_edge_rows():
    """A graph with edge features: the training field's blocks (and so any layer that reads
    them) hold, for each block entry, the row of the edge it is, as the edge ids say."""
    import dataclasses

    from mgsparse.run.placed import PlacedGraph

    graph = load_graph(config().dataset)
    e = graph.num_edges
    attr = np.stack([np.arange(e), -np.arange(e)], axis=1).astype(np.float32)
    graph = dataclasses.replace(graph, edge_attr=attr, edge_type=np.arange(e) % 4)
    placed = PlacedGraph.from_graph(graph, "norm_adj", 0.1)
    field = placed.field("training", np.flatnonzero(graph.train_mask), 2)
    for block in field.blocks:
        assert block.nnz > 0 and block.edge_attr.shape == (block.nnz, 2)
        np.testing.assert_array_equal(block.edge_attr, attr[block.edge_id])
        np.testing.assert_array_equal(block.edge_type, block.edge_id % 4)
        src, dst = graph.edge_index[:, block.edge_id]  # the edges are the block's entries
        np.testing.assert_array_equal(block.n_id[block.col], src)
        np.testing.assert_array_equal(block.n_id[block.row], dst)
