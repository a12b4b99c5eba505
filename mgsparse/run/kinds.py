"""The kinds of run, and the one place that chooses between them for a config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mgsparse.catalog import is_points
from mgsparse.config import Config
from mgsparse.run.budget import budget_bytes, fit_within_budget
from mgsparse.run.graph_task import GraphTask, load_graph
from mgsparse.run.points import PointTask
from mgsparse.run.task import Progress, Task
from mgsparse.sparse import set_num_threads


def make_task(config: Config, progress: Progress | None = None,
              partitions: str | Path | None = None, comm: Any = None) -> Task:
    """The task `config` asks for, its operands placed within the memory budget: point clouds
    train an MLP on mini-batches, graphs train full-batch on the whole graph, or one part of
    it per MPI rank when `partitions` names the folder `mgsparse partition` wrote."""
    set_num_threads(config.sparse.threads)  # kernels' pool; BLAS kept to one thread
    if partitions is not None:
        from mgsparse.run.distributed_task import DistributedGraphTask  # needs mpi4py

        return DistributedGraphTask(config, partitions, comm)
    budget = budget_bytes(config.monitor)
    if is_points(config.dataset.name):
        task: Task = PointTask(config)
    elif config.train.batch_size is not None:  # a graph model on sampled mini-batches
        from mgsparse.run.sampled_task import SampledGraphTask

        task = SampledGraphTask(config, load_graph(config.dataset, progress), budget=budget)
    else:
        task = GraphTask(config, load_graph(config.dataset, progress), budget=budget)
    task.budget_events = tuple(fit_within_budget(task, config, budget))
    return task
