"""Point-cloud training: the splits, the heads and losses, mini-batch epochs, and the shared loop
(early stopping, best parameters, divergence, interruption) driving an MLP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.optim import SGD
from mgsparse.train import EpochRow
from mgsparse.train_points import (
    PLACEMENT,
    PointHead,
    build_point_model,
    evaluate_points,
    fit_points,
    load_points,
    measure_points_memory,
    point_loader,
    point_step_loss,
    predict_points,
    restore_point_model,
    train_epoch,
)
from mgsparse.viz import summarize

MOONS = Path(__file__).resolve().parents[1] / "configs" / "moons.yaml"
FAST = ["monitor.memory=false"]  # tracemalloc slows the many tiny steps ~10x


def moons(*overrides: str):
    return load_config(MOONS, FAST + list(overrides))


class NoStep:
    """An optimizer that never moves the parameters: isolates what an epoch measures."""

    def __init__(self):
        self.steps = 0

    def zero_grad(self):
        pass

    def step(self):
        self.steps += 1


# ---------------------------------------------------------------- data


def test_moons_split_sizes_types_and_seed():
    X_tr, y_tr, X_va, y_va, X_te, y_te = load_points(moons().dataset)
    assert [len(a) for a in (X_tr, X_va, X_te)] == [600, 200, 200]
    assert X_tr.shape == (600, 2) and X_tr.dtype == np.float32 and y_tr.dtype == np.int64
    assert set(np.unique(np.concatenate([y_tr, y_va, y_te]))) == {0, 1}
    assert abs(np.mean(np.concatenate([y_tr, y_va, y_te])) - 0.5) < 1e-12  # 500 of each
    again = load_points(moons().dataset)
    assert all(np.array_equal(a, b) for a, b in zip(again, (X_tr, y_tr, X_va, y_va, X_te, y_te)))
    other = load_points(moons("dataset.seed=1").dataset)
    assert not np.array_equal(other[0], X_tr)


def test_circles_and_blobs_have_their_classes():
    circles = load_points(moons("dataset.name=circles").dataset)
    assert set(np.unique(circles[1])) == {0, 1}
    blobs = load_points(moons("dataset.name=blobs", "dataset.num_classes=3").dataset)
    assert set(np.unique(blobs[1])) == {0, 1, 2}


def test_bad_point_cloud_splits_are_config_errors():
    with pytest.raises(ConfigError, match="at least one training and one validation"):
        load_points(moons("dataset.num_val=0").dataset)
    karate = load_config(MOONS.parent / "karate.yaml")
    with pytest.raises(ConfigError, match="not a point cloud"):
        load_points(karate.dataset)


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


# ---------------------------------------------------------------- one epoch


def test_an_epoch_is_one_step_per_mini_batch_and_reports_the_sample_mean_loss():
    config = moons()
    data = load_points(config.dataset)
    model, head = build_point_model(config, np.random.default_rng(0))
    loader = point_loader(config, data[0], data[1], seed=0)
    optimizer = NoStep()
    loss, grad_norm = train_epoch(model, head, loader, optimizer, clip=None)
    assert optimizer.steps == len(loader) == 19  # ceil(600 / 32)
    full = head.loss_fn(model(Tensor(data[0])), data[1]).item()  # unchanged parameters
    assert loss == pytest.approx(full, rel=1e-5)
    assert grad_norm > 0


def test_the_loader_shuffles_from_the_seed_and_sees_every_point_once():
    config = moons()
    data = load_points(config.dataset)
    first = [yb for _, yb in point_loader(config, data[0], data[1], seed=0)]
    again = [yb for _, yb in point_loader(config, data[0], data[1], seed=0)]
    other = [yb for _, yb in point_loader(config, data[0], data[1], seed=1)]
    assert [len(b) for b in first] == [32] * 18 + [24]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))
    assert sorted(np.concatenate(first).tolist()) == sorted(data[1].tolist())


def test_clipping_bounds_each_step():
    config = moons("train.batch_size=null")
    data = load_points(config.dataset)
    model, head = build_point_model(config, np.random.default_rng(0))
    before = [p.data.copy() for p in model.parameters()]
    optimizer = SGD(model.parameters(), lr=1.0)  # plain SGD: the step is -lr·clipped grad
    _, grad_norm = train_epoch(model, head, point_loader(config, data[0], data[1], 0), optimizer,
                               clip=1e-3)
    moved = np.sqrt(sum(np.sum((p.data - b) ** 2) for p, b in zip(model.parameters(), before)))
    assert grad_norm > 1e-2  # the reported norm is the pre-clip one
    assert moved == pytest.approx(1e-3, rel=1e-3)


# ---------------------------------------------------------------- runs


def test_fit_points_is_reproducible_and_reports_like_fit():
    config = moons("train.epochs=3", "train.runs=2")
    seen = []
    result = fit_points(config, on_epoch=lambda i, row, stats, alarms: seen.append((i, row)))
    again = fit_points(config)
    assert result.placement == PLACEMENT == {"features": "dense (point cloud)"}
    assert [r.seed for r in result.runs] == [0, 1]
    assert [(i, row.epoch) for i, row in seen] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]
    assert all(isinstance(row, EpochRow) for _, row in seen)
    assert [r.rows for r in result.runs] == [r.rows for r in again.runs]
    assert result.runs[0].rows != result.runs[1].rows  # another seed, another run


@pytest.mark.parametrize("overrides", [
    ("optim.name=sgd", "optim.lr=0.1", "optim.momentum=0.9"),
    ("model.head=sigmoid", "train.loss=bce"),
    ("train.loss=mse",),
    ("model.head=sigmoid", "train.loss=mse"),
], ids=["sgd-momentum", "sigmoid-bce", "softmax-mse", "sigmoid-mse"])
def test_every_optimizer_head_and_loss_learns_the_moons(overrides):
    result = fit_points(moons("train.epochs=30", *overrides))
    assert result.runs[0].status == "completed"
    assert result.runs[0].test_acc >= 0.95


def test_three_blobs_with_one_vs_rest_sigmoids():
    result = fit_points(moons("dataset.name=blobs", "dataset.num_classes=3", "dataset.noise=1.0",
                              "model.head=sigmoid", "train.loss=bce", "train.epochs=10"))
    assert result.runs[0].test_acc >= 0.95


def test_weight_decay_shrinks_the_weights():
    def weight_norm(decay: str) -> float:
        run = fit_points(moons("train.epochs=10", f"optim.weight_decay={decay}")).runs[0]
        return float(sum(np.sum(v ** 2) for v in run.state.values()))

    assert weight_norm("0.3") < 0.5 * weight_norm("0")


def test_early_stopping_keeps_and_reloads_the_best_parameters():
    config = moons("train.patience=5")
    run = fit_points(config).runs[0]
    assert run.status == "early_stopped"
    assert len(run.rows) == run.best_epoch + 5
    best = run.rows[run.best_epoch - 1]
    assert best.val_loss == min(row.val_loss for row in run.rows)
    model, head = restore_point_model(config, run.state)
    again = evaluate_points(model, head, load_points(config.dataset))
    assert (again["val_loss"], again["test_acc"]) == (best.val_loss, run.test_acc)
    X_test, y_test = load_points(config.dataset)[4:]
    assert np.mean(predict_points(model, head, X_test) == y_test) == run.test_acc


def test_divergence_and_interruption_end_the_run():
    blown = fit_points(moons("optim.name=sgd", "optim.lr=1e30", "train.grad_clip_norm=null",
                             "train.runs=3")).runs
    assert len(blown) == 1 and blown[0].status == "diverged"
    assert blown[0].message.startswith("run 0 (seed 0) diverged at epoch 1: loss nan")
    stopped = fit_points(moons("train.runs=2"), should_stop=lambda: True).runs
    assert [(r.status, len(r.rows)) for r in stopped] == [("interrupted", 1)]


def test_clip_alarm_names_the_ratio():
    run = fit_points(moons("train.epochs=1", "train.grad_clip_norm=0.001")).runs[0]
    assert run.alarms and "x the clip norm 0.001" in run.alarms[0]


# ---------------------------------------------------------------- one step, memory


def test_first_step_loss_graph_is_the_mlp_on_one_batch():
    loss = point_step_loss(moons())
    assert loss.shape == () and loss.requires_grad
    # 3 Linear layers: 3 MatMul + 3 bias Add, ReLU between them, one fused cross-entropy
    assert summarize(loss) == {"Add": 3, "CrossEntropy": 1, "MatMul": 3, "Relu": 2}


def test_memory_report_counts_parameters_and_the_batch():
    report = measure_points_memory(moons())
    num_params = (2 * 16 + 16) + (16 * 16 + 16) + (16 * 2 + 2)
    assert report.parameters == 4 * num_params  # float32
    assert report.optimizer_state >= 2 * 4 * num_params  # Adam: two moments (+ scratch)
    assert report.features == 32 * 2 * 4 and report.adjacency == 0
    assert report.saved_for_backward["CrossEntropy"] > 0
