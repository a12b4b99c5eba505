"""The `Task` protocol: what every kind of run gives the loop, and the behaviour a new kind
inherits (restore in eval mode, the first step's loss, its own shuffling stream)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.nn import Linear
from mgsparse.nn import functional as F
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.task import (
    ACCURACY_METRICS,
    Metric,
    Scores,
    Task,
    TaskMetrics,
    shuffle_generator,
)


class TwoBatches(Task):
    """The smallest task: a linear model, two batches per epoch, fixed scores."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.X, self.y = rng.normal(size=(6, 3)).astype(np.float32), np.array([0, 1] * 3)
        self.placed = PlacedGraph.held(self.X, None, {"features": "dense (six points)"},
                                       {"features": 1.0})
        self.shuffles = []

    def build_model(self, rng):
        return Linear(3, 2, rng=rng)

    def batches(self, model, shuffle):
        self.shuffles.append(shuffle)
        order = shuffle.permutation(6)
        for part in (order[:4], order[4:]):
            yield lambda part=part: (F.cross_entropy(model(Tensor(self.X[part])), self.y[part]),
                                     len(part))

    def evaluate(self, model):
        return self.metrics.scores(val_loss=0.5, train_acc=1.0, val_acc=1.0, test_acc=1.0)


def test_a_task_must_say_how_to_build_train_and_evaluate():
    class Incomplete(Task):
        def build_model(self, rng):
            return Linear(1, 1, rng=rng)

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


def test_restore_loads_the_state_into_a_fresh_model_in_eval_mode():
    task = TwoBatches()
    trained = task.build_model(np.random.default_rng(9))
    model = task.restore(trained.state_dict())
    assert not model.training
    assert all(np.array_equal(model.state_dict()[k], v) for k, v in trained.state_dict().items())


def test_first_loss_is_the_first_batch_in_training_mode_with_its_graph():
    task = TwoBatches()
    model = task.build_model(np.random.default_rng(0))
    model.eval()
    loss = task.first_loss(model, seed=3)
    assert model.training and loss.requires_grad and loss._ctx is not None
    order = shuffle_generator(3).permutation(6)[:4]
    want = F.cross_entropy(model(Tensor(task.X[order])), task.y[order])
    assert float(loss.data) == pytest.approx(float(want.data), rel=1e-6)


def test_the_shuffling_stream_is_the_seeds_own():
    a, b = shuffle_generator(0).random(4), shuffle_generator(0).random(4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, shuffle_generator(1).random(4))
    assert not np.array_equal(a, np.random.default_rng(0).random(4))  # not the init stream


def test_a_task_shows_what_it_holds_and_its_budget_is_the_one_it_was_given():
    task = TwoBatches()
    assert task.operands() == {"features": task.X}
    assert task.placement == {"features": "dense (six points)"} and task.densities["features"] == 1
    assert task.placed.dense_operands() == []  # held as given: nothing for the budget to switch
    assert task.memory_budget() is None
    task.budget = 123
    assert task.memory_budget() == 123


# ---------------------------------------------------------------- the metric declaration


AUC = TaskMetrics(columns=(Metric("val_auc", True), Metric("test_auc", True),
                           Metric("val_loss", False)), select="val_auc")


def test_a_task_scores_classification_unless_it_declares_otherwise():
    task = TwoBatches()
    assert task.metrics is ACCURACY_METRICS
    assert ACCURACY_METRICS.names == ("val_loss", "train_acc", "val_acc", "test_acc")
    scores = task.evaluate(None)
    assert isinstance(scores, Scores) and list(scores) == list(ACCURACY_METRICS.names)
    assert (scores.val_loss, scores["test_acc"], dict(scores)["train_acc"]) == (0.5, 1.0, 1.0)
    with pytest.raises(AttributeError, match="no score 'test_auc'"):
        scores.test_auc  # noqa: B018


def test_scores_come_back_in_declared_order_and_must_be_exactly_the_columns():
    scores = AUC.scores(val_loss=0.3, test_auc=0.8, val_auc=0.9)
    assert list(scores.items()) == [("val_auc", 0.9), ("test_auc", 0.8), ("val_loss", 0.3)]
    with pytest.raises(ValueError, match=r"\['test_auc', 'val_auc'\] are not the declared"):
        AUC.scores(val_auc=0.9, test_auc=0.8)
    with pytest.raises(ValueError, match="not the declared"):
        AUC.scores(val_auc=0.9, test_auc=0.8, val_loss=0.3, test_acc=0.5)


def test_the_defaults_of_a_declaration_follow_its_columns():
    assert AUC.summary == ("test_auc_mean", "test_auc_std", "val_auc_mean", "val_auc_std",
                           "val_loss_mean", "val_loss_std")
    assert AUC.summary_columns == ("test_auc", "val_auc", "val_loss")
    assert AUC.per_run == ("val_auc", "test_auc", "val_loss")
    assert AUC.live == ("val_auc", "val_loss")  # the test split is not watched while training
    assert AUC.legend == ""  # the live headers are the column names themselves
    assert AUC.metric("val_auc").label == "val auc" and AUC.metric("val_auc").format(0.5) == "0.5000"
    assert ACCURACY_METRICS.metric("val_acc").format(0.5, digits=1) == "50.0%"


@pytest.mark.parametrize(("higher", "value", "best", "want"), [
    (True, 0.9, 0.8, True), (True, 0.8, 0.9, False), (True, 0.8, 0.8, False),
    (False, 0.8, 0.9, True), (False, 0.9, 0.8, False),
    (True, 0.1, None, True), (True, float("nan"), None, False), (False, float("inf"), None, False),
])
def test_the_selection_follows_the_declared_direction(higher, value, best, want):
    metrics = TaskMetrics(columns=(Metric("val_x", higher),), select="val_x")
    assert metrics.better(value, best) is want


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Metric("auc", True), "'auc' is not <split>_<metric>"),
    (lambda: Metric("dev_auc", True), "'dev_auc' is not <split>_<metric>"),
    (lambda: TaskMetrics(columns=(), select="val_auc"), "distinct and not empty"),
    (lambda: TaskMetrics(columns=(Metric("val_a", True),) * 2, select="val_a"), "distinct"),
    (lambda: TaskMetrics(columns=(Metric("val_a", True),), select="val_b"), r"\['val_b'\]"),
    (lambda: TaskMetrics(columns=(Metric("val_a", True),), select="val_a",
                         summary=("val_a_max",)), "end in _mean or _std"),
    (lambda: TaskMetrics(columns=(Metric("val_a", True),), select="val_a",
                         live=("test_a",)), r"\['test_a'\]"),
])
def test_a_declaration_that_names_what_it_lacks_is_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()
