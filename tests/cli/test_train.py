"""`mgsparse train` and `mgsparse evaluate` driven as a user would: exit codes, messages, files,
on a graph (karate) and a point cloud (moons); Ctrl-C and SIGTERM in a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CONFIGS, one_line_error

KARATE = CONFIGS / "karate.yaml"
MOONS = CONFIGS / "moons.yaml"

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
def test_bad_config_exits_2_with_one_line_naming_the_key(cli, tmp_path, body, needle, line):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset:\n  name: karate\n" + body)
    one_line_error(cli("train", path), 2, needle, f"bad.yaml:{line}:")


def test_malformed_yaml_missing_file_and_bad_set(cli, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("dataset: [karate\n")
    one_line_error(cli("train", path), 2, "broken.yaml")
    one_line_error(cli("train", tmp_path / "nope.yaml"), 2, "nope.yaml")
    one_line_error(cli("train", KARATE, "--set", "optim.lr=-1"), 2, "optim.lr")
    one_line_error(cli("train", KARATE, "--set", "optim.lrate=1"), 2, "unknown key optim.lrate")
    one_line_error(cli("train", KARATE, "--runs", "0"), 2, "train.runs")


# ---------------------------------------------------------------- a graph run


def test_train_writes_metrics_and_params_and_evaluate_reproduces_them(cli, tmp_path):
    out = tmp_path / "run"
    result = cli("train", KARATE, "--out", out, "--epochs", "60", "--runs", "2", "--quiet")
    assert result.exit_code == 0, result.output
    assert "test accuracy" in result.output and "adjacency" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    s = metrics["summary"]
    for key in ("test_acc_mean", "test_acc_std", "val_acc_mean"):
        assert 0.0 <= s[key] <= 1.0
    assert s["runs"] == 2 and len(s["best_epochs"]) == 2 and min(s["best_epochs"]) >= 1
    assert s["epoch_time_ms_median"] > 0 and s["peak_memory_mb"] > 0
    assert metrics["config"]["train"]["epochs"] == 60
    assert {"numpy", "scipy", "mgsparse"} <= set(metrics["versions"])
    assert len(metrics["runs"][0]["epochs"]) == 60
    assert (out / "params_run0.npz").is_file() and (out / "params_run1.npz").is_file()

    again = cli("evaluate", out, "--json")
    assert again.exit_code == 0, again.output
    rows = json.loads(again.output)
    for row, run in zip(rows, metrics["runs"]):
        best = run["epochs"][run["best_epoch"] - 1]
        assert (row["run"], row["seed"]) == (run["run"], run["seed"])
        assert row["test_acc"] == run["test_acc"] == best["test_acc"]
        assert row["val_loss"] == best["val_loss"]
    table = cli("evaluate", out)
    assert table.exit_code == 0 and str(out) in "".join(table.output.split())


def test_json_summary_and_memory_report(cli):
    result = cli("train", KARATE, "--epochs", "5", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "ok" and 0 <= summary["test_acc_mean"] <= 1
    report = cli("train", KARATE, "--epochs", "5", "--quiet", "--memory-report")
    assert report.exit_code == 0
    assert "saved for backward by" in report.output and "optimizer state" in report.output


def test_evaluate_without_a_run_folder_fails_cleanly(cli, tmp_path):
    one_line_error(cli("evaluate", tmp_path), 2, "metrics.json", "is not a run folder")


@pytest.fixture
def finished_run(cli, tmp_path):
    out = tmp_path / "run"
    assert cli("train", KARATE, "--out", out, "--epochs", "5", "--quiet").exit_code == 0
    return out


@pytest.mark.parametrize("damage, name, needle", [
    (lambda p: p.write_bytes(p.read_bytes()[:40]), "params_run0.npz", "is damaged"),
    (lambda p: p.write_bytes(b""), "params_run0.npz", "is damaged"),
    (lambda p: p.unlink(), "params_run0.npz", "not found"),
    (lambda p: p.write_text(p.read_text()[:100]), "metrics.json", "not valid JSON"),
    (lambda p: p.write_text("[1, 2]"), "metrics.json", "top level is not a mapping"),
    (lambda p: p.write_text(p.read_text().replace('"config"', '"konfig"')), "metrics.json",
     "no 'config' mapping"),
    (lambda p: p.write_text(p.read_text().replace('"hidden": 4', '"hidden": "four"')),
     "metrics.json", "model.hidden must be an integer"),
    (lambda p: p.write_text(p.read_text().replace('"params_run0.npz"', '"../x.npz"')),
     "metrics.json", "outside the run folder"),
])
def test_a_damaged_run_folder_is_one_line_naming_the_file(cli, finished_run, damage, name,
                                                          needle):
    damage(finished_run / name)
    one_line_error(cli("evaluate", finished_run), 1, name, needle)


def test_a_run_folder_that_cannot_be_written_at_the_end_still_prints_the_summary(cli, tmp_path):
    """The folder passes the check before training, but metrics.json cannot be replaced
    (a folder stands in its place): the summary is printed, then one line, exit 1."""
    out = tmp_path / "run"
    (out / "metrics.json").mkdir(parents=True)
    result = cli("train", KARATE, "--out", out, "--epochs", "3", "--quiet")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "test accuracy" in result.stdout  # the summary came first
    last = [line for line in result.output.splitlines() if line.strip()][-1]
    assert last.startswith("error: cannot write") and "metrics.json" in last
    assert "not saved" in last


def test_diverged_run_exits_1(cli, tmp_path):
    result = cli("train", KARATE, "--epochs", "5", "--quiet", "--set", "optim.lr=1e30",
                 "--set", "train.grad_clip_norm=null", "--set", "optim.name=sgd",
                 "--set", "optim.momentum=0", "--out", tmp_path)
    assert result.exit_code == 1 and "diverged" in result.output
    assert json.loads((tmp_path / "metrics.json").read_text())["summary"]["status"] == "diverged"


def test_an_unwritable_out_folder_fails_before_training(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = cli("train", KARATE, "--out", blocker / "run", "--quiet")
    one_line_error(result, 2, f"--out {blocker / 'run'}: {blocker} is a file, not a folder")


@pytest.mark.parametrize("config", ["karate", "moons"])
def test_plot_writes_the_pictures_of_a_graph_or_a_point_cloud_run(cli, tmp_path, config):
    path = tmp_path / f"{config}.png"
    result = cli("train", {"karate": KARATE, "moons": MOONS}[config], "--epochs", "3",
                 "--quiet", "--plot", path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert f"pictures of the run: {path}" in result.output.replace("\n", "")


def test_a_plot_in_an_unknown_format_is_a_usage_error_before_training(cli, tmp_path):
    one_line_error(cli("train", KARATE, "--plot", tmp_path / "k.jpg", "--out", tmp_path / "run"),
                   2, "must end in .png, .svg, .pdf")
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- a point-cloud run


def test_moons_live_display_summary_outputs_and_memory_report(cli, tmp_path):
    result = cli("train", MOONS, "--epochs", "3", "--out", tmp_path, "--memory-report")
    assert result.exit_code == 0, result.output
    assert "MLP on moons" in result.output and "dense (point cloud)" in result.output
    assert "where the memory of one training step went" in result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["placement"] == {"features": "dense (point cloud)"}
    assert metrics["config"]["train"]["batch_size"] == 32
    assert [row["epoch"] for row in metrics["runs"][0]["epochs"]] == [1, 2, 3]
    assert (tmp_path / "params_run0.npz").is_file()
    assert set(metrics["memory_report"]["operands"]) == {"features"}  # no graph operand




def test_plot_without_matplotlib_is_one_line_before_training(cli, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = cli("train", MOONS, "--plot", tmp_path / "m.png", "--out", tmp_path / "run")
    one_line_error(result, 1, "pip install matplotlib")
    assert not (tmp_path / "run").exists()  # nothing was trained


def test_evaluate_reloads_a_point_cloud_run(cli, tmp_path):
    out = tmp_path / "moons"
    trained = cli("train", MOONS, "--epochs", "5", "--quiet", "--out", out)
    assert trained.exit_code == 0, trained.output
    metrics = json.loads((out / "metrics.json").read_text())
    again = cli("evaluate", out, "--json")
    assert again.exit_code == 0, again.output
    rows = json.loads(again.output)
    assert rows[0]["test_acc"] == metrics["runs"][0]["test_acc"]
    assert rows[0]["val_acc"] == metrics["runs"][0]["val_acc"]


# ---------------------------------------------------------------- signals, in a real process


def _catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has its own handler for `signum` (Linux: SigCgt in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def _training(out: Path, tmp_path: Path) -> subprocess.Popen:
    """`python -m mgsparse train` on karate for 100,000 epochs, returned once the command has
    put its own SIGTERM handler in place (it does so just before the first epoch), plus
    0.3 s for the first epochs to run (a karate epoch takes about a millisecond)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", MGSPARSE_DATA=str(tmp_path / "data"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mgsparse", "train", str(KARATE), "--epochs", "100000",
         "--set", "train.patience=null", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    deadline = time.monotonic() + 120
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "training never started"
        time.sleep(0.05)
    time.sleep(0.3)
    return proc


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc")
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_a_signal_ends_the_run_after_the_epoch_and_keeps_metrics(tmp_path, signum, code):
    out = tmp_path / "interrupted"
    proc = _training(out, tmp_path)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr + stdout
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert f"{name}: stopping after this epoch" in stderr
    assert "test accuracy" in stdout  # the summary is printed
    metrics = json.loads((out / "metrics.json").read_text())
    (run0,) = metrics["runs"]
    assert run0["status"] == "interrupted" and 0 < len(run0["epochs"]) < 100000
    assert run0["params"] == "params_run0.npz" and (out / "params_run0.npz").is_file()
    assert metrics["summary"]["status"] == "interrupted"



