"""What a run leaves on disk: metrics.json (config, rows, versions, summary) and the best
parameters, written atomically; reading them back names a damaged file in one DataError."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.data import karate_club
from mgsparse.errors import DataError
from mgsparse.run import GraphTask
from mgsparse.run.checkpoint import (
    EPOCH_COLUMNS,
    METRICS,
    epochs_csv,
    metrics_dict,
    output_dir,
    read_metrics,
    read_params,
    write_outputs,
)
from mgsparse.run.loop import fit
from tests.conftest import make_config


@pytest.fixture(scope="module")
def result():
    config = make_config(train={"epochs": 8, "runs": 2})
    return fit(config, GraphTask(config, karate_club()))


def test_metrics_hold_the_config_rows_versions_and_summary(result):
    m = json.loads(json.dumps(metrics_dict(result)))
    assert config_from_dict(m["config"]) == result.config  # the resolved config round-trips
    assert {"numpy", "scipy", "mgsparse", "python"} <= set(m["versions"])
    assert m["placement"] == result.placement
    assert m["summary"] == json.loads(json.dumps(result.summary().as_dict()))
    assert [r["seed"] for r in m["runs"]] == [0, 1]
    run0, rows = m["runs"][0], result.runs[0].rows
    assert run0["epochs"] == [row.as_dict() for row in rows]
    assert len(run0["timing"]) == 8 and run0["params"] == "params_run0.npz"
    assert (run0["status"], run0["best_epoch"], run0["test_acc"]) == (
        result.runs[0].status, result.runs[0].best_epoch, result.runs[0].test_acc)
    assert m["memory_report"] is None


def test_classification_keeps_its_columns_and_keys_in_their_order(result):
    """The node-classification files, exactly: epochs.csv's header, each run's keys and the
    summary's, in order (tools read them by name and by position)."""
    assert EPOCH_COLUMNS == ("run", "seed", "epoch", "loss", "val_loss", "train_acc", "val_acc",
                             "test_acc", "grad_norm", "step_ms", "epoch_ms", "mem_held_mb",
                             "mem_peak_mb", "batches", "block_nnz", "sampled_nodes")
    assert epochs_csv(result).splitlines()[0] == ",".join(EPOCH_COLUMNS)
    m = metrics_dict(result)
    assert list(m["runs"][0]) == ["run", "seed", "status", "message", "best_epoch", "train_acc",
                                  "val_acc", "test_acc", "params", "epochs", "timing", "alarms",
                                  "events"]
    assert list(m["runs"][0]["epochs"][0]) == ["epoch", "loss", "val_loss", "train_acc",
                                               "val_acc", "test_acc", "grad_norm"]
    assert list(m["summary"]) == ["runs", "test_acc_mean", "test_acc_std", "val_acc_mean",
                                  "best_epochs", "epoch_time_ms_median", "total_time_s",
                                  "peak_memory_mb", "paper_test_acc", "status"]


def test_write_outputs_writes_metrics_and_the_best_parameters(result, tmp_path):
    path = write_outputs(tmp_path / "run", result)
    assert path == tmp_path / "run" / METRICS
    assert read_metrics(tmp_path / "run") == json.loads(path.read_text())
    for i, run in enumerate(result.runs):
        state = read_params(tmp_path / "run", f"params_run{i}.npz")
        assert set(state) == set(run.state)
        assert all(np.array_equal(state[k], v) for k, v in run.state.items())
    leftovers = [p.name for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []  # written to temporary names, then renamed


def test_a_rewrite_replaces_the_previous_version_whole(result, tmp_path):
    write_outputs(tmp_path, result)
    first = (tmp_path / METRICS).read_text()
    shorter = dataclasses.replace(result, runs=result.runs[:1])
    write_outputs(tmp_path, shorter)
    assert len(read_metrics(tmp_path)["runs"]) == 1 and (tmp_path / METRICS).read_text() != first


def test_a_run_without_a_best_state_saves_no_parameters(tmp_path):
    config = make_config(train={"epochs": 5})
    task = GraphTask(config, karate_club())
    from mgsparse import engine
    bad = task.with_operands(engine.Tensor(np.full((34, 34), np.nan, np.float32)), task.operand)
    diverged = fit(config, bad)
    write_outputs(tmp_path, diverged)
    assert read_metrics(tmp_path)["runs"][0]["params"] is None
    assert not list(tmp_path.glob("params_run*.npz"))


def test_output_dir_is_created_and_a_file_in_the_way_is_one_data_error(tmp_path):
    assert output_dir(tmp_path / "a" / "b").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DataError, match="output folder"):
        output_dir(blocker / "run")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_a_read_only_output_dir_is_refused_before_training(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(DataError, match="output folder"):
            output_dir(ro / "run")
    finally:
        ro.chmod(0o700)


def test_reading_a_missing_or_damaged_run_folder_is_one_data_error(tmp_path):
    with pytest.raises(DataError, match="metrics.json not found"):
        read_metrics(tmp_path)
    (tmp_path / METRICS).write_text("{not json")
    with pytest.raises(DataError, match="JSON") as info:
        read_metrics(tmp_path)
    assert "\n" not in str(info.value)
    (tmp_path / "params_run0.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DataError, match="params_run0.npz"):
        read_params(tmp_path, "params_run0.npz")
    with pytest.raises(DataError, match="params_run9.npz"):
        read_params(tmp_path, "params_run9.npz")
