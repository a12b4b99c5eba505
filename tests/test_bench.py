"""The dense-vs-sparse bench as a library: equivalence, what the memory figures count, the
dense budget guard, the growth-exponent fit, the settings parsers and the sweep plot.
No timing is asserted: only figures that do not depend on the machine's load."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from mgsparse import bench
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.problem import load_graph

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib not installed")


def synthetic(num_nodes: int = 300, **dataset):
    return bench.bench_config("synthetic", overrides=[f"dataset.num_nodes={num_nodes}"] +
                              [f"dataset.{k}={v}" for k, v in dataset.items()])


@pytest.fixture(scope="module")
def karate_result():
    config = bench.bench_config("karate")
    return bench.dense_vs_sparse(config, load_graph(config.dataset), repeat=2, warmup=1)


@pytest.fixture(scope="module")
def sbm_result():
    config = synthetic(400)
    return bench.dense_vs_sparse(config, load_graph(config.dataset), repeat=2, warmup=0)


# ---------------------------------------------------------------- equivalence


def test_karate_sparse_and_dense_give_the_same_loss_and_gradients(karate_result):
    eq = karate_result.equivalence
    assert eq.passed
    assert set(eq.grad_rel_diff) == {"convs.0.weight", "convs.0.bias", "convs.1.weight",
                                     "convs.1.bias"}
    assert eq.max_rel_diff < 1e-5
    assert eq.loss_sparse == pytest.approx(np.log(2), abs=0.3)  # 2 classes, untrained
    assert karate_result.num_nodes == 34
    assert karate_result.adjacency_nnz == 156 + 34  # directed edges + self loops


def test_a_wrong_dense_operand_is_caught(monkeypatch):
    """Negative control: scale the dense Â by 1.01 and the check must fail."""
    place = bench.place

    def skewed(base, representation):
        problem = place(base, representation)
        if representation == "dense":
            problem = dataclasses.replace(problem, norm_adj=Tensor(problem.norm_adj.data * 1.01))
        return problem

    monkeypatch.setattr(bench, "place", skewed)
    config = bench.bench_config("karate")
    result = bench.dense_vs_sparse(config, load_graph(config.dataset), repeat=1, warmup=0)
    assert not result.equivalence.passed
    assert result.equivalence.max_rel_diff > 1e-3
    assert "DIFFER" in result.verdict()


def test_same_initial_weights_so_the_first_steps_agree(sbm_result):
    """Both representations start from the seed's weights: equal losses to float32 accuracy."""
    eq = sbm_result.equivalence
    assert eq.loss_rel_diff < 1e-6
    assert eq.passed


# ---------------------------------------------------------------- what memory counts


def test_dense_operands_are_the_two_dense_arrays(sbm_result):
    n, f = sbm_result.num_nodes, sbm_result.num_features
    exact = 4 * (n * n + n * f)
    assert exact <= sbm_result.dense.operand_bytes < exact + 65_536  # + Python objects
    assert sbm_result.dense.adjacency_stored_fraction == 1.0


def test_sparse_operands_are_indices_and_values(sbm_result):
    nnz = sbm_result.adjacency_nnz + sbm_result.feature_nnz
    assert 20 * nnz <= sbm_result.sparse.operand_bytes < 20 * nnz + 65_536  # int64 pair + f32
    assert sbm_result.sparse.adjacency_stored_fraction == pytest.approx(
        sbm_result.adjacency_nnz / sbm_result.num_nodes ** 2)


def test_peak_counts_the_operands_and_more(sbm_result):
    for row in (sbm_result.sparse, sbm_result.dense):
        assert row.traced_peak_bytes >= row.operand_bytes + row.step_transient_bytes
        assert row.step_transient_bytes > 0
    assert sbm_result.dense.traced_peak_bytes > 4 * sbm_result.num_nodes ** 2  # holds Â
    assert sbm_result.memory_ratio > 1.5  # 400 nodes only: Â is 2.75% dense


