"""`mgsparse train` with `task: link` as a user runs it, on a CSV edge list: the files (metrics.json,
epochs.csv) and the summary carry AUC and AP, `--plot` draws the AUC curves and the embedding,
`evaluate` scores the saved runs again, bad input is one line and exit 2, Ctrl-C keeps the run."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_train import _catches
from tests.conftest import CONFIGS, one_line_error

EXAMPLE = CONFIGS / "examples" / "two-communities"


def write_link_config(folder: Path, extra: str = "", edges: Path | None = None,
                      labels: bool = True) -> Path:
    """A link-prediction config on a small CSV graph (the shipped two-community example:
    60 nodes, 145 undirected edges), GAE with the defaults but small widths."""
    lines = ["task: link", "dataset:", "  name: csv", f"  edges: {edges or EXAMPLE / 'edges.csv'}"]
    if labels:
        lines.append(f"  labels: {EXAMPLE / 'labels.csv'}")
    lines += ["model:", "  hidden: 16", "  dropout: 0.0", "link:", "  latent: 8",
              "  val: 0.1", "  test: 0.2", "optim:", "  weight_decay: 0.0",
              "train:", "  patience: null", "monitor:", "  memory: false"]
    path = folder / "link.yaml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
    from typer.testing import CliRunner

    from mgsparse.cli import app

    folder = tmp_path_factory.mktemp("link")
    out, plot = folder / "run", folder / "link.svg"
    result = CliRunner().invoke(app, ["train", str(write_link_config(folder)), "--epochs", "30",
                                      "--runs", "2", "--out", str(out), "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    return result, out, plot


def test_the_summary_shows_auc_and_ap_not_accuracy(link_run):
    result, _, _ = link_run
    text = result.output
    assert "test AUC" in text and "test AP" in text and "val AUC" in text
    assert "accuracy" not in text and "held-out edges" in text
    assert "14 val + 29 test (each with as many non-edges)" in text


def test_a_link_run_is_titled_by_its_autoencoder_and_scores_in_percent(link_run):
    """Not "GCN on csv": the GAE, its encoder and the task; AUC and AP as percentages, as
    docs/link-prediction.md and the papers quote them (the files keep fractions)."""
    result, out, _ = link_run
    text = result.output
    assert "GAE (GCN encoder) on csv, link prediction: summary" in text
    assert re.search(r"test AUC\s+│ \d{1,3}\.\d\d% ± \d+\.\d\d%", text)
    assert re.search(r"val AP\s+│ \d{1,3}\.\d\d%", text)
    assert 0 < json.loads((out / "metrics.json").read_text())["summary"]["test_auc_mean"] <= 1


def test_metrics_json_and_epochs_csv_carry_the_link_scores(link_run):
    _, out, _ = link_run
    m = json.loads((out / "metrics.json").read_text())
    s = m["summary"]
    assert list(s)[1:7] == ["test_auc_mean", "test_auc_std", "test_ap_mean", "test_ap_std",
                            "val_auc_mean", "val_ap_mean"]
    assert 0.5 < s["test_auc_mean"] <= 1.0 and m["config"]["task"] == "link"
    assert m["config"]["link"]["val"] == 0.1
    run = m["runs"][0]
    best = run["epochs"][run["best_epoch"] - 1]
    assert run["val_auc"] == best["val_auc"] == max(e["val_auc"] for e in run["epochs"])
    rows = list(csv.DictReader((out / "epochs.csv").open()))
    assert list(rows[0])[:9] == ["run", "seed", "epoch", "loss", "val_loss", "val_auc",
                                 "val_ap", "test_auc", "test_ap"]
    assert len(rows) == 60 and "test_acc" not in rows[0]
    assert float(rows[0]["val_auc"]) == run["epochs"][0]["val_auc"]


def test_evaluate_scores_the_saved_runs_again(cli, link_run):
    _, out, _ = link_run
    again = cli("evaluate", out, "--json")
    assert again.exit_code == 0, again.output
    saved = json.loads((out / "metrics.json").read_text())["runs"]
    for row, run in zip(json.loads(again.output), saved):
        assert (row["test_auc"], row["test_ap"], row["val_auc"]) == (
            run["test_auc"], run["test_ap"], run["val_auc"])  # the same split, the same scores


def test_the_plot_draws_the_auc_curves_and_the_embedding_by_label(link_run):
    pytest.importorskip("matplotlib")
    _, _, plot = link_run
    svg = plot.read_text()
    assert "val AUC" in svg and "val AP" in svg and "val loss" in svg
    assert "class 0" in svg and "class 1" in svg  # the embedding, coloured by node label
    # Z of the run with the best validation AUC, and its test AUC
    assert re.search(r"node embeddings Z \(PCA\), seed [01]: test \d{2}\.\d%", svg)


def test_a_csv_edge_list_alone_trains(cli, tmp_path):
    """Only an edge list: no features (one-hot ids), no labels, no node files."""
    rng = np.random.default_rng(0)
    u, v = np.triu_indices(40, 1)
    same = (u < 20) == (v < 20)
    keep = rng.random(len(u)) < np.where(same, 0.4, 0.02)
    edges = tmp_path / "edges.csv"
    edges.write_text("".join(f"{a},{b}\n" for a, b in zip(u[keep], v[keep])))
    config = write_link_config(tmp_path, edges=edges, labels=False)
    result = cli("train", config, "--epochs", "40", "--json", "--quiet")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["test_auc_mean"] > 0.6


@pytest.mark.parametrize("extra, needles", [
    ("link:\n  val: 0.5\n  test: 0.5\n", ["link.val + link.test must be < 1 (got 0.5 + 0.5)"]),
    ("link:\n  neg_ratio: 0\n", ["link.neg_ratio must be > 0 (got 0)"]),
    ("link:\n  decoder: bilinear\n", ["link.decoder must be one of 'inner', 'mlp'"]),
    ("dataset:\n  directed: true\n", ["dataset.directed: true keeps edges one-way",
                                      "set link.undirected: false"]),
    ("train:\n  batch_size: 16\n", ["task: link trains full batch"]),
    ("task: edges\n", ["task must be one of 'node', 'link' (got 'edges')"]),
])
def test_bad_link_settings_are_one_line_and_exit_2(cli, tmp_path, extra, needles):
    lines = ["dataset:", "  name: karate"]
    body = extra if extra.startswith("task") else "task: link\n" + extra
    if "dataset:" in extra:
        body = body.replace("dataset:\n", "dataset:\n  name: csv\n  edges: e.csv\n")
        lines = []
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines) + "\n" + body)
    one_line_error(cli("train", path, "--epochs", "2"), 2, *needles)


def test_a_graph_with_too_few_edges_to_split_is_one_line_and_exit_2(cli, tmp_path):
    edges = tmp_path / "edges.csv"
    edges.write_text("0,1\n1,2\n2,3\n")
    config = write_link_config(tmp_path, edges=edges, labels=False)
    one_line_error(cli("train", config, "--epochs", "2"), 2,
                   "the graph has too few edges to split: 3 candidate edges give 3 training, "
                   "0 validation and 0 test edges")


def test_task_link_on_a_point_cloud_is_refused(cli):
    one_line_error(cli("train", CONFIGS / "moons.yaml", "--set", "task=link"), 2,
                   "task: link predicts the edges of one graph; dataset 'moons' is not one")


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc")
def test_ctrl_c_ends_a_link_run_after_the_epoch_and_keeps_it(tmp_path):
    out = tmp_path / "interrupted"
    config = write_link_config(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mgsparse", "train", str(config), "--epochs", "100000",
         "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 120
    while not _catches(proc.pid, signal.SIGTERM):  # its handlers are set just before epoch 1
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stdout + stderr and "test AUC" in stdout
    (run,) = json.loads((out / "metrics.json").read_text())["runs"]
    assert run["status"] == "interrupted" and 0 < len(run["epochs"]) < 100000
    assert (out / run["params"]).is_file()
