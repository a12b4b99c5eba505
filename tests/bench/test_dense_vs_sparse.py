"""The dense-vs-sparse bench as a library: equivalence, what the memory figures count, the
dense budget guard and the settings checks.
No timing is asserted: only figures that do not depend on the machine's load."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from mgsparse.errors import ConfigError

# the module: `mgsparse.bench.dense_vs_sparse` as an attribute is the function of that name
bench = importlib.import_module("mgsparse.bench.dense_vs_sparse")
from mgsparse.run import GraphTask, load_graph
from mgsparse.sparse import SparseTensor


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


def test_a_wrong_dense_operand_is_caught(skewed_dense_adjacency):
    """Negative control: scale the dense Â by 1.01 and the check must fail."""
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


# ---------------------------------------------------------------- which step is compared


def test_the_comparison_is_the_whole_graph_step_then_the_field_step_labelled(sbm_result):
    """Issue #23: the bench timed the receptive-field step under a whole-graph description.
    The main result is now the whole-graph step; the field step trained by default comes
    second, labelled with its rows, with only the features dense (its blocks are sparse)."""
    n, f = sbm_result.num_nodes, sbm_result.num_features
    assert sbm_result.step == "whole graph"
    assert sbm_result.dense.operand_bytes >= 4 * n * n  # the whole-graph dense Â is held
    field = sbm_result.receptive_field
    assert field.step == "receptive field: 80 <- 362 <- 400 of 400 rows"
    assert field.receptive_field is None and field.equivalence.passed
    assert 4 * n * f <= field.dense.operand_bytes < 4 * n * n  # dense X; Â never built
    assert field.dense.adjacency_stored_fraction < 0.05  # the blocks stay sparse
    # the field computes the whole graph's loss at the training rows: the same number
    assert field.equivalence.loss_dense == pytest.approx(sbm_result.equivalence.loss_dense,
                                                         rel=1e-5)
    assert sbm_result.passed and "whole-graph step" in sbm_result.verdict()
    assert "receptive-field step" in field.verdict()


def test_a_whole_graph_config_has_no_field_step():
    config = bench.bench_config("synthetic", overrides=["dataset.num_nodes=300",
                                                        "train.receptive_field=false"])
    result = bench.dense_vs_sparse(config, load_graph(config.dataset), repeat=1, warmup=0)
    assert result.step == "whole graph" and result.receptive_field is None
    assert result.to_dict()["receptive_field"] is None


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
            "sparse", "dense", "ratios", "equivalence", "verdict", "step",
            "receptive_field", "passed"} <= set(data)
    assert data["receptive_field"]["step"].startswith("receptive field: ")
    for side in ("sparse", "dense"):
        assert {"step_ms_median", "step_ms_iqr", "traced_peak_bytes", "step_transient_bytes",
                "operand_bytes", "rss_bytes", "adjacency_stored_fraction",
                "feature_stored_fraction", "step_ms"} <= set(data[side])
        assert len(data[side]["step_ms"]) == 2
    assert data["ratios"]["time_dense_over_sparse"] == pytest.approx(
        data["dense"]["step_ms_median"] / data["sparse"]["step_ms_median"])
    assert data["equivalence"]["passed"] is True


def test_a_single_comparison_is_refused_over_the_budget(monkeypatch):
    """Karate's dense step is tiny; a budget of 1 kB refuses it before anything is built."""
    monkeypatch.setattr(bench, "sparse_task", lambda *a: pytest.fail("work was done"))
    config = bench.bench_config("karate")
    with pytest.raises(ConfigError) as info:
        bench.dense_vs_sparse(config, load_graph(config.dataset), memory_budget_mb=0.001)
    assert bench.dense_bytes_estimate(34, 34, 16) == 4 * (34 * 34 + 3 * 34 * 34 + 16 * 34 * 16)
    assert str(info.value) == ("karate: dense skipped: it would hold ~0.051 MB (N²·4 B for Â "
                               "plus the features), over the 0.001 MB budget; "
                               "raise the memory budget to run it")


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize("dataset, needle", [
    ("coraa", "dataset.name .*did you mean 'cora'"),
    ("moons", "has no graph to bench"),
])
def test_a_bad_dataset_is_a_usage_error(dataset, needle):
    with pytest.raises(ConfigError, match=needle):
        bench.bench_config(dataset)


def test_only_a_gcn_is_benched():
    for kind in ("mlp", "gat", "sage"):
        with pytest.raises(ConfigError, match=f"a GCN without learned edge weights.*'{kind}'"):
            bench.bench_config("karate", overrides=[f"model.kind={kind}"])
    with pytest.raises(ConfigError, match="a GCN without learned edge weights"):
        bench.bench_config("karate", overrides=["model.learn_edge_weight=true"])


@pytest.mark.parametrize("kwargs", [{"repeat": 0}, {"warmup": -1}, {"tolerance": 0.0},
                                    {"memory_budget_mb": 0}])
def test_bad_settings_are_refused_before_any_work(kwargs):
    config = bench.bench_config("karate")
    with pytest.raises(ConfigError):
        bench.dense_vs_sparse(config, load_graph(config.dataset), **kwargs)


# ---------------------------------------------------------------- placing


def test_the_bench_places_both_operands_sparse_then_copies_them_each_way():
    config = bench.bench_config("karate")  # Â is dense at the config's threshold ...
    base = bench.sparse_task(config, load_graph(config.dataset))
    assert isinstance(base, GraphTask)  # ... but the bench starts from sparse
    assert isinstance(base.operand, SparseTensor) and isinstance(base.features, SparseTensor)
    sparse = bench.place(base, "sparse")
    assert isinstance(sparse.operand, SparseTensor)
    assert sparse.operand.values.data is not base.operand.values.data  # own copy, own bytes
    dense = bench.place(base, "dense")
    np.testing.assert_array_equal(dense.operand.data, base.operand.to_scipy("csr").toarray())
    np.testing.assert_array_equal(dense.features.data, base.features.to_scipy("csr").toarray())
    assert base.operand.shape == (34, 34)  # the base is left as it was


def test_compare_gradients_is_relative_to_the_dense_side():
    g = {"w": np.array([1.0, -4.0])}
    eq = bench.compare_gradients((2.0, {"w": np.array([1.0, -4.2])}), (2.0, g), 0.1)
    assert eq.grad_rel_diff == {"w": pytest.approx(0.05)} and eq.loss_rel_diff == 0
    assert eq.passed and not bench.compare_gradients((2.0, {"w": g["w"] * 2}), (2.0, g), 0.1).passed
