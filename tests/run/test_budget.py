"""The memory budget: its size from the config, the estimate of a step, operands turned sparse
to fit it before training, and the 80% rule after a traced epoch."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.data import karate_club
from mgsparse.engine import Tensor
from mgsparse.errors import MemoryBudgetError
from mgsparse.run import GraphTask, fit, make_task
from mgsparse.run import budget as budget_module
from mgsparse.run.budget import (
    FALLBACK_FRACTION,
    budget_bytes,
    check_epoch,
    estimate_step_bytes,
    fit_within_budget,
)
from mgsparse.run.monitor import MB
from mgsparse.sparse import SparseTensor
from tests.conftest import make_config


@pytest.fixture
def karate_task():
    """Karate with Â dense (16% > the 0.1 threshold) and the features sparse, every layer on
    the whole graph (the step reads Â, whose placement these tests are about)."""
    config = make_config(model={"dropout": 0.0}, train={"receptive_field": False})
    task = GraphTask(config, karate_club())
    assert isinstance(task.operand, Tensor) and isinstance(task.features, SparseTensor)
    return task


def test_the_budget_in_bytes(monkeypatch):
    assert budget_bytes(make_config(monitor={"memory_budget_mb": None}).monitor) is None
    assert budget_bytes(make_config(monitor={"memory_budget_mb": 100}).monitor) == 100 * MB
    monkeypatch.setattr(budget_module, "available_memory_bytes", lambda: 3000 * MB)
    assert budget_bytes(make_config(monitor={"memory_budget_mb": "auto"}).monitor) == 1500 * MB


def test_the_estimate_counts_the_operands_and_parameters(karate_task):
    estimate = estimate_step_bytes(karate_task, karate_task.config)
    params = (34 * 16 + 16 + 16 * 2 + 2) * 4
    assert estimate >= 34 * 34 * 4 + 4 * params  # Â held dense, parameters, grads, Adam


def test_a_roomy_budget_changes_nothing(karate_task):
    assert fit_within_budget(karate_task, karate_task.config, 1024 * MB) == []
    assert isinstance(karate_task.operand, Tensor)
    assert karate_task.estimate_bytes == estimate_step_bytes(karate_task, karate_task.config)
    assert fit_within_budget(karate_task, karate_task.config, None) == []


def test_a_tight_budget_turns_the_dense_adjacency_sparse_with_the_same_values(karate_task):
    config = karate_task.config
    estimate = estimate_step_bytes(karate_task, config)
    dense = karate_task.operand.data.copy()
    budget = int(estimate / FALLBACK_FRACTION) - 1  # just over 80% of it
    (event,) = fit_within_budget(karate_task, config, budget)
    assert event.epoch == 0 and event.operand == "adjacency"
    assert "adjacency kept sparse: dense would need" in event.message
    assert isinstance(karate_task.operand, SparseTensor)
    np.testing.assert_array_equal(karate_task.operand.to_scipy("csr").toarray(), dense)
    assert karate_task.placement["adjacency"].startswith("sparse (dense would need")
    assert karate_task.estimate_bytes == estimate_step_bytes(karate_task, config)  # re-estimated


def test_a_budget_too_small_even_all_sparse_is_an_error(karate_task):
    with pytest.raises(MemoryBudgetError, match="with every operand sparse, over the"):
        fit_within_budget(karate_task, karate_task.config, 1000)


def test_after_an_epoch_the_80_percent_rule_falls_back_to_sparse(karate_task):
    placed = karate_task.placed  # the rule talks to the placed graph, not the task
    assert check_epoch(placed, 5, 0.79, 1 * MB) is None
    assert check_epoch(placed, 5, 100.0, None) is None
    event = check_epoch(placed, 5, 0.9, 1 * MB)
    assert (event.epoch, event.operand, event.peak_mb, event.budget_mb) == (5, "adjacency",
                                                                              0.9, 1.0)
    assert isinstance(karate_task.operand, SparseTensor)
    assert "fell back at epoch 5" in karate_task.placement["adjacency"]
    assert check_epoch(placed, 6, 0.9, 1 * MB) is None  # nothing dense left, within it
    over = check_epoch(placed, 7, 1.5, 1 * MB)
    assert over.operand is None and "the run stops" in over.message


def fit_with_peaks(monkeypatch, peaks_mb, **train):
    """Karate placed dense (threshold 0) under a 1 MB budget whose estimate is forced to fit,
    trained with the traced peaks `peaks_mb` reported epoch after traced epoch."""
    from mgsparse.run import budget as budget_module
    from mgsparse.run.monitor import EpochMemory

    monkeypatch.setattr(budget_module, "estimate_step_bytes", lambda task, config: 0)
    reported, end = iter(peaks_mb), EpochMemory.end
    # the real end (it stops tracing), then the forced peak in place of the measured one
    monkeypatch.setattr(EpochMemory, "end", lambda self, held: (end(self, held)[0],
                                                               next(reported)))
    config = config_from_dict({"dataset": {"name": "karate"}, "sparse": {"sparsity_threshold": 0},
                               "train": {"epochs": 40, "patience": None, **train},
                               "monitor": {"memory_budget_mb": 1, "log_every": 10}})
    task = make_task(config)
    order = task.placed.dense_operands()  # largest first: the order the rule turns them sparse
    # with receptive fields on both sides Â is never built
    assert sorted(order) == (["features"] if train.get("receptive_field") else
                             ["adjacency", "features"])
    return task, fit(config, task), order


def test_the_loop_falls_back_when_a_traced_peak_passes_80_percent(monkeypatch):
    task, result, (first, second) = fit_with_peaks(monkeypatch, [0.9, 0.5, 0.5])  # 2, 20, 40
    (run,) = result.runs
    assert run.status == "completed" and len(run.rows) == 40  # the run goes on
    assert [(e["epoch"], e["operand"], e["peak_mb"]) for e in run.events] == [(2, first, 0.9)]
    assert isinstance(task.operands()[first], SparseTensor) and task.placed.dense_operands() == [second]
    assert "fell back at epoch 2" in result.placement[first]


@pytest.mark.parametrize("field", [True, False])
def test_after_a_fallback_the_loss_curve_continues_with_dropout_on(monkeypatch, field):
    """Issue #23, defect 7: after the switch the sparse features drew an nnz-shaped mask, so
    every later mask differed and the curve left the dense run's (by up to 0.06). A fallen-back
    operand now draws the dense-shaped mask: the curve is the dense run's to float rounding
    (on the receptive field, whose rows are gathered from the fallen-back features, too)."""
    settings = {"receptive_field": field}
    with monkeypatch.context() as patch:
        _, dense, _ = fit_with_peaks(patch, [0.5, 0.5, 0.5], **settings)  # stays dense
    with monkeypatch.context() as patch:
        task, fell, _ = fit_with_peaks(patch, [0.9, 0.9, 0.5], **settings)  # at 2 and 20
    events = [(e["epoch"], e["operand"]) for e in fell.runs[0].events]
    assert events == [(2, "features")] + ([] if field else [(20, "adjacency")])
    assert task.placed.dense_operands() == [] and task.config.model.dropout == 0.5
    before = [r.loss for r in dense.runs[0].rows]
    after = [r.loss for r in fell.runs[0].rows]
    assert before[:2] == after[:2]  # bitwise before the first switch
    np.testing.assert_allclose(after, before, rtol=1e-5)
    assert abs(after[-1] - before[-1]) < 1e-5  # the last epoch, 38 epochs after the switch
    assert task.features.dense_stream


def test_a_sparse_operand_from_the_start_keeps_its_cheap_mask():
    """Only a fallen-back operand draws the dense-shaped mask: the generator advances by the
    stored entries' mask for an ordinary sparse operand, by N·F bits for a fallen-back one."""
    from mgsparse.nn.stack import dropout

    A = SparseTensor.from_dense(np.eye(64, dtype=np.float32) * 3.0)
    ordinary, fallen = np.random.default_rng(1), np.random.default_rng(1)
    dropout(A, 0.5, True, ordinary)
    A.dense_stream = True
    out = dropout(A, 0.5, True, fallen)
    dense = Tensor(np.eye(64, dtype=np.float32) * 3.0).dropout(0.5, True,
                                                               np.random.default_rng(1))
    np.testing.assert_array_equal(out.to_scipy("csr").toarray(), dense.data)
    assert ordinary.bytes(8) == np.random.default_rng(1).bytes(8 + 8)[8:]  # 64 bits drawn
    reference = np.random.default_rng(1)
    reference.bytes(64 * 64 // 8)  # the dense mask's bits
    assert fallen.bytes(8) == reference.bytes(8)


def test_over_the_budget_with_nothing_dense_left_the_run_stops_keeping_its_best(monkeypatch):
    _, result, order = fit_with_peaks(monkeypatch, [0.9, 0.9, 1.5])  # sparse, sparse, over
    (run,) = result.runs
    assert [e["operand"] for e in run.events] == [*order, None]
    assert run.status == "over_budget" and len(run.rows) == 40 and run.state
    assert result.failed and result.summary().status == "over_budget"


def test_the_auto_budget_is_computed_once_and_held_for_the_whole_run(monkeypatch):
    """Placement and the traced epochs see one budget: the memory available when the task was
    made, not a second reading taken after the data was loaded."""
    readings = iter([3000 * MB, 10 * MB])  # a second reading would be a far smaller budget
    calls = []
    monkeypatch.setattr(budget_module, "available_memory_bytes",
                        lambda: calls.append(1) or next(readings))
    config = make_config(monitor={"memory_budget_mb": "auto", "memory": True, "log_every": 1},
                         train={"epochs": 4})
    task = make_task(config)
    assert task.memory_budget() == 1500 * MB
    result = fit(config, task)
    assert len(calls) == 1 and result.runs[0].events == []  # 80% of 1,500 MB never reached
