"""The training loop on graphs that need no network: karate and a small SBM."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.data import karate_club, sbm
from mgsparse.engine import Tensor, no_grad
from mgsparse.nn import functional as F
from mgsparse.problem import build_model, build_optimizer, first_layer_parameters, prepare
from mgsparse.sparse import SparseTensor
from mgsparse.train import evaluate, fit, measure_memory, train_step


def make_config(**sections):
    base = {"dataset": {"name": "karate"}, "model": {"hidden": 4},
            "train": {"epochs": 200, "patience": None}, "monitor": {"memory": False}}
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    return config_from_dict(base)


@pytest.fixture(scope="module")
def karate():
    return karate_club()


def test_karate_separates_the_two_factions(karate):
    """Two labelled leaders; accuracy over all 32 other members (val + test nodes)."""
    config = make_config()
    problem = prepare(config, karate)
    run = fit(config, problem).runs[0]
    assert run.status == "completed" and len(run.rows) == 200
    model = build_model(config.model, problem, np.random.default_rng(0))
    model.load_state_dict(run.state)
    model.eval()
    with no_grad():
        logits = model(problem.features, problem.norm_adj)
    unlabeled = np.flatnonzero(~karate.train_mask)
    assert unlabeled.size == 32
    assert F.accuracy(logits, karate.y, unlabeled) >= 0.90


def test_same_seed_gives_identical_epoch_rows(karate):
    config = make_config(train={"epochs": 30})
    a = fit(config, prepare(config, karate)).runs[0].rows
    b = fit(config, prepare(config, karate)).runs[0].rows
    assert [dataclasses.astuple(r) for r in a] == [dataclasses.astuple(r) for r in b]
    other = fit(make_config(train={"epochs": 30, "seed": 1}), prepare(config, karate)).runs[0].rows
    assert [r.loss for r in other] != [r.loss for r in a]


def test_runs_use_consecutive_seeds_and_report_mean_and_std(karate):
    config = make_config(train={"epochs": 20, "runs": 3, "seed": 5})
    result = fit(config, prepare(config, karate))
    assert [r.seed for r in result.runs] == [5, 6, 7]
    s = result.summary()
    accs = [r.test_acc for r in result.runs]
    assert s["test_acc_mean"] == pytest.approx(np.mean(accs))
    assert s["test_acc_std"] == pytest.approx(np.std(accs))
    assert 0 <= s["val_acc_mean"] <= 1 and s["runs"] == 3


def test_sparse_and_dense_paths_give_the_same_loss_and_gradients():
    graph = sbm(num_nodes=60, num_classes=3, avg_degree=4, homophily=0.8, num_features=12,
                seed=3)
    grads = []
    for threshold in (1.0, 0.0):
        config = make_config(dataset={"name": "synthetic"}, sparse={"sparsity_threshold": threshold},
                             model={"dropout": 0.0})
        problem = prepare(config, graph, dtype=np.float64)
        want = SparseTensor if threshold == 1.0 else Tensor
        assert isinstance(problem.norm_adj, want) and isinstance(problem.features, want)
        model = build_model(config.model, problem, np.random.default_rng(0))
        for p in model.parameters():  # float64 for an exact comparison
            p.data = p.data.astype(np.float64)
        loss = F.cross_entropy(model(problem.features, problem.norm_adj), problem.y,
                               problem.train_idx)
        loss.backward()
        grads.append((float(loss.data), [p.grad for p in model.parameters()]))
    (loss_s, g_s), (loss_d, g_d) = grads
    assert loss_s == pytest.approx(loss_d, rel=1e-12)
    for a, b in zip(g_s, g_d):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_early_stopping_keeps_the_best_validation_epoch(karate):
    config = make_config(train={"epochs": 300, "patience": 5}, optim={"lr": 0.2})
    run = fit(config, prepare(config, karate)).runs[0]
    assert run.status == "early_stopped"
    best = min(run.rows, key=lambda r: r.val_loss)
    assert run.best_epoch == best.epoch
    assert len(run.rows) == run.best_epoch + 5


def test_should_stop_ends_the_run_after_the_current_epoch(karate):
    config = make_config(train={"runs": 3})
    calls = []
    result = fit(config, prepare(config, karate), should_stop=lambda: len(calls) >= 7,
                 on_epoch=lambda *a: calls.append(a))
    assert len(result.runs) == 1 and result.runs[0].status == "interrupted"
    assert len(result.runs[0].rows) == 7 and result.interrupted


def test_a_non_finite_loss_stops_the_run_with_a_message(karate):
    config = make_config(train={"epochs": 50})
    problem = prepare(config, karate)
    bad = dataclasses.replace(problem, features=problem.features * float("nan"))
    result = fit(config, bad)
    run = result.runs[0]
    assert run.status == "diverged" and len(run.rows) == 1 and result.failed
    assert "diverged at epoch 1" in run.message and "optim.lr" in run.message


def test_gradient_norm_far_above_the_clip_norm_raises_an_alarm(karate):
    config = make_config(train={"epochs": 3, "grad_clip_norm": 1e-4})
    alarms = []
    fit(config, prepare(config, karate), on_epoch=lambda i, row, st, a: alarms.extend(a))
    assert alarms and "clip norm" in alarms[0]


def test_train_step_clips_and_returns_the_pre_clip_norm(karate):
    config = make_config()
    problem = prepare(config, karate)
    model = build_model(config.model, problem, np.random.default_rng(0))
    opt = build_optimizer(config.optim, model)
    loss, norm = train_step(model, problem, opt, clip=1e-3)
    total = np.sqrt(sum((p.grad.astype(np.float64) ** 2).sum() for p in model.parameters()))
    assert norm > 1e-3 and total == pytest.approx(1e-3, rel=1e-3)
    assert loss == pytest.approx(np.log(2), abs=0.2)  # two classes, fresh weights


def test_weight_decay_applies_to_the_first_layer_only(karate):
    config = make_config()
    problem = prepare(config, karate)
    model = build_model(config.model, problem, np.random.default_rng(0))
    opt = build_optimizer(config.optim, model)
    first = {id(p) for p in first_layer_parameters(model)}
    assert first == {id(model.convs[0].weight), id(model.convs[0].bias)}
    decays = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert all(decays[i] == 5e-4 for i in first)
    assert all(d == 0 for i, d in decays.items() if i not in first)


def test_memory_report_accounts_parameters_operands_and_saved_arrays(karate):
    config = make_config()
    problem = prepare(config, karate)
    report = measure_memory(config, problem)
    n_params = 34 * 4 + 4 + 4 * 2 + 2
    assert report.parameters == n_params * 4
    assert report.optimizer_state >= 2 * report.parameters  # Adam: two moments
    assert report.adjacency == 34 * 34 * 4  # karate's Â is dense at threshold 0.1
    assert report.saved_for_backward and all(v >= 0 for v in report.saved_for_backward.values())
    assert report.traced_peak > 0


def test_evaluate_reports_fractions(karate):
    config = make_config()
    problem = prepare(config, karate)
    model = build_model(config.model, problem, np.random.default_rng(0))
    metrics = evaluate(model, problem)
    assert set(metrics) == {"val_loss", "train_acc", "val_acc", "test_acc"}
    assert all(0 <= metrics[k] <= 1 for k in ("train_acc", "val_acc", "test_acc"))
