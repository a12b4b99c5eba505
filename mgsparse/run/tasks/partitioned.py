"""Full-graph training over MPI: one part of a partitioned graph per rank (`DistributedGraphTask`).

Every rank runs this task in the same loop as a single process: its batch is its own rows'
share of the global masked loss, `reduce_gradients` sums the gradients and loss shares over
the ranks between backward and clipping, and `evaluate` reduces the counts, so every rank
takes the same step, holds the same parameters and sees the same figures (early stopping
and divergence take the same branch everywhere). Dropout masks are keyed by global node id
(`model.keyed_dropout` forced on), so K ranks draw the masks of one process that sets it.
The memory budget's fallback is off (no budget; the placed part is held as loaded): it would
change one rank's operands and not another's.

What partitioned training cannot honour is refused, not dropped (`check_partitioned`): a
model other than GCN, learned edge weights, `train.batch_size`, `train.receptive_field: true`.
Every rank makes the task together: each checks the config and its part, then the ranks agree
(`Comm.agree`), so a bad config or a damaged part is one line from rank 0 and the same exit
code on every rank (2 for usage, 1 for damaged data), never a hang or an abort.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.distributed.comm import Comm
from mgsparse.distributed.train import (
    allreduce_grads,
    check_across_ranks,
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


def check_partitioned_model(config: Config) -> None:
    """Partitioned training runs a GCN on fixed Â rows: refuse any other model, one line."""
    m = config.model
    if m.kind != "gcn":  # APPNP, SGC, GCNII read Â too, but K hops of it: not one part's rows
        raise ConfigError(f"{config.source}: partitioned training runs GCN only "
                          f"(model.kind: gcn), not model.kind {m.kind!r}")
    if m.learn_edge_weight:
        raise ConfigError(f"{config.source}: model.learn_edge_weight: true rebuilds the whole "
                          f"graph's Â every step; partitioned training keeps each part's rows "
                          f"of Â fixed (set learn_edge_weight: false)")
    if m.norm == "batch":
        raise ConfigError(f"{config.source}: model.norm: batch would normalise each rank's rows "
                          f"with that rank's own statistics, not the whole graph's (use "
                          f"model.norm: layer, which reads each row alone, or none)")


def check_partitioned(config: Config) -> None:
    """Every setting a partitioned run would otherwise drop silently is refused, one line."""
    check_partitioned_model(config)
    t = config.train
    if t.batch_size is not None:
        raise ConfigError(f"{config.source}: train.batch_size: {t.batch_size} samples "
                          f"mini-batches; partitioned training takes a full-graph step per "
                          f"epoch (set batch_size: null)")
    if t.checkpoint_every is not None:
        raise ConfigError(f"{config.source}: train.checkpoint_every: {t.checkpoint_every} "
                          f"writes full checkpoints of one process's run; a partitioned run "
                          f"keeps only its best parameters (set checkpoint_every: null)")
    if t.receptive_field is True:
        raise ConfigError(f"{config.source}: train.receptive_field: true cannot apply: "
                          f"partitioned training computes every row each rank owns (use auto "
                          f"or false)")
    if config.dataset.reorder != "none":
        raise ConfigError(f"{config.source}: dataset.reorder: {config.dataset.reorder} cannot "
                          f"apply: a partitioned run numbers each rank's nodes by its part "
                          f"(set reorder: none)")


def _attempt(step: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return step(), None
    except Exception as e:  # noqa: BLE001 (every rank's error goes to Comm.agree)
        return None, e


class DistributedGraphTask(Task):
    def __init__(self, config: Config, partitions: str | Path, comm: Comm):
        """A collective: every rank checks the config and loads its part, the ranks agree,
        then check what only all of them can (`check_across_ranks`) and agree again."""
        def load() -> Any:
            check_partitioned(config)
            return load_problem(partitions, comm, config)

        problem, error = _attempt(load)
        comm.agree(error)
        comm.agree(_attempt(lambda: check_across_ranks(problem, partitions))[1])
        self.config, self.comm, self.problem = config, comm, problem
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


class PartitionedRun:
    """This rank's share of `mpiexec -n K mgsparse train CONFIG --partitions DIR`.

    Entering it installs the signal handlers (Ctrl-C/SIGTERM on any rank ends every rank
    after the same epoch) and makes the task on every rank together: a refused config or a
    damaged part raises `JobError` on every rank, with one line on rank 0. `fit` runs the one
    loop; an error on one rank there (`report`ed) aborts the whole job rather than leaving the
    others to wait. Every rank ends with the same result and `signum`; the CLI gives its
    callbacks (the live table, the writes) to rank 0 only."""

    def __init__(self, config: Config, partitions: str | Path, timeout: float | None = None):
        from mgsparse.distributed.comm import DEFAULT_TIMEOUT, StopSignals

        self.config, self.partitions = config, partitions
        self.comm = Comm(timeout=timeout or DEFAULT_TIMEOUT)
        self.rank, self.stop = self.comm.rank, StopSignals(self.comm)

    def __enter__(self) -> PartitionedRun:
        set_num_threads(self.config.sparse.threads)
        self.stop.__enter__()
        try:
            self.task = DistributedGraphTask(self.config, self.partitions, self.comm)
        except BaseException:
            self.stop.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.__exit__()

    @property
    def signum(self) -> int | None:
        """The signal that stopped the run (the same on every rank), or None."""
        return self.stop.signum

    def fit(self, on_epoch: Any = None, on_run_end: Any = None, report: Any = None) -> Any:
        from mgsparse.distributed.comm import abort_on_error
        from mgsparse.run.loop import fit

        with abort_on_error(self.comm, report):
            return fit(self.config, self.task, on_epoch, on_run_end,
                       should_stop=self.stop.should_stop)


def partition(config: Config, parts: int, out: str | Path, method: str = "metis",
              progress: Any = None) -> dict:
    """`mgsparse partition`: the config's graph, with Â exactly as training builds it, split
    into `parts` folders under `out` (one per rank); returns the written manifest."""
    from mgsparse.distributed.train import partition_graph
    from mgsparse.run.placed import load_graph

    if parts < 1:
        raise ConfigError(f"--parts must be >= 1, got {parts}")
    check_partitioned_model(config)
    return partition_graph(config, load_graph(config.dataset, progress), parts, out, method)
