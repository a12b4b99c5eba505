"""The one training loop: an epoch of steps, early stopping, runs over seeds, divergence,
interruption, alarms, and the memory report and first-step loss it offers, on graph tasks
(karate, a small SBM) and point tasks (moons)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mgsparse.data import karate_club
from mgsparse.engine import Tensor
from mgsparse.engine.draw import summarize
from mgsparse.nn import Linear
from mgsparse.nn import functional as F
from mgsparse.nn.module import Module, Parameter
from mgsparse.optim import SGD
from mgsparse.run import GraphTask, make_task
from mgsparse.run import loop as loop_module
from mgsparse.run.budget import BudgetEvent
from mgsparse.run.checkpoint import epochs_csv, metrics_dict
from mgsparse.run.loop import first_step_loss, fit, fit_run, measure_memory, train_epoch
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.results import EpochRow, Summary
from mgsparse.run.task import Task
from tests.conftest import make_config, moons_config


class NoStep(SGD):
    """SGD that never moves the parameters: isolates what an epoch measures."""

    def __init__(self, params):
        super().__init__(params, lr=1.0)
        self.steps = 0

    def step(self):
        self.steps += 1


@pytest.fixture(scope="module")
def karate():
    return karate_club()


def karate_task(karate, **sections) -> GraphTask:
    return GraphTask(make_config(**sections), karate)


# ---------------------------------------------------------------- one epoch


def test_an_epoch_of_several_batches_is_the_sample_weighted_mean_loss_and_largest_norm():
    rng = np.random.default_rng(0)
    model = Linear(3, 2, rng=rng)
    sizes = [3, 5, 2]
    data = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n)) for n in sizes]
    batches = [lambda X=X, y=y: (F.cross_entropy(model(Tensor(X)), y), len(y)) for X, y in data]
    losses, norms = [], []
    for X, y in data:  # each batch alone, from the same (unmoving) parameters
        model.zero_grad()
        loss = F.cross_entropy(model(Tensor(X)), y)
        loss.backward()
        losses.append(float(loss.data))
        norms.append(np.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2))
                                 for p in model.parameters())))
    optimizer = NoStep(model.parameters())
    loss, grad_norm = train_epoch(model, optimizer, batches, clip=None)
    assert optimizer.steps == 3
    assert loss == pytest.approx(np.dot(losses, sizes) / sum(sizes), rel=1e-6)
    assert loss != pytest.approx(np.mean(losses), rel=1e-6)  # weighted, not a mean of means
    assert grad_norm == pytest.approx(max(norms), rel=1e-5)
    assert grad_norm != pytest.approx(norms[-1], rel=1e-3)  # the largest, not the last


def test_an_epoch_of_mini_batches_reports_the_sample_mean_loss():
    config = moons_config()
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    optimizer = NoStep(model.parameters())
    loss, grad_norm = train_epoch(model, optimizer, task.batches(model, np.random.default_rng(0)),
                                  clip=None)
    assert optimizer.steps == 19  # ceil(600 / 32)
    d = task.data
    full = task.head.loss_fn(model(Tensor(d.X_train)), d.y_train).item()  # unchanged params
    assert loss == pytest.approx(full, rel=1e-5)
    assert grad_norm > 0


def test_a_graph_step_clips_and_returns_the_pre_clip_norm(karate):
    task = karate_task(karate)
    model = task.build_model(np.random.default_rng(0))
    optimizer = NoStep(model.parameters())
    loss, norm = train_epoch(model, optimizer, task.batches(model, np.random.default_rng(0)),
                             clip=1e-3)
    total = np.sqrt(sum((p.grad.astype(np.float64) ** 2).sum() for p in model.parameters()))
    assert norm > 1e-3 and total == pytest.approx(1e-3, rel=1e-3)
    assert loss == pytest.approx(np.log(2), abs=0.2)  # two classes, fresh weights


def test_clipping_bounds_each_mini_batch_step():
    task = make_task(moons_config("train.batch_size=null"))
    model = task.build_model(np.random.default_rng(0))
    before = [p.data.copy() for p in model.parameters()]
    optimizer = SGD(model.parameters(), lr=1.0)  # plain SGD: the step is -lr·clipped grad
    _, grad_norm = train_epoch(model, optimizer, task.batches(model, np.random.default_rng(0)),
                               clip=1e-3)
    moved = np.sqrt(sum(np.sum((p.data - b) ** 2) for p, b in zip(model.parameters(), before)))
    assert grad_norm > 1e-2  # the reported norm is the pre-clip one
    assert moved == pytest.approx(1e-3, rel=1e-3)


def test_a_non_finite_step_ends_the_epoch_without_an_update():
    model = Linear(2, 2, rng=np.random.default_rng(0))
    X = np.ones((2, 2), np.float32)
    good = lambda: (F.cross_entropy(model(Tensor(X)), np.array([0, 1])), 2)
    bad = lambda: (model(Tensor(X * np.nan)).sum(), 2)
    optimizer = NoStep(model.parameters())
    loss, _ = train_epoch(model, optimizer, [good, bad, good], clip=None)
    assert np.isnan(loss) and optimizer.steps == 1


# ---------------------------------------------------------------- one run, graph task


def test_karate_separates_the_two_factions(karate):
    """Two labelled leaders; accuracy over all 32 other members (val + test nodes)."""
    config = make_config(model={"hidden": 4}, train={"epochs": 200})
    task = GraphTask(config, karate)
    run = fit(config, task).runs[0]
    assert run.status == "completed" and len(run.rows) == 200
    model = task.restore(run.state)
    unlabeled = np.flatnonzero(~karate.train_mask)
    assert unlabeled.size == 32
    assert F.accuracy(task.logits(model), karate.y, unlabeled) >= 0.90


def test_same_seed_gives_identical_epoch_rows(karate):
    config = make_config(train={"epochs": 30})
    a = fit(config, GraphTask(config, karate)).runs[0].rows
    b = fit(config, GraphTask(config, karate)).runs[0].rows
    assert [dataclasses.astuple(r) for r in a] == [dataclasses.astuple(r) for r in b]
    other = make_config(train={"epochs": 30, "seed": 1})
    rows = fit(other, GraphTask(other, karate)).runs[0].rows
    assert [r.loss for r in rows] != [r.loss for r in a]


def test_runs_use_consecutive_seeds_and_report_mean_and_std(karate):
    config = make_config(train={"epochs": 20, "runs": 3, "seed": 5})
    result = fit(config, GraphTask(config, karate))
    assert [r.seed for r in result.runs] == [5, 6, 7]
    s = result.summary()
    assert isinstance(s, Summary)
    accs = [r.test_acc for r in result.runs]
    assert s.test_acc_mean == pytest.approx(np.mean(accs))
    assert s.test_acc_std == pytest.approx(np.std(accs))
    assert s.val_acc_mean == pytest.approx(np.mean([r.val_acc for r in result.runs]))
    assert s.runs == 3 and s.status == "ok"
    assert s.best_epochs == [r.best_epoch for r in result.runs]
    assert s.paper_test_acc is None  # no paper reports a GCN on karate


def test_summary_quotes_the_paper_accuracy_from_the_catalog():
    from mgsparse.run.results import TrainResult

    assert TrainResult(make_config("cora"), {}).summary().paper_test_acc == 0.815
    gat = make_config("citeseer", model={"kind": "gat"})
    assert TrainResult(gat, {}).summary().paper_test_acc == 0.725


def test_early_stopping_keeps_the_best_validation_epoch(karate):
    config = make_config(train={"epochs": 300, "patience": 5}, optim={"lr": 0.2})
    task = GraphTask(config, karate)
    run = fit(config, task).runs[0]
    assert run.status == "early_stopped"
    best = min(run.rows, key=lambda r: r.val_loss)
    assert run.best_epoch == best.epoch
    assert len(run.rows) == run.best_epoch + 5
    scores = task.evaluate(task.restore(run.state))  # the run's result is the best epoch's
    assert (run.train_acc, run.val_acc, run.test_acc) == (
        scores.train_acc, scores.val_acc, scores.test_acc)
    assert (scores.val_acc, scores.test_acc, scores.val_loss) == (
        best.val_acc, best.test_acc, best.val_loss)


class Stamped(Module):
    """One trained weight and a stamp no gradient moves: the epoch the parameters were
    stepped in, saved and reloaded with them."""

    def __init__(self, rng):
        super().__init__()
        self.w = Parameter(rng.normal(size=(1,)))
        self.stamp = Parameter(np.zeros(1))


class Scripted(Task):
    """A task whose scores are a script, one entry per epoch: each step stamps its epoch into
    the parameters, so the reloaded best parameters score exactly as their epoch did."""

    def __init__(self, config, script: list[dict[str, float]]):
        self.config, self.script = config, script
        self.placed = PlacedGraph.held(np.zeros((1, 1)), None, {}, {})

    def build_model(self, rng):
        return Stamped(rng)

    def batches(self, model, shuffle):
        def step():
            model.stamp.data += 1
            return (model.w * model.w).sum() + model.stamp.sum() * 0.0, 1
        yield step

    def evaluate(self, model):
        return self.metrics.scores(**self.script[int(model.stamp.data[0]) - 1])


def script(*val_losses: float) -> list[dict[str, float]]:
    """Epoch e: the given validation loss, and three accuracies that differ from each other
    and from every other epoch's (train e/8, val 1/2 + e/16, test 1/4 + e/32: exact floats)."""
    return [{"val_loss": v, "train_acc": e / 8, "val_acc": 0.5 + e / 16, "test_acc": 0.25 + e / 32}
            for e, v in enumerate(val_losses, 1)]


