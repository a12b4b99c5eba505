"""A step whose Python chooses between ops is never frozen by the replay (`run/replay.py`):
a stochastic-depth block that flips a coin from a Generator of its own, or from the one its
dropout masks come from, and a branch on an attribute the scores change, train the same bits
from tape and eager, epoch by epoch; ordinary dropout models still run from their tapes."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor
from mgsparse.config import config_from_dict
from mgsparse.nn import Linear, Module, Parameter
from mgsparse.run import make_task
from mgsparse.run.loop import fit
from mgsparse.run.modelstate import ModelState
from mgsparse.run.replay import Replay
from tests.run.test_replay import SBM

EPOCHS = 12


class StochasticDepth(Module):
    """A residual block skipped in training with probability `p` (stochastic depth): a coin
    flipped in Python, between ops, from `coin` (None: the dropout generator `rng`)."""

    def __init__(self, in_features: int, hidden: int, num_classes: int,
                 rng: np.random.Generator, coin: np.random.Generator | None, p: float = 0.5):
        self.rng, self.coin, self.p = rng, coin, p
        self.lin_in = Linear(in_features, hidden, rng=rng)
        self.block = Linear(hidden, hidden, rng=rng)
        self.lin_out = Linear(hidden, num_classes, rng=rng)

    def forward(self, x, adj):
        h = (adj @ self.lin_in(x)).relu().dropout(0.5, self.training, self.rng)
        coin = self.coin if self.coin is not None else self.rng
        if not self.training or coin.random() >= self.p:  # the block is kept
            h = h + (adj @ self.block(h)).relu()
        return adj @ self.lin_out(h)


class Scheduled(Module):
    """A branch on an attribute the step does not change but the scores do: the block joins
    once the model has been scored `start` times (a curriculum read from the model)."""

    def __init__(self, in_features: int, hidden: int, num_classes: int,
                 rng: np.random.Generator, start: int = 5):
        self.rng, self.start, self.scored = rng, start, 0
        self.lin_in = Linear(in_features, hidden, rng=rng)
        self.block = Linear(hidden, hidden, rng=rng)
        self.lin_out = Linear(hidden, num_classes, rng=rng)

    def forward(self, x, adj):
        h = (adj @ self.lin_in(x)).relu().dropout(0.5, self.training, self.rng)
        if not self.training:
            self.scored += 1
        elif self.scored >= self.start:
            h = h + (adj @ self.block(h)).relu()
        return adj @ self.lin_out(h)


def trained(build, replay: bool):
    cfg = config_from_dict({
        "dataset": SBM, "model": {"kind": "gcn", "hidden": 16},
        "train": {"epochs": EPOCHS, "patience": None, "replay": replay,
                  "receptive_field": False},
        "monitor": {"memory": False}})
    task = make_task(cfg)
    task.build_model = lambda rng: build(task.num_features, task.num_classes, rng)
    return task, fit(cfg, task).runs[0]


def losses(run) -> list[tuple]:
    return [(r.loss, r.grad_norm, dict(r.scores)) for r in run.rows]


def own_coin(f, c, rng):
    return StochasticDepth(f, 16, c, rng, np.random.default_rng(1))


def shared_coin(f, c, rng):
    return StochasticDepth(f, 16, c, rng, None)


@pytest.mark.parametrize("build", [own_coin, shared_coin], ids=["own", "shared"])
def test_stochastic_depth_trains_the_same_from_tape_and_eager(build):
    task, replayed = trained(build, True)
    _, eager = trained(build, False)
    assert [r.loss for r in replayed.rows] == [r.loss for r in eager.rows]  # bitwise, each epoch
    assert losses(replayed) == losses(eager)
    step, scores = (task._replays[training][2] for training in (True, False))
    assert not step.replaying and not step.enabled  # the coin is Python's: eager for good
    assert scores.replaying  # eval mode flips no coin: the scores still run from their tape


def test_a_branch_on_an_attribute_the_scores_change_is_not_replayed_stale():
    build = lambda f, c, rng: Scheduled(f, 16, c, rng)
    task, replayed = trained(build, True)
    _, eager = trained(build, False)
    assert losses(replayed) == losses(eager)
    model = task._replays[True][0]
    assert model.scored >= EPOCHS > model.start  # scored every epoch (and the best once more)
    # the block joined the step at epoch 6: its weights trained, through the tape or not
    assert model.block.weight.grad is not None and np.any(model.block.weight.grad != 0)


def test_a_generator_is_marked_by_its_state_not_its_identity():
    m = StochasticDepth(4, 3, 2, np.random.default_rng(0), np.random.default_rng(1))
    before = ModelState(m)
    assert not before.drew_outside_ops(ModelState(m), [])
    m.coin.random()  # the same object, another state
    assert before.drew_outside_ops(ModelState(m), [])
    m.coin = np.random.default_rng(1)  # another object, the state it started from
    assert before.changed(ModelState(m))


class Coin(Module):
    """x·w after a dropout, with one number drawn in Python just `before` or just `after`
    the dropout's mask, from the generator that mask is drawn from (None: no such draw)."""

    def __init__(self, coin: str | None):
        self.rng, self.coin = np.random.default_rng(0), coin
        self.w = Parameter(np.ones((4, 2)))

    def forward(self, x):
        if self.coin == "before":
            self.rng.random()
        h = x.dropout(0.5, self.training, self.rng)
        if self.coin == "after":
            self.rng.random()
        return h @ self.w


@pytest.mark.parametrize("coin", ["before", "after", None])
def test_a_number_drawn_beside_an_op_that_draws_from_the_same_generator_is_seen(coin):
    """The ops' draws account for a generator's advance: one more from Python, right before
    or right after a dropout's own draw, keeps the step eager; without it the tape runs,
    redrawing the mask. Every step's loss is eager's either way."""
    x = Tensor(np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32))
    model, eager = Coin(coin), Coin(coin)
    replay = Replay(model, training=True)
    for _ in range(Replay.ATTEMPTS + 2):
        loss, _ = replay.step(lambda: ((model(x) ** 2).sum(), None))
        assert loss.data.tobytes() == (eager(x) ** 2).sum().data.tobytes()
    assert replay.replaying == replay.enabled == (coin is None)


@pytest.fixture
def global_seed():
    saved = np.random.get_state()
    yield
    np.random.set_state(saved)


def test_a_coin_from_numpys_global_generator_keeps_the_step_eager(global_seed):
    class GlobalCoin(StochasticDepth):
        def forward(self, x, adj):
            h = (adj @ self.lin_in(x)).relu()
            if not self.training or np.random.random() >= self.p:
                h = h + (adj @ self.block(h)).relu()
            return adj @ self.lin_out(h)

    build = lambda f, c, rng: GlobalCoin(f, 16, c, rng, None)
    np.random.seed(3)
    task, replayed = trained(build, True)
    np.random.seed(3)
    _, eager = trained(build, False)
    assert losses(replayed) == losses(eager)
    assert not task._replays[True][2].replaying
