"""`run_benchmark`: the one call behind `mgsparse bench`: settings checked before any work, the
comparison or the sweep, its JSON and plot written where asked."""

from __future__ import annotations

import importlib
import json

import pytest

from mgsparse.bench import DenseVsSparseResult, SweepResult
from mgsparse.bench import run as bench_run
from mgsparse.bench.run import run_benchmark
from mgsparse.errors import ConfigError, DataError

dense_vs_sparse = importlib.import_module("mgsparse.bench.dense_vs_sparse")
sweep = importlib.import_module("mgsparse.bench.sweep")


def bench(**kwargs):
    args = {"dense_vs_sparse_": True, "dataset": "karate", "config_path": None, "overrides": (),
            "scale": None, "repeat": 1, "warmup": 0, "budget_mb": 2048.0, "tolerance": 1e-4}
    return run_benchmark(**{**args, **kwargs})


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a benchmark starts."""
    def refuse(*args, **kwargs):
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(bench_run, "dense_vs_sparse", refuse)
    monkeypatch.setattr(bench_run, "scale_sweep", refuse)


def test_the_comparison_writes_its_json(tmp_path):
    path = tmp_path / "b.json"
    result = bench(json_path=path)
    assert isinstance(result, DenseVsSparseResult) and result.equivalence.passed
    assert json.loads(path.read_text()) == json.loads(json.dumps(result.to_dict()))


def test_the_sweep_runs_with_a_scale(tmp_path):
    result = bench(dataset="synthetic", scale="200", json_path=tmp_path / "s.json")
    assert isinstance(result, SweepResult)
    assert [p.num_nodes for p in result.points] == [200]
    assert json.loads((tmp_path / "s.json").read_text())["benchmark"] == "scale_sweep"


@pytest.mark.parametrize("kwargs, error, needle", [
    ({"dense_vs_sparse_": False}, ConfigError, "choose a benchmark: --dense-vs-sparse"),
    ({"plot_path": "PLOT"}, ConfigError, "--plot draws the scaling sweep; add --scale"),
    ({"scale": "10"}, ConfigError, "must be an integer node count"),
    ({"dataset": "moons"}, ConfigError, "has no graph to bench"),
    ({"json_path": "MISSING"}, DataError, "--json"),
    ({"dataset": "synthetic", "scale": "200", "plot_path": "MISSING"}, DataError, "--plot"),
])
def test_bad_settings_are_refused_before_any_work(no_work, tmp_path, kwargs, error, needle):
    paths = {"PLOT": tmp_path / "a.png", "MISSING": tmp_path / "missing" / "a.json"}
    kwargs = {k: paths.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(error) as info:
        bench(**kwargs)
    assert needle in str(info.value)


def test_the_sweep_is_handed_to_the_callers_picture(tmp_path):
    """bench sits below plots: the picture is the caller's `draw` (the CLI passes
    `mgsparse.cli.plots.plot_sweep` and checks matplotlib before the sweep)."""
    drawn = []
    result = bench(dataset="synthetic", scale="200", plot_path=tmp_path / "s.png",
                   draw=lambda r, path: drawn.append((r, path)))
    assert drawn == [(result, tmp_path / "s.png")]


def test_an_unwritable_json_path_is_one_data_error(tmp_path):
    (tmp_path / "b.json").mkdir()  # a folder where the file should go
    with pytest.raises(DataError, match="cannot write"):
        bench(json_path=tmp_path / "b.json")
