"""The loop's training controls wired to a run: the learning-rate schedule stepped each epoch
(plateau on the selection column) and recorded as `lr` in the rows, epochs.csv and the live
table only when a schedule is set; `train.metrics` adds macro-F1 and ROC-AUC to node
classification, which `train.select` may then choose."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgsparse.cli.live import TrainDisplay, columns
from mgsparse.engine import no_grad
from mgsparse.run import make_task
from mgsparse.run.checkpoint import EPOCH_COLUMNS, epochs_csv
from mgsparse.run.loop import fit
from mgsparse.run.metrics import macro_f1, roc_auc
from mgsparse.run.task import ACCURACY_METRICS
from tests.conftest import make_config


def header(result) -> list[str]:
    return epochs_csv(result).splitlines()[0].split(",")


def test_without_a_schedule_the_columns_are_todays():
    config = make_config(train={"epochs": 3})
    task = make_task(config)
    result = fit(config, task)
    assert task.metrics is ACCURACY_METRICS
    assert header(result) == list(EPOCH_COLUMNS) and "lr" not in header(result)
    assert all(row.lr is None and "lr" not in row.as_dict() for row in result.runs[0].rows)
    assert "lr" not in columns(task.metrics)


def test_a_step_schedule_moves_the_rate_each_epoch_reads_and_records_it():
    config = make_config(train={"epochs": 7}, optim={"schedule": "step", "step_size": 3,
                                                      "gamma": 0.5, "lr": 0.02})
    result = fit(config, make_task(config))
    lrs = [row.lr for row in result.runs[0].rows]
    assert lrs == [0.02 * 0.5 ** ((e - 1) // 3) for e in range(1, 8)]
    head = header(result)
    assert head[head.index("grad_norm") + 1] == "lr"
    lines = epochs_csv(result).splitlines()[1:]
    assert [float(line.split(",")[head.index("lr")]) for line in lines] == lrs


def test_a_cosine_schedule_warms_up_then_decays_to_its_floor():
    config = make_config(train={"epochs": 6}, optim={"schedule": "cosine", "warmup": 2,
                                                      "min_lr": 0.001, "lr": 0.01})
    lrs = [row.lr for row in fit(config, make_task(config)).runs[0].rows]
    expected = [0.005, 0.01] + [0.001 + 0.009 * (1 + math.cos(math.pi * k / 4)) / 2
                                for k in range(4)]
    assert lrs == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("select, higher", [("loss", False), ("acc", True)])
def test_plateau_watches_the_selection_column_in_its_direction(select, higher):
    config = make_config(train={"epochs": 120, "select": select},
                         optim={"schedule": "plateau", "plateau_patience": 1, "gamma": 0.5,
                                "lr": 0.05})
    task = make_task(config)
    rows = fit(config, task).runs[0].rows
    column = task.metrics.select
    lr, best, bad, expected = 0.05, -math.inf if higher else math.inf, 0, []
    for row in rows:  # torch's rule, threshold 1e-4 relative
        expected.append(lr)
        v = row.scores[column]
        if (v > best * (1 + 1e-4)) if higher else (v < best * (1 - 1e-4)):
            best, bad = v, 0
        else:
            bad += 1
        if bad > 1:  # a cut smaller than torch's eps 1e-8 is skipped
            lr, bad = (lr * 0.5 if lr * 0.5 > 1e-8 else lr), 0
    assert [row.lr for row in rows] == pytest.approx(expected, rel=1e-12)
    assert len(set(expected)) > 1  # it did cut the rate


def test_the_live_table_shows_the_rate_when_a_schedule_moves_it():
    config = make_config(train={"epochs": 2}, optim={"schedule": "step", "step_size": 1})
    display = TrainDisplay(config, {}, enabled=True, metrics=ACCURACY_METRICS)
    result = fit(config, make_task(config), on_epoch=display.on_epoch)
    assert display.rows[0][columns(ACCURACY_METRICS, lr=True).index("lr")] == "0.01"
    assert result.runs[0].rows[1].lr == pytest.approx(0.005)


def test_train_metrics_add_macro_f1_and_auc_which_select_may_choose():
    config = make_config(train={"epochs": 20, "metrics": ["f1", "auc"], "select": "auc"})
    task = make_task(config)
    assert task.metrics.select == "val_auc"
    assert task.metrics.names[-4:] == ("val_f1", "test_f1", "val_auc", "test_auc")
    run = fit(config, task).runs[0]
    aucs = [row.val_auc for row in run.rows]
    assert run.best_epoch == 1 + int(np.argmax(aucs))  # the first epoch of the highest AUC
    model = task.restore(run.state)
    with no_grad():
        z = np.asarray(task.logits(model).data, np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    test = task.test_idx
    assert run.scores["test_f1"] == pytest.approx(macro_f1(task.y[test], z[test].argmax(1)))
    assert run.scores["test_auc"] == pytest.approx(roc_auc(task.y[test], p[test]), abs=1e-6)
    assert "val_f1" in header_of(config, run)


def header_of(config, run):
    from mgsparse.run.results import TrainResult
    task = make_task(config)
    return header(TrainResult(config, {}, [run], metrics=task.metrics))


def test_train_metrics_on_a_point_cloud_is_a_config_error():
    from mgsparse.errors import ConfigError
    from tests.conftest import moons_config

    with pytest.raises(ConfigError, match=r"train.metrics \['f1'\]: macro-F1 and AUC are node "):
        make_task(moons_config("train.metrics=[f1]"))
