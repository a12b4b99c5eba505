"""`evaluate_saved`: a finished run folder, rebuilt through its task and scored again; the scores
are exactly those the run recorded at its best epoch."""

from __future__ import annotations

import json

import pytest

from mgsparse.errors import DataError
from mgsparse.run import Scores, make_task
from mgsparse.run.checkpoint import METRICS, write_outputs
from mgsparse.run.evaluate import SavedRunScores, evaluate_saved
from mgsparse.run.loop import fit
from tests.conftest import make_config, moons_config


def best_epoch_scores(run) -> Scores:
    best = run.rows[run.best_epoch - 1]
    assert best.epoch == run.best_epoch
    return best.scores


@pytest.fixture(scope="module")
def karate_run(tmp_path_factory):
    # patience 5 at lr 0.2: the best epoch is not the last, so the final weights would differ
    config = make_config(train={"epochs": 300, "patience": 5, "runs": 2}, optim={"lr": 0.2})
    result = fit(config, make_task(config))
    out = tmp_path_factory.mktemp("karate")
    write_outputs(out, result)
    return out, result


def test_evaluate_reports_the_scores_of_the_best_epoch(karate_run):
    out, result = karate_run
    rows = evaluate_saved(out)
    assert [type(r) for r in rows] == [SavedRunScores, SavedRunScores]
    assert [(r.run, r.seed) for r in rows] == [(0, 0), (1, 1)]
    for row, run in zip(rows, result.runs):
        assert run.best_epoch < len(run.rows)  # early stopped after its best epoch
        assert row.scores == best_epoch_scores(run)  # exactly, not approximately
        assert (row.scores.train_acc, row.scores.val_acc, row.scores.test_acc) == (
            run.train_acc, run.val_acc, run.test_acc)
    last = result.runs[0].rows[-1]
    assert rows[0].scores.val_loss < last.val_loss  # the last epoch's weights were not saved
    assert list(rows[0].scores) == ["val_loss", "train_acc", "val_acc", "test_acc"]
    assert rows[0].metrics is make_task(result.config).metrics


def test_evaluate_reloads_a_point_cloud_run(tmp_path):
    config = moons_config("train.epochs=5")
    result = fit(config, make_task(config))
    write_outputs(tmp_path, result)
    (row,) = evaluate_saved(tmp_path)
    assert row.scores == best_epoch_scores(result.runs[0])


def test_a_folder_without_a_run_is_one_data_error(tmp_path):
    with pytest.raises(DataError, match="metrics.json"):
        evaluate_saved(tmp_path)


def test_a_run_without_saved_parameters_is_one_data_error(karate_run, tmp_path):
    out, _ = karate_run
    metrics = json.loads((out / METRICS).read_text())
    for run in metrics["runs"]:
        run["params"] = None
    (tmp_path / METRICS).write_text(json.dumps(metrics))
    with pytest.raises(DataError, match="no saved parameters"):
        evaluate_saved(tmp_path)


def test_parameters_of_another_model_are_refused(karate_run, tmp_path):
    out, _ = karate_run
    metrics = json.loads((out / METRICS).read_text())
    metrics["config"]["model"]["hidden"] = 7  # the saved weights are 16 wide
    metrics["runs"] = metrics["runs"][:1]
    (tmp_path / METRICS).write_text(json.dumps(metrics))
    (tmp_path / "params_run0.npz").write_bytes((out / "params_run0.npz").read_bytes())
    with pytest.raises(Exception) as info:
        evaluate_saved(tmp_path)
    assert "params_run0.npz" in str(info.value) or "shape" in str(info.value)
