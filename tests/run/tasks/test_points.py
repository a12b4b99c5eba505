"""Point clouds: the splits `load_points` makes, the heads and their losses, and the shuffled
mini-batches a `PointTask` yields each epoch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.run import Scores
from mgsparse.run.tasks.points import PointHead, PointSplits, PointTask, load_points
from tests.conftest import moons_config

# ---------------------------------------------------------------- data


def test_moons_split_sizes_types_and_seed():
    d = load_points(moons_config().dataset)
    assert isinstance(d, PointSplits)
    assert [len(a) for a in (d.X_train, d.X_val, d.X_test)] == [600, 200, 200]
    assert d.X_train.shape == (600, 2) and d.X_train.dtype == np.float32
    assert d.y_train.dtype == np.int64
    labels = np.concatenate([d.y_train, d.y_val, d.y_test])
    assert set(np.unique(labels)) == {0, 1}
    assert abs(np.mean(labels) - 0.5) < 1e-12  # 500 of each
    again = load_points(moons_config().dataset)
    assert all(np.array_equal(a, b) for a, b in
               zip(dataclasses.astuple(again), dataclasses.astuple(d)))
    other = load_points(moons_config("dataset.seed=1").dataset)
    assert not np.array_equal(other.X_train, d.X_train)


def test_circles_and_blobs_have_their_classes():
    circles = load_points(moons_config("dataset.name=circles").dataset)
    assert set(np.unique(circles.y_train)) == {0, 1}
    blobs = load_points(moons_config("dataset.name=blobs", "dataset.num_classes=3").dataset)
    assert set(np.unique(blobs.y_train)) == {0, 1, 2}


def test_bad_point_cloud_splits_are_config_errors():
    with pytest.raises(ConfigError, match="validation"):
        load_points(moons_config("dataset.num_val=0").dataset)


# ---------------------------------------------------------------- heads and losses


def test_head_outputs_targets_and_predictions():
    assert PointHead("softmax", "cross_entropy", 2).num_outputs == 2
    assert PointHead("sigmoid", "bce", 2).num_outputs == 1
    assert PointHead("sigmoid", "bce", 3).num_outputs == 3  # one-vs-rest
    y = np.array([0, 1, 1])
    assert PointHead("sigmoid", "bce", 2).targets(y, np.float32).tolist() == [[0], [1], [1]]
    assert PointHead("softmax", "mse", 3).targets(np.array([2, 0]), np.float32).tolist() == [
        [0, 0, 1], [1, 0, 0]]
    logits = np.array([[-0.1], [0.2], [0.0]])
    assert PointHead("sigmoid", "bce", 2).predict(logits).tolist() == [0, 1, 0]
    assert PointHead("softmax", "cross_entropy", 3).predict(
        np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]])).tolist() == [1, 0]


def test_losses_match_their_formulas():
    rng = np.random.default_rng(0)
    y = np.array([0, 1, 1, 0, 1])
    z1 = rng.normal(size=(5, 1))
    p = 1 / (1 + np.exp(-z1[:, 0]))
    bce = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    got = PointHead("sigmoid", "bce", 2).loss_fn(Tensor(z1, dtype=np.float64), y)
    assert got.item() == pytest.approx(bce, rel=1e-12)
    assert PointHead("sigmoid", "mse", 2).loss_fn(Tensor(z1), y).item() == pytest.approx(
        np.mean((p - y) ** 2), rel=1e-5)
    z2 = rng.normal(size=(5, 2))
    soft = np.exp(z2) / np.exp(z2).sum(axis=1, keepdims=True)
    ce = -np.mean(np.log(soft[np.arange(5), y]))
    assert PointHead("softmax", "cross_entropy", 2).loss_fn(
        Tensor(z2, dtype=np.float64), y).item() == pytest.approx(ce, rel=1e-12)
    assert PointHead("softmax", "mse", 2).loss_fn(
        Tensor(z2, dtype=np.float64), y).item() == pytest.approx(
        np.mean((soft - np.eye(2)[y]) ** 2), rel=1e-12)


# ---------------------------------------------------------------- the task


def test_the_task_builds_an_mlp_sized_to_its_head():
    task = PointTask(moons_config("model.head=sigmoid", "train.loss=bce"))
    model = task.build_model(np.random.default_rng(0))
    assert model(Tensor(task.data.X_val)).shape == (200, 1)  # one sigmoid output, 2 classes
    assert task.placement == {"features": "dense (point cloud)"}
    assert set(task.operands()) == {"features"}


def test_batches_shuffle_from_the_generator_and_see_every_point_once():
    task = PointTask(moons_config())
    model = task.build_model(np.random.default_rng(0))
    model.eval()

    def labels(seed):
        out = []
        for batch in task.batches(model, np.random.default_rng(seed)):
            loss, count = batch()
            assert loss.shape == () and loss.requires_grad
            out.append(count)
        return out

    assert labels(0) == [32] * 18 + [24]
    # the ordering: the same generator gives the same batches, another gives others
    firsts = []
    for seed in (0, 0, 1):
        (first, *_) = task.batches(model, np.random.default_rng(seed))
        firsts.append(float(first()[0].data))
    assert firsts[0] == firsts[1] != firsts[2]


def test_a_full_batch_is_the_whole_training_set():
    task = PointTask(moons_config("train.batch_size=null"))
    model = task.build_model(np.random.default_rng(0))
    model.eval()
    (batch,) = list(task.batches(model, np.random.default_rng(0)))
    loss, count = batch()
    assert count == 600
    want = task.head.loss_fn(model(Tensor(task.data.X_train)), task.data.y_train)
    assert float(loss.data) == pytest.approx(float(want.data), rel=1e-6)


def test_evaluate_and_predict_agree_on_every_split():
    task = PointTask(moons_config())
    model = task.build_model(np.random.default_rng(3))
    scores = task.evaluate(model)
    assert isinstance(scores, Scores)
    d = task.data
    for X, y, acc in ((d.X_train, d.y_train, scores.train_acc), (d.X_val, d.y_val, scores.val_acc),
                      (d.X_test, d.y_test, scores.test_acc)):
        assert acc == pytest.approx(np.mean(task.predict(model, X) == y))
    want = task.head.loss_fn(model(Tensor(d.X_val)), d.y_val)
    assert scores.val_loss == pytest.approx(float(want.data), rel=1e-6)