def test_each_accuracy_reaches_its_own_field_column_and_key():
    """Train, val and test accuracy differ at every epoch: a swap anywhere between the task's
    scores, the run's result, the rows, epochs.csv, metrics.json and the summary shows."""
    config = make_config(train={"epochs": 3, "patience": None}, optim={"weight_decay": 0.0})
    result = fit(config, Scripted(config, script(0.9, 0.5, 0.7)))
    (run,) = result.runs
    assert run.best_epoch == 2  # the lowest validation loss
    assert (run.train_acc, run.val_acc, run.test_acc) == (0.25, 0.625, 0.3125)
    assert [(r.train_acc, r.val_acc, r.test_acc) for r in run.rows] == [
        (0.125, 0.5625, 0.28125), (0.25, 0.625, 0.3125), (0.375, 0.6875, 0.34375)]
    header, *lines = epochs_csv(result).splitlines()
    row2 = dict(zip(header.split(","), lines[1].split(",")))
    assert [row2[k] for k in ("val_loss", "train_acc", "val_acc", "test_acc")] == [
        "0.5", "0.25", "0.625", "0.3125"]
    m = metrics_dict(result)
    assert [m["runs"][0][k] for k in ("train_acc", "val_acc", "test_acc")] == [0.25, 0.625, 0.3125]
    assert (m["summary"]["test_acc_mean"], m["summary"]["val_acc_mean"]) == (0.3125, 0.625)


