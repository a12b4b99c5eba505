"""`mgsparse train --folds` and `mgsparse evaluate` on a set of graphs (the real MUTAG), as a
user drives them: the run folder says which fold each run was, evaluate scores each saved
model on its own fold, the pictures are drawn, Ctrl-C ends the series cleanly, and bad fold
counts are one line and exit 2."""

from __future__ import annotations

import csv
import json
import re
import signal

import pytest

from mgsparse.cli.live import TrainDisplay
from tests.conftest import CONFIGS, one_line_error, require_real_tu

MUTAG = CONFIGS / "mutag-gin.yaml"
KARATE = CONFIGS / "karate.yaml"


@pytest.fixture
def tu(monkeypatch, tmp_path):
    """The real TU zips as the download source; the cache in a fresh folder."""
    monkeypatch.setenv("MGSPARSE_TU_URL", str(require_real_tu()))
    return ["--set", f"dataset.root={tmp_path / 'datasets'}", "--set", "monitor.memory=false",
            "--set", "model.hidden=16", "--set", "model.layers=2"]


@pytest.fixture
def folds_run(cli, tu, tmp_path):
    out, plot = tmp_path / "run", tmp_path / "curves.png"
    result = cli("train", MUTAG, "--folds", 3, "--epochs", 3, "--out", out, "--plot", plot,
                 "--quiet", *tu)
    assert result.exit_code == 0, result.output
    return out, plot, result


def test_folds_runs_one_model_per_fold_and_says_so(folds_run):
    out, plot, result = folds_run
    metrics = json.loads((out / "metrics.json").read_text())
    runs = metrics["runs"]
    assert [(r["run"], r["fold"], r["seed"]) for r in runs] == [(0, 0, 0), (1, 1, 1), (2, 2, 2)]
    summary = metrics["summary"]
    per_fold = summary["folds"]["test_acc"]
    assert per_fold == [r["test_acc"] for r in runs]
    assert summary["test_acc_mean"] == pytest.approx(sum(per_fold) / 3)
    assert metrics["config"]["train"]["folds"] == 3
    assert "test accuracy per fold" in result.stdout
    assert re.search(r"folds\s+│ 3 \(seeds 0\.\.2\)", result.stdout)  # they are folds
    assert "runs" not in result.stdout
    with open(out / "epochs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["run"], r["epoch"]) for r in rows] == [(str(i), str(e)) for i in range(3)
                                                      for e in (1, 2, 3)]
    assert plot.stat().st_size > 10_000


def test_a_folded_runs_curves_are_drawn_per_fold(cli, tu, tmp_path):
    """`--folds 2 --plot x.svg`: both curve panels draw each fold thin and the mean bold."""
    plot = tmp_path / "folds.svg"
    result = cli("train", MUTAG, "--folds", 2, "--epochs", 2, "--plot", plot, "--quiet", *tu)
    assert result.exit_code == 0, result.output
    svg = plot.read_text()
    assert svg.count("per epoch, each of 2 folds (thin) and their mean") == 2
    assert "mean ± std" not in svg
    # the third panel: each graph's pooled readout, and every graph has a label
    assert "pooled graph readouts (PCA), fold" in svg and "last hidden layer" not in svg
    assert "no label" not in svg and "class 1" in svg


def test_evaluate_scores_each_model_on_its_own_fold(cli, folds_run, tu):
    out, _, _ = folds_run
    result = cli("evaluate", out, "--json")
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "metrics.json").read_text())["runs"]
    again = json.loads(result.stdout)
    assert [r["run"] for r in again] == [0, 1, 2] and [r["fold"] for r in again] == [0, 1, 2]
    for before, after in zip(saved, again):
        for column in ("train_acc", "val_acc", "test_acc"):
            assert after[column] == pytest.approx(before[column]), (before["run"], column)
    table = cli("evaluate", out).stdout
    header = next(line for line in table.splitlines() if "seed" in line)
    assert header.split("┃")[1].strip() == "fold" and "run" not in header


def test_ctrl_c_ends_the_series_after_the_epoch(cli, tu, tmp_path, monkeypatch):
    on_epoch = TrainDisplay.on_epoch

    def interrupt_after_first(self, run_index, row, *rest):
        on_epoch(self, run_index, row, *rest)
        if row.epoch == 1:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(TrainDisplay, "on_epoch", interrupt_after_first)
    out = tmp_path / "stopped"
    result = cli("train", MUTAG, "--folds", 3, "--epochs", 50, "--out", out, "--quiet", *tu)
    assert result.exit_code == 130, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    (run,) = metrics["runs"]
    assert run["status"] == "interrupted" and len(run["epochs"]) == 1
    assert metrics["summary"]["status"] == "interrupted"


@pytest.mark.parametrize("args, needle", [
    (["--folds", 1], "train.folds must be >= 2 or null (got 1)"),
    (["--folds", 64], "smallest class of mutag holds (63 graphs)"),
    (["--folds", 3, "--runs", 2], "a k-fold run trains one model per fold"),
    (["--set", "model.kind=mlp"], "model.kind 'mlp' has no graph classifier"),
])
def test_bad_fold_counts_are_one_line_and_exit_2(cli, tu, args, needle):
    one_line_error(cli("train", MUTAG, *args, *tu), 2, needle)


def test_folds_on_a_node_dataset_is_one_line_and_exit_2(cli):
    one_line_error(cli("train", KARATE, "--folds", 3), 2, "train.folds",
                   "dataset 'karate' is not one")