def test_the_dense_estimate_bounds_the_measured_dense_peak():
    """One N×N array (Â) and no N×N temporary: the estimate holds the measured peak."""
    config = synthetic(1500)
    result = bench.dense_vs_sparse(config, load_graph(config.dataset), repeat=1, warmup=0)
    estimate = bench.dense_bytes_estimate(1500, result.num_features, config.model.hidden)
    assert 4 * 1500 ** 2 < result.dense.traced_peak_bytes <= estimate
    assert result.dense.traced_peak_bytes < 2 * 4 * 1500 ** 2  # not a second N×N array


def test_json_holds_every_figure(karate_result):
    data = json.loads(json.dumps(karate_result.to_dict()))
    assert data["benchmark"] == "dense_vs_sparse"
    assert {"dataset", "num_nodes", "adjacency_nnz", "feature_nnz", "repeat", "warmup",
            "sparse", "dense", "ratios", "equivalence", "verdict"} <= set(data)
    for side in ("sparse", "dense"):
        assert {"step_ms_median", "step_ms_iqr", "traced_peak_bytes", "step_transient_bytes",
                "operand_bytes", "rss_bytes", "adjacency_stored_fraction",
                "feature_stored_fraction", "step_ms"} <= set(data[side])
        assert len(data[side]["step_ms"]) == 2
    assert data["ratios"]["time_dense_over_sparse"] == pytest.approx(
        data["dense"]["step_ms_median"] / data["sparse"]["step_ms_median"])
    assert data["equivalence"]["passed"] is True


# ---------------------------------------------------------------- sweep


@pytest.fixture(scope="module")
def small_sweep():
    return bench.scale_sweep(synthetic(), [200, 1200], repeat=1, warmup=0, memory_budget_mb=2)


def test_dense_is_refused_above_the_budget_with_the_reason(small_sweep):
    fits, too_big = small_sweep.points
    assert fits.dense is not None and fits.dense_skipped == "" and fits.equivalence.passed
    assert too_big.dense is None and too_big.equivalence is None
    assert fits.kernel_ms > 0 and too_big.kernel_ms > 0
    assert too_big.dense_estimate_bytes == bench.dense_bytes_estimate(1200, 64, 16)
    assert too_big.dense_skipped == (
        f"dense skipped: it would hold ~{too_big.dense_estimate_bytes / 2**20:.2g} MB "
        "(N²·4 B for Â plus the features), over the 2 MB budget")


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


def test_a_single_comparison_is_refused_over_the_budget(monkeypatch):
    """Karate's dense step is tiny; a budget of 1 kB refuses it before anything is built."""
    monkeypatch.setattr(bench, "sparse_problem", lambda *a: pytest.fail("work was done"))
    config = bench.bench_config("karate")
    with pytest.raises(ConfigError) as info:
        bench.dense_vs_sparse(config, load_graph(config.dataset), memory_budget_mb=0.001)
    assert bench.dense_bytes_estimate(34, 34, 16) == 4 * (34 * 34 + 3 * 34 * 34 + 16 * 34 * 16)
    assert str(info.value) == ("karate: dense skipped: it would hold ~0.051 MB (N²·4 B for Â "
                               "plus the features), over the 0.001 MB budget; "
                               "raise the memory budget to run it")


def test_sweep_needs_the_synthetic_dataset():
    with pytest.raises(ConfigError, match="needs the synthetic dataset"):
        bench.scale_sweep(bench.bench_config("karate"), [200])


