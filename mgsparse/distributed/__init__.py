"""Partitioned full-graph training over MPI (the checkout's optional `[distributed]` extra).

comm.py: deadline-bounded collectives, abort and stop signals; halo.py: the halo exchange
op and the local Â operand; train.py: one rank's loss share, gradient sum and evaluation (run by
`mgsparse.run.tasks.partitioned` in the one loop). Sits beside the
run layer: it imports engine, sparse, nn, optim and data, and mpi4py only when used.
"""

from mgsparse.distributed.comm import Comm, JobError, StopSignals, abort_on_error
from mgsparse.distributed.halo import HaloAdjacency, HaloExchange, HaloPlan
from mgsparse.distributed.train import (
    PartProblem,
    allreduce_grads,
    evaluate,
    load_problem,
    partition_graph,
)

__all__ = ["Comm", "HaloAdjacency", "HaloExchange", "HaloPlan", "JobError", "PartProblem",
           "StopSignals", "abort_on_error", "allreduce_grads", "evaluate", "load_problem",
           "partition_graph"]
