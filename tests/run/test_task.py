"""The `Task` protocol: what every kind of run gives the loop, and the behaviour a new kind
inherits (restore in eval mode, the first step's loss, its own shuffling stream)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.nn import Linear
from mgsparse.nn import functional as F
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.task import Scores, Task, shuffle_generator


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
        return Scores(0.5, 1.0, 1.0, 1.0)


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
