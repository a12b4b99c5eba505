"""Full-graph training over MPI: one part of a partitioned graph per rank (`DistributedGraphTask`).

Every rank runs this task in the same loop as a single process: its batch is its own rows'
share of the global masked loss, `reduce_gradients` sums the gradients and loss shares over
the ranks between backward and clipping, and `evaluate` reduces the counts, so every rank
takes the same step, holds the same parameters and sees the same figures (early stopping
and divergence take the same branch everywhere). Dropout masks are keyed by global node id
(`model.keyed_dropout` forced on), so K ranks draw the masks of one process that sets it.
The memory budget's fallback is off (no budget; the placed part is held as loaded): it would
change one rank's operands and not another's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.catalog import MODELS
from mgsparse.config import Config
from mgsparse.distributed.comm import Comm
from mgsparse.distributed.train import (
    allreduce_grads,
    evaluate,
    load_problem,
    logits,
    masked_loss_sum,
)
from mgsparse.errors import ConfigError
from mgsparse.nn.module import Module
from mgsparse.run.build import build_model
from mgsparse.run.monitor import nnz_ratio
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.task import Batch, Scores, Task
from mgsparse.sparse import set_num_threads


class DistributedGraphTask(Task):
    def __init__(self, config: Config, partitions: str | Path, comm: Comm):
        m = config.model
        if MODELS[m.kind].operand != "norm_adj" or m.learn_edge_weight:  # a GCN
            raise ConfigError(f"partitioned training runs a model on Â without learned edge "
                              f"weights (a GCN), not model.kind {m.kind!r}")
        self.config, self.comm = config, comm
        self.problem = load_problem(partitions, comm, config.sparse.sparsity_threshold)
        self.name = config.dataset.name
        self.num_classes = self.problem.num_classes
        p = self.problem
        self.placed = PlacedGraph.held(
            p.features, p.norm_adj.local,
            {"features": f"rank {comm.rank} of {comm.size}: its part's rows",
             "adjacency": "its rows of Â, halo rows exchanged every layer"},
            {"features": nnz_ratio(p.features), "adjacency": nnz_ratio(p.norm_adj.local)})

    def build_model(self, rng: np.random.Generator) -> Module:
        p = self.problem
        model = build_model(self.config.model, p.num_features, p.num_classes, rng)
        model.keyed_masks = True  # masks by global node id: the same for any number of ranks
        return model

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        p = self.problem
        yield lambda: (masked_loss_sum(logits(p, model), p.y, p.masks["train"],
                                       p.totals["train"]), 1)

    def reduce_gradients(self, params: list, loss: float) -> float:
        return allreduce_grads(self.comm, params, loss)

    def evaluate(self, model: Module) -> Scores:
        return self.metrics.scores(**evaluate(self.problem, model))


def fit_partitioned(config: Config, partitions: str | Path, on_epoch: Any = None,
                    on_run_end: Any = None, report: Any = None,
                    timeout: float | None = None) -> tuple[Any, int]:
    """This rank's share of `mpiexec -n K mgsparse train CONFIG --partitions DIR`: the one
    loop over a `DistributedGraphTask`, Ctrl-C/SIGTERM on any rank ending every rank after
    the same epoch, an error on any rank (`report`ed) aborting the whole job rather than
    leaving the others to wait. Only rank 0 gets the callbacks (the live table, the writes).
    Returns (the result, identical on every rank; this rank's number)."""
    from mgsparse.distributed.comm import DEFAULT_TIMEOUT, StopSignals, abort_on_error
    from mgsparse.run.loop import fit

    comm = Comm(timeout=timeout or DEFAULT_TIMEOUT)
    set_num_threads(config.sparse.threads)
    root = comm.rank == 0
    with abort_on_error(comm, report), StopSignals(comm) as stop:
        task = DistributedGraphTask(config, partitions, comm)
        result = fit(config, task, on_epoch if root else None, on_run_end if root else None,
                     should_stop=stop.should_stop)
    return result, comm.rank


def partition(config: Config, parts: int, out: str | Path, method: str = "metis",
              progress: Any = None) -> dict:
    """`mgsparse partition`: the config's graph, with Â exactly as training builds it, split
    into `parts` folders under `out` (one per rank); returns the written manifest."""
    from mgsparse.distributed.train import partition_graph
    from mgsparse.run.placed import load_graph

    if parts < 1:
        raise ConfigError(f"--parts must be >= 1, got {parts}")
    return partition_graph(config, load_graph(config.dataset, progress), parts, out, method)
