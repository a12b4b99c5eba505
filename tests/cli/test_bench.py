"""`mgsparse bench --dense-vs-sparse` driven as a user would: tables, JSON, exit codes, messages.
Small graphs only (karate, SBMs of a few hundred nodes); no timing is asserted."""

from __future__ import annotations

import json
import sys

import pytest

from mgsparse.bench import run as bench_run
from tests.conftest import one_line_error

# timed benchmark runs of 1-3 s each: the whole suite runs them, `-m 'not slow'` does not
pytestmark = pytest.mark.slow


@pytest.fixture
def run(cli):
    """`mgsparse bench ARGS` through the shared CLI fixture."""
    return lambda *args: cli("bench", *args)


def test_karate_prints_both_rows_the_ratios_and_the_verdict(run, tmp_path):
    path = tmp_path / "bench.json"
    result = run("--dense-vs-sparse", "--dataset", "karate", "--repeat", "2", "--warmup", "0",
                 "--json", path)
    assert result.exit_code == 0, result.output
    rows = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("│")}
    assert {"sparse", "dense", "dense/sparse"} <= rows
    text = " ".join(result.stdout.split())
    assert "GCN whole-graph training step on karate: 34 nodes, Â nnz 190" in text
    assert "agree" in text and "verdict: sparse whole-graph step" in text
    assert ("GCN training step on karate's receptive field: 2 <- 31 <- 34 of 34 rows (what "
            "`mgsparse train` runs; its Â blocks sparse both ways)") in text
    assert "verdict: sparse receptive-field step" in text
    data = json.loads(path.read_text())
    assert data["benchmark"] == "dense_vs_sparse" and data["dataset"] == "karate"
    assert data["equivalence"]["passed"] is True
    assert data["verdict"] in " ".join(result.stdout.split())
    assert f"JSON written to {path}" in " ".join(result.stdout.split())


def test_a_mismatch_exits_1(run, skewed_dense_adjacency):
    result = run("--dense-vs-sparse", "--dataset", "karate", "--repeat", "1", "--warmup", "0")
    assert result.exit_code == 1, result.output
    assert "DIFFER" in result.stdout


def test_config_file_and_set_are_used(run, tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text("dataset:\n  name: synthetic\n  num_nodes: 300\nmodel:\n  hidden: 8\n")
    path = tmp_path / "out.json"
    result = run("--dense-vs-sparse", "--config", config, "--set", "dataset.num_features=32",
                 "--repeat", "1", "--warmup", "0", "--json", path)
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text())
    assert (data["num_nodes"], data["num_features"]) == (300, 32)


def test_sweep_refuses_dense_over_the_budget_and_writes_json(run, tmp_path):
    path = tmp_path / "sweep.json"
    result = run("--dense-vs-sparse", "--dataset", "synthetic", "--scale", "200,1200",
                 "--repeat", "1", "--warmup", "0", "--memory-budget-mb", "2", "--json", path)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "n=1,200: dense skipped: it would hold ~" in text
    assert "over the 2 MB budget" in text
    assert "skipped" in result.stdout and "equivalence at 1 size(s)" in text
    data = json.loads(path.read_text())
    assert data["benchmark"] == "scale_sweep"
    small, large = data["points"]
    assert small["dense"] is not None and large["dense"] is None
    assert large["dense_skipped"].startswith("dense skipped")


@pytest.mark.parametrize("scale, needle", [
    ("1000,abc", "--scale: 'abc' is not a node count"),
    ("12.5", "must be an integer node count"),
    ("5", "must be an integer node count in [100, 10,000,000]"),
])
def test_a_bad_scale_exits_2_with_one_line(run, scale, needle):
    result = run("--dense-vs-sparse", "--dataset", "synthetic", "--scale", scale)
    one_line_error(result, 2, needle)


def test_scale_needs_the_synthetic_dataset(run):
    result = run("--dense-vs-sparse", "--dataset", "karate", "--scale", "1000")
    one_line_error(result, 2, "needs the synthetic dataset", "'karate'")


@pytest.mark.parametrize("dataset, needle", [
    ("coraa", "did you mean 'cora'"),
    ("moons", "has no graph to bench"),
])
def test_a_bad_dataset_exits_2_with_one_line(run, dataset, needle):
    one_line_error(run("--dense-vs-sparse", "--dataset", dataset), 2, needle)


def test_without_the_benchmark_flag_it_says_which_to_choose(run):
    one_line_error(run("--dataset", "karate"), 2, "--dense-vs-sparse")


@pytest.mark.parametrize("args, needle", [
    (["--repeat", "0"], "repeat >= 1"),
    (["--tolerance", "0"], "tolerance must be > 0"),
])
def test_bad_settings_exit_2(run, args, needle):
    one_line_error(run("--dense-vs-sparse", "--dataset", "karate", *args), 2, needle)


def test_plot_without_a_sweep_is_a_usage_error(run, tmp_path):
    one_line_error(run("--dense-vs-sparse", "--dataset", "karate", "--plot", tmp_path / "a.png"),
                   2, "--plot draws the scaling sweep")


def test_plot_without_matplotlib_fails_fast_with_the_install_hint(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    called = []
    monkeypatch.setattr(bench_run, "scale_sweep", lambda *a, **k: called.append(1))
    result = run("--dense-vs-sparse", "--dataset", "synthetic", "--scale", "200",
                 "--plot", tmp_path / "sweep.png")
    one_line_error(result, 1, "pip install matplotlib")
    assert called == []  # refused before the sweep ran
    assert not (tmp_path / "sweep.png").exists()


def test_plot_writes_a_png(run, tmp_path):
    path = tmp_path / "sweep.png"
    result = run("--dense-vs-sparse", "--dataset", "synthetic", "--scale", "200,400",
                 "--repeat", "1", "--warmup", "0", "--plot", path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {path}" in " ".join(result.stdout.split())


def test_a_comparison_over_the_budget_exits_2_before_any_work(run):
    result = run("--dense-vs-sparse", "--dataset", "karate", "--memory-budget-mb", "0.01")
    one_line_error(result, 2, "dense skipped: it would hold ~0.051 MB", "over the 0.01 MB budget",
                   "raise the memory budget")