def test_epochs_csv_reads_with_dictreader_and_matches_metrics_json(cli, finished_run):
    import csv

    with open(finished_run / "epochs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = json.loads((finished_run / "metrics.json").read_text())["runs"][0]["epochs"]
    assert len(rows) == len(epochs) == 5
    for row, epoch in zip(rows, epochs):
        assert (row["run"], row["seed"]) == ("0", "0")
        for key in ("epoch", "loss", "val_loss", "train_acc", "val_acc", "test_acc",
                    "grad_norm"):
            assert float(row[key]) == epoch[key], key


def test_a_bad_line_in_your_csv_graph_is_file_and_line_and_exit_2(cli, tmp_path):
    example = CONFIGS / "examples" / "two-communities"
    edges = tmp_path / "edges.csv"
    lines = (example / "edges.csv").read_text().splitlines()
    lines[3] = "4,not-a-node"
    edges.write_text("\n".join(lines) + "\n")
    config = tmp_path / "mine.yaml"
    config.write_text(f"dataset:\n  name: csv\n  edges: {edges}\n"
                      f"  labels: {example / 'labels.csv'}\n  split: random\n"
                      "  num_train_per_class: 2\n  num_val: 4\n  num_test: 10\n")
    one_line_error(cli("train", config, "--epochs", "2"), 2, str(edges), "line 4")


def test_your_csv_graph_trains_from_the_shipped_example(cli):
    result = cli("train", CONFIGS / "csv-example.yaml", "--quiet", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["test_acc_mean"] >= 0.8


def test_a_budget_too_small_even_sparse_stops_before_training_leaving_nothing(cli, tmp_path):
    out = tmp_path / "never"
    result = cli("train", KARATE, "--out", out, "--set", "monitor.memory_budget_mb=0.001")
    one_line_error(result, 1, "with every operand sparse, over the", "budget")
    assert not out.exists()
