"""What a run watches: nnz ratios, the bytes an operand holds, the bytes each op saves for
backward, and one traced training step's report."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.nn import functional as F
from mgsparse.optim import Adam
from mgsparse.run.build import build_model
from mgsparse.run.monitor import (
    MB,
    TRACE_EVERY,
    TRACED_FIRST,
    EpochMemory,
    MemoryReport,
    finite,
    held_nbytes,
    nnz_ratio,
    operand_nbytes,
    saved_bytes_by_op,
    trace_step,
)
from mgsparse.sparse import SparseTensor
from tests.conftest import make_config


def test_nnz_ratio_of_each_kind_of_operand():
    m = sp.csr_matrix(np.diag([1.0, 2.0, 0.0, 4.0]))  # 3 stored of 16
    assert nnz_ratio(m) == 3 / 16
    assert nnz_ratio(SparseTensor.from_scipy(m)) == pytest.approx(3 / 16)
    assert nnz_ratio(Tensor(np.zeros((4, 4)))) == 1.0  # dense holds every entry
    assert nnz_ratio(sp.csr_matrix((0, 0))) == 0.0  # no division by zero


def test_operand_nbytes_counts_indices_and_values_or_the_dense_array():
    m = sp.csr_matrix(np.diag(np.arange(1, 6, dtype=np.float32)))
    A = SparseTensor.from_scipy(m)
    assert operand_nbytes(A) == A.indices.nbytes + 5 * 4
    assert operand_nbytes(Tensor(np.zeros((3, 4), np.float32))) == 48
    assert operand_nbytes(np.zeros(10, np.int64)) == 80
    assert operand_nbytes(None) == 0


def test_finite():
    assert finite(1.0) and finite(np.ones(3))
    assert not finite(float("nan")) and not finite(np.array([1.0, np.inf]))


def test_saved_bytes_are_counted_per_op_before_backward_frees_them():
    W = Tensor(np.ones((100, 10), np.float32), requires_grad=True)
    X = Tensor(np.ones((50, 100), np.float32))
    loss = F.cross_entropy((X @ W).relu(), np.zeros(50, np.int64))
    saved = saved_bytes_by_op(loss)
    assert set(saved) == {"MatMul", "Relu", "CrossEntropy"}
    assert saved["MatMul"] >= X.data.nbytes  # dW = Xᵀ·G needs X
    assert list(saved.values()) == sorted(saved.values(), reverse=True)  # largest first


def test_trace_step_reports_parameters_state_operands_and_the_peak():
    config = make_config(model={"hidden": 8})
    model = build_model(config.model, 20, 3, np.random.default_rng(0))
    optimizer = Adam(model.parameters(), lr=0.01)
    X = Tensor(np.random.default_rng(1).normal(size=(30, 20)).astype(np.float32))
    A = SparseTensor.from_scipy(sp.identity(30, dtype=np.float32, format="csr"))
    y = np.zeros(30, np.int64)
    report = trace_step(model, optimizer, lambda: F.cross_entropy(model(X, A), y),
                        {"features": X, "adjacency": A})
    assert isinstance(report, MemoryReport)
    n_params = 20 * 8 + 8 + 8 * 3 + 3
    assert report.parameters == 4 * n_params
    assert report.optimizer_state >= 2 * 4 * n_params  # Adam: two moments
    assert report.operands == {"features": 30 * 20 * 4, "adjacency": operand_nbytes(A)}
    saved = report.saved_for_backward
    assert all(v >= 0 for v in saved.values())
    assert saved["SpMM"] > 0 and saved["MatMul"] > 0 and saved["CrossEntropy"] > 0
    assert report.parameters < report.traced_peak < 100 * MB
    assert all(p.grad is not None for p in model.parameters())  # a real step ran


def test_held_bytes_count_each_buffer_once_however_many_views_share_it():
    a = np.zeros(1000, np.float64)
    views = [a[:10], a[5:], a.reshape(10, 100)]
    assert held_nbytes(a, views, {"again": a}) == 8000
    A = SparseTensor.from_scipy(sp.identity(50, dtype=np.float32, format="csr"))
    assert held_nbytes(A) >= operand_nbytes(A)  # indices and values, and any cached views
    assert held_nbytes(None, "text", 3) == 0


def test_sampled_epochs_are_the_first_steady_one_and_one_table_row_in_two():
    tracer = EpochMemory(True, log_every=10)
    sampled = [e for e in range(1, 81) if tracer.sampled(e)]
    assert sampled == [TRACED_FIRST, 20, 40, 60, 80]
    assert TRACE_EVERY * 10 == 20
    assert not any(EpochMemory(False, 1).sampled(e) for e in range(1, 5))


def test_a_sampled_epoch_reports_held_plus_its_transient_peak():
    tracer = EpochMemory(True, log_every=10)
    assert tracer.begin(TRACED_FIRST)
    scratch = np.ones(2**20, np.uint8)  # 1 MB allocated and freed during the epoch
    del scratch
    held, peak = tracer.end(3 * MB)
    assert held == 3.0 and 4.0 <= peak < 5.0
    assert tracer.peak_mb == peak
    assert not tracer.begin(5)  # not a sampled epoch: nothing traced


def test_held_bytes_count_the_products_a_layer_keeps_for_fixed_operands():
    """After an evaluation a GCN's first layer keeps Â·X of the placed (frozen) features: the
    run holds that array too, N × F_in float32, and says so."""
    from mgsparse.config import config_from_dict
    from mgsparse.run import GraphTask, build_optimizer
    from mgsparse.run.monitor import run_nbytes
    from mgsparse.run.placed import load_graph

    config = config_from_dict({
        "dataset": {"name": "synthetic", "num_nodes": 300, "num_classes": 3, "avg_degree": 4,
                    "num_features": 24, "split": "random", "num_train_per_class": 4,
                    "num_val": 30, "num_test": 60, "normalize_features": False},
        "model": {"kind": "gcn", "hidden": 8, "dropout": 0.5},
        "train": {"seed": 0, "receptive_field": False}, "monitor": {"memory": False}})
    task = GraphTask(config, load_graph(config.dataset))
    model = task.build_model(np.random.default_rng(0))
    optimizer = build_optimizer(config.optim, model)
    task.evaluate(model)  # also builds Â's cached views: count with and without the product
    held = run_nbytes(task.operands().values(), model, optimizer)
    (kept,) = model.convs[0]._fixed._kept.values()
    assert kept[3].shape == (300, 24)
    model.convs[0]._fixed._kept.clear()
    assert held - run_nbytes(task.operands().values(), model, optimizer) == 300 * 24 * 4
