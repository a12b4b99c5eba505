"""Full-batch steps and scores run from tapes (`run/replay.py`): every node model gives the
same bits as with `train.replay: false`, the tapes engage where a step's Python adds nothing,
and stay off where it does."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.catalog import NODE_MODEL_KINDS
from mgsparse.config import config_from_dict
from mgsparse.run import make_task
from mgsparse.run.loop import fit

SBM = {"name": "synthetic", "num_nodes": 400, "num_classes": 3, "avg_degree": 4,
       "num_features": 12, "split": "random", "num_train_per_class": 5, "num_val": 30,
       "num_test": 60, "normalize_features": False}
EPOCHS = 6
# the models whose step or scores keep changing the model or read new leaves every epoch:
# GIN's MLP folds its BatchNorm into the last Linear from the running statistics (scores)
EAGER_SCORES = {"gin"}


def config(kind: str, replay: bool, field="auto", **train):
    return config_from_dict({
        "dataset": SBM, "model": {"kind": kind, "dropout": 0.5},
        "train": {"epochs": EPOCHS, "patience": None, "replay": replay,
                  "receptive_field": field, **train},
        "monitor": {"memory": False}})


def trained(kind: str, replay: bool, **kwargs):
    cfg = config(kind, replay, **kwargs)
    task = make_task(cfg)
    result = fit(cfg, task)
    return task, result.runs[0]


def same_run(a, b) -> bool:
    return ([(r.loss, r.grad_norm, dict(r.scores)) for r in a.rows]
            == [(r.loss, r.grad_norm, dict(r.scores)) for r in b.rows]
            and a.state.keys() == b.state.keys()
            and all(np.array_equal(a.state[k], b.state[k]) for k in a.state))


@pytest.mark.parametrize("kind", NODE_MODEL_KINDS)
@pytest.mark.parametrize("field", ["auto", False])
def test_replayed_runs_are_bitwise_the_eager_runs(kind, field):
    task, replayed = trained(kind, True, field=field)
    _, eager = trained(kind, False, field=field)
    assert same_run(replayed, eager)
    step, scores = (task._replays[training][2] for training in (True, False))
    assert scores.replaying == (kind not in EAGER_SCORES)
    assert step.replaying == (kind != "gin")  # GIN's BatchNorm moves every step
    # recordings that never match stop being made (`Replay.ATTEMPTS`): eager for good
    assert scores.enabled == (kind not in EAGER_SCORES) and step.enabled == (kind != "gin")


def test_a_model_whose_steps_change_it_stays_eager():
    raw = config("gcn", True, field=False).to_dict()
    cfg = config_from_dict({**raw, "model": {**raw["model"], "norm": "batch"}})
    task = make_task(cfg)
    replayed = fit(cfg, task).runs[0]
    step = task._replays[True][2]
    assert not step.replaying and not step.enabled  # the running statistics move each step
    off = config_from_dict({**cfg.to_dict(), "train": {**raw["train"], "replay": False}})
    assert same_run(replayed, fit(off, make_task(off)).runs[0])


def test_replay_off_never_runs_a_tape():
    task, _ = trained("gcn", False)
    assert not any(kept[2].replaying for kept in task._replays.values())


def test_a_changed_operand_gets_a_new_replay_and_a_frozen_parameter_a_new_recording():
    cfg = config("gcn", True, field=False)
    task = make_task(cfg)
    fit(cfg, task)
    model, step = task._replays[True][0], task._replays[True][2]
    assert step.replaying and task.replay(model, True) is step
    task.placed.make_sparse("features", "a test")  # what the memory budget does
    assert task.replay(model, True) is not step
    weight = model.parameters()[0]
    weight.requires_grad_(False)
    assert not step.tape.current()
