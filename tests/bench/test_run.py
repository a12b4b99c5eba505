"""`run_benchmark`: the one call behind `mgsparse bench`: settings checked before any work, the
comparison or the sweep (its JSON and plot are the CLI's: tests/cli/test_outputs.py)."""

from __future__ import annotations

import importlib

import pytest

from mgsparse.bench import DenseVsSparseResult, SweepResult
from mgsparse.bench import run as bench_run
from mgsparse.bench.run import run_benchmark
from mgsparse.errors import ConfigError

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


def test_the_comparison_proves_both_ways_give_the_same_numbers():
    result = bench()
    assert isinstance(result, DenseVsSparseResult) and result.equivalence.passed
    assert result.to_dict()["benchmark"] != "scale_sweep"


def test_the_sweep_runs_with_a_scale():
    result = bench(dataset="synthetic", scale="200")
    assert isinstance(result, SweepResult)
    assert [p.num_nodes for p in result.points] == [200]
    assert result.to_dict()["benchmark"] == "scale_sweep"


@pytest.mark.parametrize("kwargs, error, needle", [
    ({"dense_vs_sparse_": False}, ConfigError, "choose a benchmark: --dense-vs-sparse"),
    ({"scale": "10"}, ConfigError, "must be an integer node count"),
    ({"dataset": "moons"}, ConfigError, "has no graph to bench"),
])
def test_bad_settings_are_refused_before_any_work(no_work, kwargs, error, needle):
    with pytest.raises(error) as info:
        bench(**kwargs)
    assert needle in str(info.value)