def point(nnz: int, ms: float, peak: int, kernel_ms: float = 0.0) -> bench.SweepPoint:
    row = bench.RepresentationResult("sparse", ms, 0.0, peak, 0, 0, 0, 0.0, 0.0)
    return bench.SweepPoint(nnz // 11, nnz, 0, row, 0, kernel_ms)


def test_exponents_are_log_log_slopes_above_the_overhead_floor():
    # time flat below FIT_MIN_NNZ (overhead), then ∝ nnz^1.1; memory ∝ nnz
    nnz = [10_000, 100_000, 1_000_000, 10_000_000]
    ms = [1.0, 1.0, 1.0 * 10 ** 1.1, 1.0 * 100 ** 1.1]
    kernel = [0.01 * (n / 1e4) ** 1.5 for n in nnz]  # a cache-bound kernel: ∝ nnz^1.5
    fit = bench._fit([point(n, t, 40 * n, k) for n, t, k in zip(nnz, ms, kernel)], 100, 1, 0)
    assert fit.fit_nnz == nnz[1:]
    expected = np.polyfit(np.log(nnz[1:]), np.log(ms[1:]), 1)[0]
    assert fit.time_exponent_large == pytest.approx(expected)
    assert fit.memory_exponent_large == pytest.approx(1.0)
    assert fit.time_exponent_all < fit.time_exponent_large
    assert fit.kernel_time_exponent_large == pytest.approx(1.5)
    assert fit.local_time_exponents == pytest.approx([0.0, 1.1, 1.1])


def test_no_kernel_time_means_no_kernel_exponent():
    fit = bench._fit([point(10**5, 1.0, 10), point(10**6, 10.0, 100)], 100, 1, 0)
    assert fit.kernel_time_exponent_large is None
    assert fit.time_exponent_large == pytest.approx(1.0)


def test_fewer_than_two_large_sizes_fit_all_of_them():
    fit = bench._fit([point(1_000, 1.0, 10), point(10_000, 10.0, 100)], 100, 1, 0)
    assert fit.fit_nnz == [1_000, 10_000]
    assert fit.time_exponent_large == pytest.approx(1.0)
    assert bench._fit([point(1_000, 1.0, 10)], 100, 1, 0).time_exponent_large is None


# ---------------------------------------------------------------- settings


def test_scale_parses_integers_sorted_and_once():
    assert bench.parse_scale("10000, 1000,1e4,1_000_000") == [1000, 10000, 1000000]


@pytest.mark.parametrize("text, needle", [
    ("1000,abc", "'abc' is not a node count"),
    ("1000,", "'' is not a node count"),
    ("1500.5", "must be an integer node count"),
    ("10", "must be an integer node count in [100, 10,000,000]"),
    ("1e9", "must be an integer node count"),
])
def test_a_bad_scale_is_a_one_line_usage_error(text, needle):
    with pytest.raises(ConfigError) as info:
        bench.parse_scale(text)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("dataset, needle", [
    ("coraa", "dataset.name"),
    ("moons", "has no graph to bench"),
])
def test_a_bad_dataset_is_a_usage_error(dataset, needle):
    with pytest.raises(ConfigError, match=needle):
        bench.bench_config(dataset)


def test_only_a_gcn_is_benched():
    with pytest.raises(ConfigError, match="runs a GCN step"):
        bench.bench_config("karate", overrides=["model.kind=mlp"])


@pytest.mark.parametrize("kwargs", [{"repeat": 0}, {"warmup": -1}, {"tolerance": 0.0},
                                    {"memory_budget_mb": 0}])
def test_bad_settings_are_refused_before_any_work(kwargs):
    config = bench.bench_config("karate")
    with pytest.raises(ConfigError):
        bench.dense_vs_sparse(config, load_graph(config.dataset), **kwargs)


def test_the_library_loads_no_cli_and_no_matplotlib():
    probe = ("import json, sys, mgsparse.bench; print(json.dumps(sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('typer', 'rich', 'matplotlib') or m.startswith('mgsparse.cli'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


# ---------------------------------------------------------------- plot


@needs_matplotlib
def test_sweep_plot_is_a_png(small_sweep, tmp_path):
    path = bench.plot_sweep(small_sweep, tmp_path / "sweep.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # two panels with axes, lines and labels


def test_without_matplotlib_the_plot_says_how_to_install_it(small_sweep, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` now fails
    with pytest.raises(MgsparseError) as info:
        bench.plot_sweep(small_sweep, tmp_path / "sweep.png")
    assert "pip install 'mgsparse[plot]'" in str(info.value)
    assert not (tmp_path / "sweep.png").exists()
