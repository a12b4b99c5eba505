"""`mgsparse train` and `mgsparse evaluate` driven as a user would: exit codes, messages, files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mgsparse.cli import _register_commands, app
from tests.cli.helpers import one_line_error

ROOT = Path(__file__).resolve().parents[2]
KARATE = ROOT / "configs" / "karate.yaml"
runner = CliRunner()
_register_commands()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


# (YAML after "dataset:\n  name: karate\n", what the message must name, the line it points at)
BAD_CONFIGS = [
    ("optim:\n  lr: -0.01\n", "optim.lr", 4),
    ("optim:\n  lr: 0\n", "optim.lr", 4),
    ("optim:\n  lr: fast\n", "optim.lr", 4),
    ("optim:\n  lrr: 0.01\n", "did you mean 'lr'", 4),
    ("optim:\n  name: adamm\n", "optim.name", 4),
    ("optim:\n  weight_decay: -1\n", "optim.weight_decay", 4),
    ("optim:\n  momentum: 1.5\n", "optim.momentum", 4),
    ("model:\n  dropout: 1.0\n", "model.dropout", 4),
    ("model:\n  dropout: -0.1\n", "model.dropout", 4),
    ("model:\n  hidden: 0\n", "model.hidden", 4),
    ("model:\n  layers: 2.5\n", "model.layers", 4),
    ("model:\n  kind: transformer\n", "model.kind", 4),
    ("model:\n  activation: swish\n", "model.activation", 4),
    ("train:\n  epochs: 0\n", "train.epochs", 4),
    ("train:\n  epochs: true\n", "train.epochs", 4),
    ("train:\n  grad_clip_norm: -1\n", "train.grad_clip_norm", 4),
    ("train:\n  runs: 0\n", "train.runs", 4),
    ("train:\n  patience: 0\n", "train.patience", 4),
    ("sparse:\n  sparsity_threshold: 1.5\n", "sparse.sparsity_threshold", 4),
    ("monitor:\n  memory_budget_mb: 0\n", "monitor.memory_budget_mb", 4),
    ("monitor:\n  log_every: 0\n", "monitor.log_every", 4),
    ("trian:\n  epochs: 3\n", "did you mean 'train'", 3),
    ("\n\nmodel:\n  hidden: 16\n  dropout: 2\n", "model.dropout", 7),
]


@pytest.mark.parametrize("body, needle, line", BAD_CONFIGS)
def test_bad_config_exits_2_with_one_line_naming_the_key(tmp_path, body, needle, line):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset:\n  name: karate\n" + body)
    one_line_error(run("train", path), 2, needle, f"bad.yaml:{line}:")


def test_malformed_yaml_missing_file_and_bad_set(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("dataset: [karate\n")
    one_line_error(run("train", path), 2, "broken.yaml")
    one_line_error(run("train", tmp_path / "nope.yaml"), 2, "nope.yaml")
    one_line_error(run("train", KARATE, "--set", "optim.lr=-1"), 2, "optim.lr")
    one_line_error(run("train", KARATE, "--set", "optim.lrate=1"), 2, "unknown key optim.lrate")
    one_line_error(run("train", KARATE, "--runs", "0"), 2, "train.runs")


def test_train_writes_metrics_and_params_and_evaluate_reproduces_them(tmp_path):
    out = tmp_path / "run"
    result = run("train", KARATE, "--out", out, "--epochs", "60", "--runs", "2", "--quiet")
    assert result.exit_code == 0, result.output
    assert "test accuracy" in result.output and "adjacency" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    s = metrics["summary"]
    for key in ("test_acc_mean", "test_acc_std", "val_acc_mean"):
        assert 0.0 <= s[key] <= 1.0
    assert s["runs"] == 2 and s["best_epoch"] >= 1 and s["epoch_time_ms_median"] > 0
    assert s["peak_memory_mb"] > 0
    assert metrics["config"]["train"]["epochs"] == 60
    assert {"numpy", "scipy", "mgsparse"} <= set(metrics["versions"])
    assert len(metrics["runs"][0]["epochs"]) == 60
    assert (out / "params_run0.npz").is_file() and (out / "params_run1.npz").is_file()

    again = run("evaluate", out, "--json")
    assert again.exit_code == 0, again.output
    rows = json.loads(again.output)
    assert [r["test_acc"] for r in rows] == [r["test_acc"] for r in metrics["runs"]]


def test_json_summary_and_memory_report(tmp_path):
    result = run("train", KARATE, "--epochs", "5", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["status"] == "ok" and 0 <= summary["test_acc_mean"] <= 1
    report = run("train", KARATE, "--epochs", "5", "--quiet", "--memory-report")
    assert report.exit_code == 0
    assert "saved for backward by" in report.output and "optimizer state" in report.output


def test_evaluate_without_a_run_folder_fails_cleanly(tmp_path):
    one_line_error(run("evaluate", tmp_path), 1, "metrics.json")


def test_diverged_run_exits_1(tmp_path):
    result = run("train", KARATE, "--epochs", "5", "--quiet", "--set", "optim.lr=1e30",
                 "--set", "train.grad_clip_norm=null", "--set", "optim.name=sgd",
                 "--set", "optim.momentum=0", "--out", tmp_path)
    assert result.exit_code == 1 and "diverged" in result.output
    assert json.loads((tmp_path / "metrics.json").read_text())["summary"]["status"] == "diverged"


def test_ctrl_c_ends_the_run_cleanly_and_keeps_metrics(tmp_path):
    out = tmp_path / "interrupted"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mgsparse", "train", str(KARATE), "--epochs", "1000000",
         "--quiet", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    time.sleep(4.0)  # imports plus a few thousand epochs
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "test accuracy" in stdout  # the summary is printed
    metrics = json.loads((out / "metrics.json").read_text())
    run0 = metrics["runs"][0]
    assert run0["status"] == "interrupted" and len(run0["epochs"]) > 0
    assert metrics["summary"]["status"] == "interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("name, floor", [("cora", 0.810), ("citeseer", 0.700)])
def test_gcn_reaches_the_paper_accuracy_over_ten_seeds(mirror_env, name, floor):
    """Kipf & Welling report 81.5% (Cora) and 70.3% (CiteSeer)."""
    result = run("train", ROOT / "configs" / f"{name}.yaml", "--runs", "10", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["runs"] == 10
    assert summary["test_acc_mean"] >= floor, summary


def test_an_unwritable_out_folder_fails_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run("train", KARATE, "--out", blocker / "run", "--quiet")
    one_line_error(result, 1, "cannot create output folder")