def test_the_epoch_that_stops_over_budget_still_counts_for_the_best_parameters(monkeypatch):
    """Epoch 3 has the lowest validation loss and trips the over-budget stop: its parameters
    are the run's result, not epoch 2's."""
    def over_budget_at_3(task, epoch, peak, budget):
        return BudgetEvent(epoch, None, peak, peak, peak, 1.0, "over") if epoch == 3 else None

    class Traced:
        def begin(self, epoch):
            return True

        def end(self, held):
            return 0.0, 2.0

    monkeypatch.setattr(loop_module, "check_epoch", over_budget_at_3)
    config = make_config(train={"epochs": 10, "patience": None}, optim={"weight_decay": 0.0})
    run = fit_run(config, Scripted(config, script(0.9, 0.8, 0.5, 0.1)), 0, Traced())
    assert (run.status, len(run.rows), run.message) == ("over_budget", 3, "run 0: over")
    assert run.best_epoch == 3 and (run.val_loss, run.test_acc) == (0.5, 0.25 + 3 / 32)


def test_should_stop_ends_the_run_after_the_current_epoch(karate):
    config = make_config(train={"runs": 3})
    calls = []
    result = fit(config, GraphTask(config, karate), should_stop=lambda: len(calls) >= 7,
                 on_epoch=lambda *a: calls.append(a))
    assert len(result.runs) == 1 and result.runs[0].status == "interrupted"
    assert len(result.runs[0].rows) == 7 and result.interrupted
    assert result.summary().status == "interrupted"


