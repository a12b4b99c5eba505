"""A task with scores of its own (AUC and AP, the best epoch the highest validation AUC), defined
here and nowhere else, goes through the loop, epochs.csv, metrics.json, the live table, the
summary, the evaluate table and the pictures: adding it touches no library file. And the
classification task's live table keeps its headers and caption."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from rich.console import Console

from mgsparse.cli.live import CAPTION, COLUMNS, TrainDisplay
from mgsparse.cli.plots import save_training_plot
from mgsparse.cli.render import evaluate_table, summary_table
from mgsparse.nn.module import Module, Parameter
from mgsparse.run.checkpoint import EPOCHS_CSV, METRICS, write_outputs
from mgsparse.run.evaluate import SavedRunScores
from mgsparse.run.loop import fit
from mgsparse.run.task import Metric, Task, TaskMetrics
from tests.conftest import make_config

LINK_METRICS = TaskMetrics(
    columns=(Metric("val_auc", True), Metric("test_auc", True), Metric("val_ap", True)),
    select="val_auc")

# run -> epoch -> (val_auc, test_auc, val_ap): the highest val_auc is epoch 2 in run 0 and
# epoch 3 in run 1; the lowest (what a lower-is-better selection would pick) is epoch 1
SCRIPT = [[(0.6, 0.5, 0.4), (0.9, 0.85, 0.8), (0.7, 0.6, 0.5), (0.8, 0.7, 0.6)],
          [(0.7, 0.6, 0.5), (0.75, 0.65, 0.55), (0.95, 0.75, 0.9), (0.8, 0.9, 0.7)]]


class Stamped(Module):
    """A weight to train and two marks no gradient moves, saved and reloaded with it: the run
    the model was built for and the epoch it was last stepped in."""

    def __init__(self, rng, run: int):
        super().__init__()
        self.w = Parameter(rng.normal(size=(1,)))
        self.marks = Parameter(np.array([run, 0.0]))


class LinkTask(Task):
    """Link prediction as far as the loop can tell: AUC and AP from a script."""

    placement, densities = {}, {}
    metrics = LINK_METRICS

    def __init__(self, config):
        self.config, self.builds = config, 0

    def build_model(self, rng):
        self.builds += 1
        return Stamped(rng, self.builds - 1)

    def batches(self, model, shuffle):
        def step():
            model.marks.data[1] += 1
            return (model.w * model.w).sum() + model.marks.sum() * 0.0, 1
        yield step

    def evaluate(self, model):
        run, epoch = (int(v) for v in model.marks.data)
        val_auc, test_auc, val_ap = SCRIPT[run][epoch - 1]
        return self.metrics.scores(val_auc=val_auc, test_auc=test_auc, val_ap=val_ap)

    def embedding(self, model):
        return None  # no picture of a hidden layer


@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
    config = make_config(train={"epochs": 4, "patience": 2, "runs": 2},
                         optim={"weight_decay": 0.0})
    task = LinkTask(config)
    result = fit(config, task)
    out = tmp_path_factory.mktemp("link")
    write_outputs(out, result)
    return task, result, out


def text(renderable, width: int = 120) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_the_best_epoch_is_the_highest_declared_selection(link_run):
    _, result, _ = link_run
    assert [(r.status, r.best_epoch, len(r.rows)) for r in result.runs] == [
        ("early_stopped", 2, 4), ("completed", 3, 4)]  # patience counts epochs without a higher
    assert dict(result.runs[0].scores) == {"val_auc": 0.9, "test_auc": 0.85, "val_ap": 0.8}
    assert result.runs[1].test_auc == 0.75 and result.runs[1].rows[0].val_ap == 0.5
    summary = result.summary()
    assert summary.scores == pytest.approx({
        "test_auc_mean": 0.8, "test_auc_std": 0.05, "val_auc_mean": 0.925,
        "val_auc_std": 0.025, "val_ap_mean": 0.85, "val_ap_std": 0.05})
    assert summary.paper_test_acc is None  # the catalog's accuracy is not an AUC


def test_epochs_csv_and_metrics_json_carry_the_declared_columns(link_run):
    _, _, out = link_run
    rows = list(csv.DictReader((out / EPOCHS_CSV).open()))
    assert list(rows[0])[:8] == ["run", "seed", "epoch", "loss", "val_auc", "test_auc", "val_ap",
                                 "grad_norm"]
    assert not {"val_loss", "train_acc", "val_acc", "test_acc"} & set(rows[0])
    assert [(r["run"], r["epoch"], r["val_auc"]) for r in rows][:2] == [
        ("0", "1", "0.6"), ("0", "2", "0.9")]
    m = json.loads((out / METRICS).read_text())
    assert list(m["summary"])[:7] == ["runs", "test_auc_mean", "test_auc_std", "val_auc_mean",
                                      "val_auc_std", "val_ap_mean", "val_ap_std"]
    assert m["summary"]["test_auc_mean"] == pytest.approx(0.8)
    run1 = m["runs"][1]
    assert (run1["best_epoch"], run1["val_auc"], run1["test_auc"], run1["val_ap"]) == (
        3, 0.95, 0.75, 0.9)
    assert "test_acc" not in run1 and list(run1["epochs"][0]) == [
        "epoch", "loss", "val_auc", "test_auc", "val_ap", "grad_norm"]


def test_the_summary_and_evaluate_tables_show_the_declared_scores(link_run):
    task, result, _ = link_run
    summary = text(summary_table(result))
    line = {row.split("│")[1].strip(): row.split("│")[2].strip()
            for row in summary.splitlines() if row.count("│") == 3}
    assert (line["test auc"], line["val auc"], line["val ap"]) == (
        "0.8000 ± 0.0500", "0.9250 ± 0.0250", "0.8500 ± 0.0500")
    assert "accuracy" not in summary and "paper" not in summary
    scores = task.evaluate(task.restore(result.runs[0].state))
    table = text(evaluate_table("out", [SavedRunScores(0, 0, scores, task.metrics)]))
    header = next(line for line in table.splitlines() if "seed" in line)
    assert [h.strip() for h in header.strip("┃ ").split("┃")] == [
        "run", "seed", "val auc", "test auc", "val ap"]
    assert "0.9000" in table and "0.8500" in table and "0.8000" in table


def test_the_live_table_shows_the_declared_validation_columns(link_run):
    _, result, _ = link_run
    every_epoch = make_config(train={"runs": 2}, monitor={"log_every": 1})
    display = TrainDisplay(every_epoch, {}, True, LINK_METRICS)
    for i, run in enumerate(result.runs):
        for row, stats in zip(run.rows, run.stats):
            display.on_epoch(i, row, stats, [])
    shown = text(display._render(), width=140)
    header = next(line for line in shown.splitlines() if "epoch" in line)
    assert header.split()[:6] == ["run", "epoch", "loss", "val_auc", "val_ap", "‖g‖"]
    assert "test_auc" not in shown  # the test split is not watched while training
    assert "0.9000" in shown and "0.9500" in shown and "accuracy" not in shown


def test_the_pictures_draw_the_declared_curves(link_run, tmp_path):
    pytest.importorskip("matplotlib")
    task, result, _ = link_run
    svg = save_training_plot(result, task, tmp_path / "link.svg").read_text()
    assert "score per epoch, mean ± std over 2 runs" in svg  # AUC and AP share the panel
    assert "val auc" in svg and "val ap" in svg and "accuracy" not in svg


def test_classification_keeps_its_live_headers_and_caption():
    assert COLUMNS == ("run", "epoch", "loss", "train", "val", "v.loss", "‖g‖", "Â nnz",
                       "X nnz", "MB", "peak", "ms")
    assert CAPTION == ("train/val: accuracy · v.loss: validation loss · ‖g‖: gradient norm "
                       "before clipping · Â/X nnz: stored entries of the adjacency/features "
                       "over rows·cols · MB: held by the run (operands, parameters, optimizer "
                       "state) · peak: MB + the epoch's traced peak · ms: epoch time")
