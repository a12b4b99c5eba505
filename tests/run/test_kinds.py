"""`make_task`: the one place that decides the kind of run a config asks for."""

from __future__ import annotations

from mgsparse.run import GraphTask, make_task
from mgsparse.run.tasks.points import PointTask
from mgsparse.sparse import SparseTensor
from tests.conftest import make_config, moons_config


def test_make_task_picks_a_point_task_for_moons():
    task = make_task(moons_config())
    assert isinstance(task, PointTask) and not isinstance(task, GraphTask)
    assert task.name == "moons" and task.head.num_classes == 2


def test_make_task_picks_a_graph_task_for_karate():
    task = make_task(make_config())
    assert isinstance(task, GraphTask) and task.name == "karate"
    assert (task.num_nodes, task.num_features, task.num_classes) == (34, 34, 2)
    assert task.train_idx.tolist() == [0, 33]  # the two leaders


def test_make_task_picks_a_graph_task_for_cora(mirror_env):
    task = make_task(make_config("cora"))
    assert isinstance(task, GraphTask) and task.name == "cora"
    assert (task.num_nodes, task.num_features, task.num_classes) == (2708, 1433, 7)
    assert [len(task.train_idx), len(task.val_idx), len(task.test_idx)] == [140, 500, 1000]
    assert isinstance(task.operand, SparseTensor)  # Â of Cora is 0.18% dense
    assert task.operand.nnz == 10556 + 2708  # directed edges + self loops


def test_make_task_names_no_budget_events_when_everything_fits():
    task = make_task(make_config(monitor={"memory_budget_mb": None}))
    assert task.budget_events == ()
    assert task.placement["adjacency"].startswith("dense")  # karate's Â: 16% dense
