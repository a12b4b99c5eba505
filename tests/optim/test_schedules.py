"""Learning-rate schedules against hand-computed sequences, their state across a resume, and
their one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgsparse.errors import HyperparameterError
from mgsparse.nn import Parameter
from mgsparse.optim import (
    SGD,
    CosineLR,
    ReduceLROnPlateau,
    StepLR,
    make_schedule,
    step_schedule,
)


def sgd(lr: float = 1.0, groups: int = 1) -> SGD:
    return SGD([{"params": [Parameter(np.zeros(2))], "lr": lr * (i + 1)} for i in range(groups)],
               lr=lr)


def sequence(schedule, epochs: int, values=None) -> list[float]:
    """The first group's rate at epochs 0 .. epochs-1 (a plateau schedule fed `values`)."""
    out = []
    for e in range(epochs):
        out.append(schedule.get_last_lr()[0])
        step_schedule(schedule, None if values is None else values[e])
    return out


def test_step_multiplies_every_step_size_epochs():
    opt = sgd(1.0, groups=2)
    schedule = StepLR(opt, step_size=2, gamma=0.5)
    assert sequence(schedule, 6) == [1, 1, 0.5, 0.5, 0.25, 0.25]
    assert schedule.get_last_lr() == [0.125, 0.25]  # each group from its own base
    assert opt.param_groups[1]["lr"] == 0.25


def test_cosine_without_warmup_is_torchs_annealing():
    """(1 + cos(π e / 4)) / 2 for e = 0..4: 1, 0.8536, 0.5, 0.1464, 0."""
    schedule = CosineLR(sgd(1.0), epochs=4)
    c = (1 + math.cos(math.pi / 4)) / 2
    assert sequence(schedule, 5) == pytest.approx([1, c, 0.5, 1 - c, 0], abs=1e-15)


def test_cosine_warms_up_then_decays_to_the_floor():
    """W = 2: 1/2, 2/2; then 0.1 + 0.9 (1 + cos(π k / 4)) / 2 for k = 0..4."""
    schedule = CosineLR(sgd(1.0), epochs=6, warmup=2, min_lr=0.1)
    c = (1 + math.cos(math.pi / 4)) / 2
    want = [0.5, 1.0, 1.0, 0.1 + 0.9 * c, 0.55, 0.1 + 0.9 * (1 - c), 0.1, 0.1]
    assert sequence(schedule, 8) == pytest.approx(want, abs=1e-15)


def test_plateau_cuts_after_patience_bad_epochs():
    """patience 1: the second value not better than the best cuts the rate by the factor."""
    schedule = ReduceLROnPlateau(sgd(1.0), mode="min", factor=0.5, patience=1)
    values = [1.0, 0.9, 0.95, 0.95, 0.8, 0.8, 0.8, 0.8]
    assert sequence(schedule, 8, values) == [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25]
    floor = ReduceLROnPlateau(sgd(1.0), factor=0.5, patience=0, min_lr=0.3)
    assert sequence(floor, 4, [1.0, 1.0, 1.0, 1.0]) == [1, 1, 0.5, 0.3]


def test_plateau_in_max_mode_follows_an_accuracy():
    schedule = ReduceLROnPlateau(sgd(1.0), mode="max", factor=0.1, patience=0)
    assert sequence(schedule, 4, [0.5, 0.6, 0.6, 0.7]) == pytest.approx([1, 1, 1, 0.1])


@pytest.mark.parametrize("name", ["step", "cosine", "plateau"])
def test_a_resumed_schedule_continues_the_same_sequence(name):
    values = [1.0, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8]
    settings = {"step_size": 3, "gamma": 0.5, "warmup": 2, "patience": 1, "min_lr": 0.01}
    whole = sequence(make_schedule(name, sgd(), 10, **settings), 10, values)
    first = make_schedule(name, sgd(), 10, **settings)
    head = sequence(first, 4, values)
    second = make_schedule(name, opt := sgd(), 10, **settings)
    second.load_state_dict(first.state_dict())
    assert opt.param_groups[0]["lr"] == first.get_last_lr()[0]
    assert head + sequence(second, 6, values[4:]) == whole
    assert len(set(whole)) > 1  # the sequence does change


def test_bad_settings_are_one_line_errors():
    with pytest.raises(HyperparameterError, match=r"^unknown schedule 'cosin'; known: none, "):
        make_schedule("cosin", sgd(), 10)
    with pytest.raises(HyperparameterError,
                       match=r"^CosineLR: warmup \(11 epochs\) is longer than the run \(10"):
        CosineLR(sgd(), epochs=10, warmup=11)
    with pytest.raises(HyperparameterError, match=r"^StepLR: step_size must be an integer"):
        StepLR(sgd(), step_size=0)
    with pytest.raises(HyperparameterError, match=r"^ReduceLROnPlateau: mode must be 'min'"):
        ReduceLROnPlateau(sgd(), mode="up")
    with pytest.raises(HyperparameterError, match=r"needs the monitored value$"):
        step_schedule(ReduceLROnPlateau(sgd()))
    assert make_schedule("none", sgd(), 10) is None
