"""`train.select` and `train.min_delta`: which validation column picks the best epoch, and by
how much a better epoch must beat the best so far (patience counts from it)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.errors import ConfigError
from mgsparse.run import make_task
from mgsparse.run.loop import fit
from tests.conftest import make_config


def first_best(values, higher: bool, min_delta: float = 0.0) -> int:
    """The epoch (from 1) the loop must keep: each new best beats the last by > min_delta."""
    best, epoch = None, 0
    for i, v in enumerate(values, 1):
        if best is None or (v > best + min_delta if higher else v < best - min_delta):
            best, epoch = v, i
    return epoch


@pytest.mark.parametrize("select, column, higher", [(None, "val_loss", False),
                                                    ("loss", "val_loss", False),
                                                    ("acc", "val_acc", True),
                                                    ("val_acc", "val_acc", True)])
def test_the_selected_validation_column_picks_the_best_epoch(select, column, higher):
    config = make_config(train={"epochs": 30, "select": select})
    task = make_task(config)
    assert task.metrics.select == column
    run = fit(config, task).runs[0]
    values = [row.scores[column] for row in run.rows]
    assert run.best_epoch == first_best(values, higher)
    assert run.scores[column] == values[run.best_epoch - 1]


def test_selecting_by_accuracy_and_by_loss_keep_different_epochs():
    picked = {s: fit(c, make_task(c)).runs[0].best_epoch
              for s in ("loss", "acc") for c in [make_config(train={"epochs": 30, "select": s})]}
    assert picked["loss"] != picked["acc"]


def test_min_delta_asks_a_better_epoch_to_beat_the_best_by_more():
    config = make_config(train={"epochs": 40, "min_delta": 0.05})
    run = fit(config, make_task(config)).runs[0]
    losses = [row.val_loss for row in run.rows]
    assert run.best_epoch == first_best(losses, False, 0.05)
    assert run.best_epoch != first_best(losses, False)
    huge = make_config(train={"epochs": 40, "min_delta": 100.0, "patience": 3})
    stopped = fit(huge, make_task(huge)).runs[0]
    assert (stopped.best_epoch, len(stopped.rows), stopped.status) == (1, 4, "early_stopped")
    assert np.isfinite(stopped.scores["test_acc"])


def test_a_selection_the_task_does_not_declare_is_a_config_error():
    with pytest.raises(ConfigError, match="train.select 'auc' is not a validation metric of "
                                          "this run; choose one of loss, acc"):
        make_task(make_config(train={"select": "auc"}))
    with pytest.raises(ConfigError, match="'test_acc'"):
        make_task(make_config(train={"select": "test_acc"}))
