"""Graph classification's task: batches built without a loop over graphs (checked against one),
stratified splits and folds fixed by the seed, a run per fold, the metrics and selection it
declares, and a step's memory that follows the batch, not the dataset."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from mgsparse.data.graph import undirected_edges
from mgsparse.data.graphset import GraphSet
from mgsparse.errors import ConfigError
from mgsparse.run import fit
from mgsparse.run.task import selecting, shuffle_generator
from mgsparse.run.tasks.graphs import (
    GraphClassificationTask,
    graph_batch,
    held_out,
    stratified_folds,
)
from tests.conftest import make_config


def toy_graphs(num_graphs: int, seed: int = 0, size: int | None = None) -> GraphSet:
    """Paths (class 0) and cycles (class 1) of 4 to 9 nodes, alternating; features (1, deg/2)
    (a mean of constant features could not tell them apart: GraphSAGE's aggregator); `size`:
    every graph that many nodes."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(4, 10, num_graphs) if size is None else np.full(num_graphs, size)
    y = np.arange(num_graphs) % 2
    node_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    src = np.arange(node_ptr[-1])
    last = np.isin(src, node_ptr[1:] - 1)
    dst = np.where(last, np.repeat(node_ptr[:-1], sizes), src + 1)  # the last node: back to 0
    keep = ~last | np.repeat(y == 1, sizes)  # only cycles close
    edge_index = undirected_edges(src[keep], dst[keep], int(node_ptr[-1]))
    edge_ptr = np.searchsorted(edge_index[0], node_ptr).astype(np.int64)
    degree = np.bincount(edge_index[1], minlength=int(node_ptr[-1]))
    x = np.stack([np.ones(len(degree)), degree / 2], axis=1).astype(np.float32)
    return GraphSet(x=x, edge_index=edge_index, node_ptr=node_ptr, edge_ptr=edge_ptr,
                    y=y.astype(np.int64), num_classes=2, name="toy")


def graph_config(**train):
    return make_config("mutag", model={"kind": "gin", "layers": 2, "hidden": 8},
                       train={"batch_size": 4, "epochs": 2, **train})


def test_a_batch_matches_a_loop_over_its_graphs():
    gs = toy_graphs(7)
    idx = np.array([5, 2, 6, 2])
    b = graph_batch(gs, idx)
    start, edges, owner = 0, [], []
    for pos, g in enumerate(idx):  # the oracle: graph by graph, ids shifted
        lo, hi = gs.node_ptr[g], gs.node_ptr[g + 1]
        edges.append(gs.edge_index[:, gs.edge_ptr[g]:gs.edge_ptr[g + 1]] - lo + start)
        owner += [pos] * int(hi - lo)
        start += hi - lo
    np.testing.assert_array_equal(b.edge_index, np.concatenate(edges, axis=1))
    np.testing.assert_array_equal(b.segments.batch, owner)
    assert b.y.tolist() == gs.y[idx].tolist() and b.num_graphs == 4


def test_folds_are_stratified_and_fixed_by_the_seed():
    y = np.repeat([0, 1, 2], [23, 40, 11])
    folds = stratified_folds(y, 5, seed=3)
    for c, n in ((0, 23), (1, 40), (2, 11)):
        per_fold = np.bincount(folds[y == c], minlength=5)
        assert per_fold.min() >= n // 5 and per_fold.max() <= -(-n // 5)
    assert np.array_equal(folds, stratified_folds(y, 5, seed=3))
    assert not np.array_equal(folds, stratified_folds(y, 5, seed=4))


# MUTAG's classes (63 / 125 graphs) and NCI1's (2,053 / 2,057)
CLASS_COUNTS = {"MUTAG": (63, 125), "NCI1": (2053, 2057)}


@pytest.mark.parametrize("name", sorted(CLASS_COUNTS))
def test_fold_sizes_differ_by_one_at_most_as_stratified_k_fold_keeps_them(name):
    """Dealing each class afresh from fold 0 gave MUTAG's ten test folds 18–20 graphs and
    NCI1's 410–412; StratifiedKFold's deal keeps them within one (18–19, 411)."""
    y = np.repeat(np.arange(2), CLASS_COUNTS[name])
    for seed in range(3):
        sizes = np.bincount(stratified_folds(y, 10, seed), minlength=10)
        assert sizes.max() - sizes.min() <= 1 and sizes.sum() == len(y)
        for c, n in enumerate(CLASS_COUNTS[name]):
            per_fold = np.bincount(stratified_folds(y, 10, seed)[y == c], minlength=10)
            assert per_fold.min() == n // 10 and per_fold.max() == -(-n // 10)


@pytest.mark.parametrize("counts", [(63, 125), (2053, 2057), (23, 40, 11), (7, 5, 9, 3)])
def test_fold_sizes_are_scikit_learns(counts):
    """The folds' sizes are those of scikit-learn's StratifiedKFold (skipped without it)."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    y = np.repeat(np.arange(len(counts)), counts)
    k = min(min(counts), 10)
    theirs = model_selection.StratifiedKFold(k, shuffle=True, random_state=0).split(y, y)
    expect = sorted(len(test) for _, test in theirs)
    assert sorted(np.bincount(stratified_folds(y, k, 0), minlength=k)) == expect


def test_held_out_takes_a_tenth_of_each_class():
    y = np.repeat([0, 1], [50, 30])
    kept, held = held_out(y, np.arange(80), 0.1, np.random.default_rng(0))
    assert np.bincount(y[held]).tolist() == [5, 3]
    assert sorted(np.concatenate([kept, held]).tolist()) == list(range(80))


def test_each_run_is_a_fold_with_its_own_validation_part():
    gs = toy_graphs(60)
    task = GraphClassificationTask(graph_config(folds=5), gs)
    assert task.num_runs() == 5
    tests = []
    for i in range(5):
        task.begin_run(i)
        parts = task.train_idx, task.val_idx, task.test_idx
        assert sum(map(len, parts)) == 60 and len(np.unique(np.concatenate(parts))) == 60
        assert len(task.test_idx) == 12 and len(task.val_idx) == 4  # round(0.1 · 24) per class
        tests.append(task.test_idx)
    assert sorted(np.concatenate(tests).tolist()) == list(range(60))  # each graph tested once


def test_without_folds_one_stratified_80_10_10_split():
    task = GraphClassificationTask(graph_config(), toy_graphs(100))
    assert (len(task.train_idx), len(task.val_idx), len(task.test_idx)) == (80, 10, 10)
    assert task.num_runs() == 1
    assert np.bincount(task.y[task.test_idx]).tolist() == [5, 5]


def test_folds_beyond_the_smallest_class_is_a_config_error():
    with pytest.raises(ConfigError, match=r"train.folds 31 .* smallest class .* \(30 graphs\)"):
        GraphClassificationTask(graph_config(folds=31), toy_graphs(60))


def test_the_loop_trains_one_run_per_fold_and_reports_each():
    task = GraphClassificationTask(graph_config(folds=3, epochs=3), toy_graphs(30))
    result = fit(task.config, task)
    assert [r.seed for r in result.runs] == [0, 1, 2]
    summary = result.summary().as_dict()
    assert len(summary["folds"]["test_acc"]) == 3
    assert summary["test_acc_mean"] == pytest.approx(np.mean(summary["folds"]["test_acc"]))
    assert task.metrics.select == "val_acc"


def test_train_select_switches_the_selection_column():
    task = GraphClassificationTask(graph_config(), toy_graphs(20))
    task.metrics = selecting(task.metrics, "loss")
    assert task.metrics.select == "val_loss" and type(task).metrics.select == "val_acc"
    assert task.metrics.tie_break == "val_loss"


def _step_peak(task: GraphClassificationTask) -> int:
    model = task.build_model(np.random.default_rng(0))
    batch = next(iter(task.batches(model, shuffle_generator(0))))
    batch()[0].backward()  # warm: operands, caches, lazily built views
    step = next(iter(task.batches(model, shuffle_generator(0))))  # the epoch's order: O(G)
    tracemalloc.start()
    try:
        loss, _ = step()  # builds the batch, forward
        loss.backward()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_steps_memory_follows_the_batch_not_the_dataset():
    """3,000 graphs (the arrays ~1 MB) against 6,000, 16 per step: the step's traced peak
    (~0.2 MB) moves by less than 10%. Graphs of one size, so both batches are alike."""
    gs = toy_graphs(3000, seed=2, size=7)
    doubled = gs.subset(np.concatenate([np.arange(3000), np.arange(3000)]))
    config = graph_config(batch_size=16)
    small = _step_peak(GraphClassificationTask(config, gs))
    large = _step_peak(GraphClassificationTask(config, doubled))
    assert abs(large - small) < 0.1 * small, (small, large)