def test_a_keyboard_interrupt_mid_epoch_aborts_the_run_and_keeps_what_it_had(karate):
    config = make_config(train={"runs": 3})
    calls = []

    def on_epoch(*args):
        calls.append(args)
        if len(calls) == 4:
            raise KeyboardInterrupt  # a second Ctrl-C / SIGTERM

    result = fit(config, GraphTask(config, karate), on_epoch=on_epoch)
    (run,) = result.runs
    assert run.status == "aborted" and run.message == "run 0 (seed 0) aborted"
    assert len(run.rows) == 4 and run.state and result.interrupted
    assert result.summary().status == "interrupted"


def test_a_non_finite_loss_stops_the_run_with_a_message(karate):
    config = make_config(train={"epochs": 50, "runs": 2})
    task = GraphTask(config, karate)
    bad = task.with_operands(Tensor(np.full((34, 34), np.nan, np.float32)), task.operand)
    result = fit(config, bad)
    (run,) = result.runs
    assert run.status == "diverged" and len(run.rows) == 1 and result.failed
    assert "diverged at epoch 1" in run.message and "optim.lr" in run.message
    assert result.summary().status == "diverged"
    assert not run.scores and result.summary().test_acc_mean == 0.0  # no parameters kept
    with pytest.raises(AttributeError, match="no score 'test_acc' .the run kept no parameters"):
        run.test_acc  # noqa: B018


def test_gradient_norm_far_above_the_clip_norm_raises_an_alarm(karate):
    config = make_config(train={"epochs": 3, "grad_clip_norm": 1e-4})
    alarms = []
    result = fit(config, GraphTask(config, karate),
                 on_epoch=lambda i, row, st, a: alarms.extend(a))
    assert alarms and "clip norm" in alarms[0]
    assert result.runs[0].alarms[0] == f"epoch 1: {alarms[0]}"


# ---------------------------------------------------------------- runs, point task


def test_point_runs_are_reproducible_and_report_like_graph_runs():
    config = moons_config("train.epochs=3", "train.runs=2")
    task = make_task(config)
    seen = []
    result = fit(config, task, on_epoch=lambda i, row, stats, alarms: seen.append((i, row)))
    again = fit(config, make_task(config))
    assert result.placement == {"features": "dense (point cloud)"}
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
    config = moons_config("train.epochs=30", *overrides)
    result = fit(config, make_task(config))
    assert result.runs[0].status == "completed"
    assert result.runs[0].test_acc >= 0.95


def test_three_blobs_with_one_vs_rest_sigmoids():
    config = moons_config("dataset.name=blobs", "dataset.num_classes=3", "dataset.noise=1.0",
                          "model.head=sigmoid", "train.loss=bce", "train.epochs=10")
    assert fit(config, make_task(config)).runs[0].test_acc >= 0.95


def test_weight_decay_shrinks_the_weights():
    def weight_norm(decay: str) -> float:
        config = moons_config("train.epochs=10", f"optim.weight_decay={decay}")
        run = fit(config, make_task(config)).runs[0]
        return float(sum(np.sum(v ** 2) for v in run.state.values()))

    assert weight_norm("0.3") < 0.5 * weight_norm("0")


def test_point_early_stopping_keeps_and_reloads_the_best_parameters():
    config = moons_config("train.patience=5")
    task = make_task(config)
    run = fit(config, task).runs[0]
    assert run.status == "early_stopped"
    assert len(run.rows) == run.best_epoch + 5
    best = run.rows[run.best_epoch - 1]
    assert best.val_loss == min(row.val_loss for row in run.rows)
    model = task.restore(run.state)
    again = task.evaluate(model)
    assert (again.val_loss, again.test_acc) == (best.val_loss, run.test_acc)
    assert np.mean(task.predict(model, task.data.X_test) == task.data.y_test) == run.test_acc


def test_point_divergence_and_interruption_end_the_series():
    config = moons_config("optim.name=sgd", "optim.lr=1e30", "train.grad_clip_norm=null",
                          "train.runs=3")
    blown = fit(config, make_task(config)).runs
    assert len(blown) == 1 and blown[0].status == "diverged"
    assert blown[0].message.startswith("run 0 (seed 0) diverged at epoch 1: loss nan")
    config = moons_config("train.runs=2")
    stopped = fit(config, make_task(config), should_stop=lambda: True).runs
    assert [(r.status, len(r.rows)) for r in stopped] == [("interrupted", 1)]


