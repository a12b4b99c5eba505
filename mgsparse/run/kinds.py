"""The kinds of run (`mgsparse.run.tasks`), and the one place that chooses between them."""

from __future__ import annotations

from mgsparse.catalog import is_graphset, is_molecules, is_points, is_triples
from mgsparse.config import Config
from mgsparse.data import Graph
from mgsparse.data.progress import announce
from mgsparse.errors import ConfigError
from mgsparse.run.budget import budget_bytes, fit_within_budget
from mgsparse.run.placed import load_graph
from mgsparse.run.task import Progress, Task, selecting
from mgsparse.run.tasks.graphs import GraphClassificationTask
from mgsparse.run.tasks.kg import KgTask, load_triples
from mgsparse.run.tasks.links import LinkTask, load_link_graph
from mgsparse.run.tasks.nodes import GraphTask
from mgsparse.run.tasks.points import PointTask
from mgsparse.run.tasks.regression import molecule_task
from mgsparse.run.tasks.sampled import SampledGraphTask
from mgsparse.sparse import set_num_threads


def make_task(config: Config, progress: Progress | None = None) -> Task:
    """The task `config` asks for, its operands placed within the memory budget: point clouds
    train an MLP on mini-batches, `task: link` predicts held-out edges of a graph (full
    batch), node labels of graphs train on the whole graph (or the receptive fields of
    the rows they read), or on sampled mini-batches with `train.batch_size`. A partitioned run
    over MPI makes its own task on each rank (`tasks.partitioned.fit_partitioned`).

    The budget is computed here once ("auto" reads the memory available now) and is the one
    both the placement before training and the 80% rule during it hold the run to."""
    set_num_threads(config.sparse.threads)  # kernels' pool; BLAS kept to one thread
    budget = budget_bytes(config.monitor)
    if is_points(config.dataset.name):
        if config.train.metrics:
            raise ConfigError(f"train.metrics {list(config.train.metrics)}: macro-F1 and AUC "
                              "are node classification's; a point cloud scores accuracy")
        task: Task = PointTask(config)
    elif is_triples(config.dataset.name):  # knowledge-graph completion: ranked triples
        task = KgTask(config, load_triples(config, progress))
    elif config.task == "link":  # held-out edges of one graph, full batch
        task = LinkTask(config, _placing(load_link_graph(config.dataset, progress), progress),
                        budget=budget)
    else:
        graph = load_graph(config.dataset, progress)
        kind = (molecule_task if is_molecules(config.dataset.name)  # a target per molecule
                else GraphClassificationTask if is_graphset(config.dataset.name)  # graph labels
                else SampledGraphTask if config.train.batch_size is not None  # sampled batches
                else GraphTask)
        task = kind(config, _placing(graph, progress), budget=budget)
    task.metrics = selecting(task.metrics, config.train.select)
    task.budget = budget
    task.budget_events = tuple(fit_within_budget(task, config, budget))
    return task


def _placing(graph, progress: Progress | None):
    """`graph`, once `progress` has heard that placing it begins (`mgsparse.data.progress`):
    the operands, receptive fields and samplers of a large graph take seconds to build."""
    size = (f"{graph.num_nodes:,} nodes, {graph.edge_index.shape[1]:,} edges"
            if isinstance(graph, Graph) else f"{len(graph):,} graphs")
    announce(progress, "placing", f"the operands of {size}")
    return graph

