"""`mgsparse train` on a point cloud: the moons accuracy, the same outputs as a GCN run, --plot."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mgsparse.cli import _register_commands, app

ROOT = Path(__file__).resolve().parents[2]
MOONS = ROOT / "configs" / "moons.yaml"
runner = CliRunner()
_register_commands()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_moons_config_reaches_95_percent_on_the_held_out_points():
    result = run("train", MOONS, "--json")  # the shipped config as is: batch 32, noise 0.1
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "ok" and summary["runs"] == 1
    assert summary["test_acc_mean"] >= 0.95


def test_live_display_summary_outputs_and_memory_report(tmp_path):
    result = run("train", MOONS, "--epochs", "3", "--out", tmp_path, "--memory-report")
    assert result.exit_code == 0, result.output
    assert "MLP on moons" in result.output and "dense (point cloud)" in result.output
    assert "where the memory of one training step went" in result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["placement"] == {"features": "dense (point cloud)"}
    assert metrics["config"]["train"]["batch_size"] == 32
    assert [row["epoch"] for row in metrics["runs"][0]["epochs"]] == [1, 2, 3]
    assert (tmp_path / "params_run0.npz").is_file()
    assert metrics["memory_report"]["adjacency"] == 0


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib not installed (pip install 'mgsparse[plot]')")
def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "moons.png"
    result = run("train", MOONS, "--epochs", "3", "--quiet", "--plot", path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert f"decision boundary and loss curve: {path}" in result.output.replace("\n", "")


def test_plot_without_matplotlib_is_one_line_before_training(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = run("train", MOONS, "--plot", tmp_path / "m.png", "--out", tmp_path / "run")
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "pip install 'mgsparse[plot]'" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing was trained


def test_plot_of_a_graph_dataset_is_a_usage_error(tmp_path):
    result = run("train", ROOT / "configs" / "karate.yaml", "--plot", tmp_path / "k.png")
    assert result.exit_code == 2
    assert "needs a point-cloud dataset" in result.output


def test_evaluate_reloads_a_point_cloud_run(tmp_path):
    out = tmp_path / "moons"
    trained = run("train", MOONS, "--epochs", "5", "--quiet", "--out", out)
    assert trained.exit_code == 0, trained.output
    metrics = json.loads((out / "metrics.json").read_text())
    again = run("evaluate", out, "--json")
    assert again.exit_code == 0, again.output
    rows = json.loads(again.output)
    assert rows[0]["test_acc"] == metrics["runs"][0]["test_acc"]
    assert rows[0]["val_acc"] == metrics["runs"][0]["val_acc"]