def test_clip_alarm_names_the_ratio():
    config = moons_config("train.epochs=1", "train.grad_clip_norm=0.001")
    run = fit(config, make_task(config)).runs[0]
    assert run.alarms and "x the clip norm 0.001" in run.alarms[0]


# ---------------------------------------------------------------- first step, memory


def test_first_step_loss_of_a_point_task_is_the_mlp_on_one_batch():
    loss = first_step_loss(moons_config(), make_task(moons_config()))
    assert loss.shape == () and loss.requires_grad
    # 3 Linear layers (x·W + b, one op each), ReLU between them, one fused cross-entropy
    assert summarize(loss) == {"CrossEntropy": 1, "LinearOp": 3, "Relu": 2}


def test_first_step_loss_of_a_gcn_on_karate(karate):
    config = make_config(train={"receptive_field": False})  # every layer on the whole graph
    loss = first_step_loss(config, GraphTask(config, karate))
    # X·W1 (SpMM: X is sparse), Â·(XW1) (MatMul: Â is dense), +b1, ReLU and the dropout after
    # it (one op), H·W2, Â·(HW2), +b2, cross-entropy
    assert summarize(loss) == {"SpMM": 1, "MatMul": 3, "Add": 2, "ReluDropout": 1,
                               "CrossEntropy": 1}


def test_memory_report_of_a_gcn_accounts_parameters_operands_and_saved_arrays(karate):
    config = make_config(model={"hidden": 4})
    report = measure_memory(config, GraphTask(config, karate))
    n_params = 34 * 4 + 4 + 4 * 2 + 2
    assert report.parameters == n_params * 4
    assert report.optimizer_state >= 2 * report.parameters  # Adam: two moments
    assert report.operands["adjacency"] == 34 * 34 * 4  # karate's Â is dense at threshold 0.1
    assert report.operands["features"] == 34 * (8 + 8 + 4)  # one-hot: row, col, value
    assert report.saved_for_backward and all(v >= 0 for v in report.saved_for_backward.values())
    assert report.traced_peak > 0


def test_memory_report_of_a_point_task_counts_parameters_and_the_points():
    config = moons_config()
    report = measure_memory(config, make_task(config))
    num_params = (2 * 16 + 16) + (16 * 16 + 16) + (16 * 2 + 2)
    assert report.parameters == 4 * num_params  # float32
    assert report.optimizer_state >= 2 * 4 * num_params  # Adam: two moments (+ scratch)
    assert report.operands == {"features": 600 * 2 * 4}  # the training points, no graph
    assert report.saved_for_backward["CrossEntropy"] > 0


def test_optim_schedule_sets_the_rate_the_run_steps_with(karate):
    """optim.schedule was validated and recorded in metrics.json but never built: a step
    schedule's run drew the constant-rate curve bit for bit. Now the rate the schedule gives
    epoch e is the one its step takes: epochs 1 and 2 score the same parameters either way
    (the rate first changes in epoch 2's step), the third differs; cosine warms up."""
    def losses(**optim):
        config = make_config(train={"epochs": 4, "runs": 1}, optim=optim,
                             model={"dropout": 0.0})
        return [row.loss for row in fit(config, GraphTask(config, karate)).runs[0].rows]

    constant = losses()
    step = losses(schedule="step", step_size=1, gamma=0.01)
    assert step[:2] == constant[:2]
    assert abs(step[2] - constant[2]) > 1e-4
    # from epoch 2 on the rate is 100x smaller: the loss moves far less than at constant rate
    assert abs(step[3] - step[2]) < 0.1 * abs(constant[3] - constant[2])
    warm = losses(schedule="cosine", warmup=2)  # epoch 1 steps at half the rate
    assert warm[0] == constant[0] and abs(warm[1] - constant[1]) > 1e-5
    # plateau reads the selection column (val accuracy, "max") after every epoch
    assert len(losses(schedule="plateau", plateau_patience=0, min_lr=1e-5)) == 4
