"""The scaling sweep as a library: the dense budget guard at each size, the JSON schema, the
log-log growth-exponent fit and the --scale parser (its plot: tests/cli/test_plots.py).
No timing is asserted: only figures that do not depend on the machine's load."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from mgsparse.bench import sweep
from mgsparse.errors import ConfigError

# the module: `mgsparse.bench.dense_vs_sparse` as an attribute is the function of that name
bench = importlib.import_module("mgsparse.bench.dense_vs_sparse")


# ---------------------------------------------------------------- the sweep


@pytest.fixture(scope="module")
def small_sweep():
    return sweep.scale_sweep(bench.bench_config("synthetic"), [200, 1200], repeat=1, warmup=0,
                             memory_budget_mb=2)


def test_dense_is_refused_above_the_budget_with_the_reason(small_sweep):
    fits, too_big = small_sweep.points
    assert fits.dense is not None and fits.dense_skipped == "" and fits.equivalence.passed
    assert too_big.dense is None and too_big.equivalence is None
    assert fits.kernel_ms > 0 and too_big.kernel_ms > 0
    assert too_big.dense_estimate_bytes == bench.dense_bytes_estimate(1200, 64, 16)
    assert too_big.dense_skipped == (
        f"dense skipped: it would hold ~{too_big.dense_estimate_bytes / 2**20:.2g} MB "
        "(N²·4 B for Â plus the features), over the 2 MB budget")


def test_the_sweep_times_whole_graph_steps_whatever_the_config_trains(monkeypatch):
    """Issue #23: the sweep fitted receptive-field steps (nnz^0.19: a field of fixed rows stops
    growing with the graph). Every point must hold and read the whole graph's Â, even when the
    config asks for receptive fields."""
    measured, measure = [], bench.measure

    def spy(config, base, *args):
        measured.append(base.placed.placement.get("training rows"))
        return measure(config, base, *args)

    monkeypatch.setattr(bench, "measure", spy)
    config = bench.bench_config("synthetic", overrides=["train.receptive_field=true"])
    result = sweep.scale_sweep(config, [300], repeat=1, warmup=0, memory_budget_mb=2)
    assert measured == [None, None]  # sparse and dense: no receptive field
    (point,) = result.points
    stored = point.adjacency_nnz + point.feature_nnz  # int64 index pair + float32 value each
    assert 20 * stored <= point.sparse.operand_bytes < 20 * stored + 65_536
    assert point.dense.operand_bytes >= 4 * 300 * 300  # the whole-graph dense Â
    assert point.equivalence.passed


def test_sweep_json_schema(small_sweep):
    data = json.loads(json.dumps(small_sweep.to_dict()))
    assert data["benchmark"] == "scale_sweep"
    assert [p["num_nodes"] for p in data["points"]] == [200, 1200]
    assert data["points"][1]["dense"] is None
    assert data["points"][0]["equivalence"]["passed"] is True
    assert {"time_exponent_large", "memory_exponent_large", "time_exponent_all",
            "memory_exponent_all",
            "kernel_time_exponent_large", "local_time_exponents", "fit_nnz",
            "dense_time_exponent_nodes", "memory_budget_mb", "passed"} <= set(data)
    assert len(data["local_time_exponents"]) == 1
    assert {"num_nodes", "adjacency_nnz", "feature_nnz", "sparse", "dense", "kernel_ms",
            "dense_estimate_bytes", "dense_skipped", "equivalence"} == set(data["points"][0])
    assert data["dense_time_exponent_nodes"] is None  # one dense size: no slope


def test_sweep_needs_the_synthetic_dataset():
    with pytest.raises(ConfigError, match="needs the synthetic dataset"):
        sweep.scale_sweep(bench.bench_config("karate"), [200])


def point(nnz: int, ms: float, peak: int, kernel_ms: float = 0.0) -> sweep.SweepPoint:
    row = bench.RepresentationResult("sparse", ms, 0.0, peak, 0, 0, 0, 0.0, 0.0)
    return sweep.SweepPoint(nnz // 11, nnz, 0, row, 0, kernel_ms)


def test_exponents_are_log_log_slopes_above_the_overhead_floor():
    # time flat below FIT_MIN_NNZ (overhead), then ∝ nnz^1.1; memory ∝ nnz
    nnz = [10_000, 100_000, 1_000_000, 10_000_000]
    ms = [1.0, 1.0, 1.0 * 10 ** 1.1, 1.0 * 100 ** 1.1]
    kernel = [0.01 * (n / 1e4) ** 1.5 for n in nnz]  # a cache-bound kernel: ∝ nnz^1.5
    fit = sweep._fit([point(n, t, 40 * n, k) for n, t, k in zip(nnz, ms, kernel)], 100, 1, 0)
    assert fit.fit_nnz == nnz[1:]
    expected = np.polyfit(np.log(nnz[1:]), np.log(ms[1:]), 1)[0]
    assert fit.time_exponent_large == pytest.approx(expected)
    assert fit.memory_exponent_large == pytest.approx(1.0)
    assert fit.time_exponent_all < fit.time_exponent_large
    assert fit.kernel_time_exponent_large == pytest.approx(1.5)
    assert fit.local_time_exponents == pytest.approx([0.0, 1.1, 1.1])


def test_no_kernel_time_means_no_kernel_exponent():
    fit = sweep._fit([point(10**5, 1.0, 10), point(10**6, 10.0, 100)], 100, 1, 0)
    assert fit.kernel_time_exponent_large is None
    assert fit.time_exponent_large == pytest.approx(1.0)


def test_fewer_than_two_large_sizes_fit_all_of_them():
    fit = sweep._fit([point(1_000, 1.0, 10), point(10_000, 10.0, 100)], 100, 1, 0)
    assert fit.fit_nnz == [1_000, 10_000]
    assert fit.time_exponent_large == pytest.approx(1.0)
    assert sweep._fit([point(1_000, 1.0, 10)], 100, 1, 0).time_exponent_large is None


# ---------------------------------------------------------------- --scale


def test_scale_parses_integers_sorted_and_once():
    assert sweep.parse_scale("10000, 1000,1e4,1_000_000") == [1000, 10000, 1000000]


@pytest.mark.parametrize("text, needle", [
    ("1000,abc", "'abc' is not a node count"),
    ("1000,", "'' is not a node count"),
    ("1500.5", "must be an integer node count"),
    ("10", "must be an integer node count in [100, 10,000,000]"),
    ("1e9", "must be an integer node count"),
])
def test_a_bad_scale_is_a_one_line_usage_error(text, needle):
    with pytest.raises(ConfigError) as info:
        sweep.parse_scale(text)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2
