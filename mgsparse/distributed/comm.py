"""The few MPI collectives distributed training needs, each bounded by a deadline.

A blocking collective waits forever for a rank that died or hangs. Every call here is the
nonblocking form (`Ialltoallv`, `Iallreduce`) polled against a deadline: past it, the rank
raises `DistributedError` naming the collective, and the caller aborts the job
(`abort_on_error`), which ends every other rank too. mpi4py is imported lazily (it is in
the checkout's optional `[distributed]` extra).

Errors are reported once. Before training, every rank runs the same checks (the config, its
part's files) and then `Comm.agree`s: if any rank failed, every rank raises `JobError` with the
worst exit code (2 for a usage error anywhere) and only rank 0 prints, the first failing
rank's line; the job then ends cleanly, with no abort to race the launcher's forwarding of
stderr. An error during training ends the job by `MPI_Abort`, after the failing rank's line
is flushed and given a moment to reach the launcher.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mgsparse.errors import DistributedError, MgsparseError

DEFAULT_TIMEOUT = 120.0  # seconds a collective may wait for the slowest rank
ABORT_GRACE = 0.5  # seconds a failing rank's flushed error line gets to reach mpiexec
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def launcher_rank() -> int:
    """This process's rank as the launcher (mpiexec, srun) set it in the environment, read
    before MPI starts (0 outside a launcher): errors found before then print on rank 0 only."""
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


class JobError(DistributedError):
    """A failure every rank agreed on (`Comm.agree`): ``exit_code`` is the worst of them, and
    only rank 0's instance carries the line to print."""

    def __init__(self, message: str, exit_code: int, rank: int):
        super().__init__(message)
        self.exit_code, self.rank = exit_code, rank


def quiet_rank(error: BaseException) -> bool:
    """True on the ranks that leave an error for rank 0 to print."""
    return (error.rank if isinstance(error, JobError) else launcher_rank()) != 0


def one_line(error: BaseException, rank: int) -> str:
    """An error as the one line the CLI prints; an unexpected exception names its rank."""
    text = str(error).splitlines()[0] if str(error) else ""
    if isinstance(error, MgsparseError):
        return text or type(error).__name__
    return f"rank {rank}: {type(error).__name__}: {text}".rstrip(": ")


def mpi() -> Any:
    """The mpi4py.MPI module, or a DistributedError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise DistributedError("distributed training needs mpi4py: "
                               "pip install mpi4py mpich (or pip install -e '.[distributed]' in "
                               "the mgsparse checkout)") from None
    return MPI


class Comm:
    """A communicator whose collectives give up after `timeout` seconds."""

    def __init__(self, comm: Any = None, timeout: float = DEFAULT_TIMEOUT):
        self.comm = comm if comm is not None else mpi().COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.timeout = float(timeout)
        self.bytes_sent = 0  # by alltoallv, since construction

    def __repr__(self) -> str:
        return f"Comm(rank={self.rank}, size={self.size}, timeout={self.timeout:g}s)"

    def _wait(self, request: Any, what: str, timeout: float | None = None) -> None:
        timeout = self.timeout if timeout is None else timeout
        deadline, delay = time.monotonic() + timeout, 0.0
        while not request.Test():
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"rank {self.rank}/{self.size}: {what} had no answer from the other ranks "
                    f"within {timeout:g} s (a rank died or hangs)")
            time.sleep(delay)  # back off to 1 ms: a 2-core machine must not spin
            delay = min(2 * delay or 1e-5, 1e-3)

    def alltoallv(self, send: np.ndarray, send_counts: np.ndarray,
                  recv_counts: np.ndarray) -> np.ndarray:
        """Rows `send` grouped by destination (send_counts[q] rows to rank q) → the rows
        received, grouped by source (recv_counts[q] rows from rank q)."""
        width = int(np.prod(send.shape[1:], dtype=np.int64))
        send = np.ascontiguousarray(send)
        recv = np.empty((int(recv_counts.sum()),) + send.shape[1:], dtype=send.dtype)
        sc, rc = np.asarray(send_counts) * width, np.asarray(recv_counts) * width
        sd, rd = np.cumsum(sc) - sc, np.cumsum(rc) - rc
        request = self.comm.Ialltoallv([send, (sc.tolist(), sd.tolist())],
                                       [recv, (rc.tolist(), rd.tolist())])
        self._wait(request, "the halo exchange (Alltoallv)")
        self.bytes_sent += int((sc.sum() - sc[self.rank]) * send.itemsize)
        return recv

    def exchange_counts(self, counts: np.ndarray) -> np.ndarray:
        """(K,) integers, counts[q] meant for rank q → (K,), entry q the one rank q meant for
        this rank (Alltoall; not counted in `bytes_sent`, which is the training's traffic)."""
        send = np.ascontiguousarray(counts, dtype=np.int64)
        recv = np.empty_like(send)
        self._wait(self.comm.Ialltoall(send, recv), "Alltoall (the exchange counts)")
        return recv

    def allreduce(self, values: np.ndarray, op: str = "sum",
                  timeout: float | None = None) -> np.ndarray:
        """Elementwise sum (or max) over ranks, in float64: every rank gets the same array."""
        MPI = mpi()
        send = np.ascontiguousarray(values, dtype=np.float64)
        recv = np.empty_like(send)
        request = self.comm.Iallreduce(send, recv, MPI.SUM if op == "sum" else MPI.MAX)
        self._wait(request, f"Allreduce ({op})", timeout)
        return recv

    def agree(self, error: BaseException | None) -> None:
        """A collective after a step every rank takes (loading its part, checking it): if
        any rank's step failed, every rank raises `JobError` with the worst exit code, rank
        0's carrying the line of the lowest rank that failed with it. Ranks reach this at
        different times (each reads its own files), so it waits at least `DEFAULT_TIMEOUT`."""
        code = 0 if error is None else getattr(error, "exit_code", 1)
        worst = int(self.allreduce(np.array([code]), "max", max(self.timeout,
                                                                 DEFAULT_TIMEOUT))[0])
        if worst == 0:
            return
        line = one_line(error, self.rank) if error is not None else ""
        lines = self.comm.gather((code, line), root=0)  # every rank is here: no deadline
        message = next(m for c, m in lines if c == worst) if self.rank == 0 else ""
        raise JobError(message, worst, self.rank) from error

    def abort(self, code: int = 1) -> None:
        """End every rank of the job (MPI_Abort): the way out when a peer is gone."""
        self.comm.Abort(code)


@contextmanager
def abort_on_error(comm: Comm, report: Callable[[BaseException], None] | None = None
                   ) -> Iterator[None]:
    """Run a rank's work; on any exception, `report` it (the CLI prints one line) and abort
    the whole job, so the other ranks stop at once instead of waiting for their deadline.

    The line is flushed and given `ABORT_GRACE` before the abort: mpiexec tears down every
    process (and its pipes) at once, and an unforwarded line would be lost. A `JobError` is
    one all ranks agreed on: they all leave by themselves, nothing to abort."""
    try:
        yield
    except JobError:
        raise
    except BaseException as e:
        if comm.size == 1:
            raise
        if report is not None:
            report(e)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        time.sleep(ABORT_GRACE)
        comm.abort(1)
        raise


class StopSignals:
    """Ctrl-C / SIGTERM on any rank ends the run after the current epoch on all ranks.

    The handler only records the signal (SIGTERM outranks Ctrl-C); `should_stop()` (called by
    every rank once per epoch) takes the maximum over ranks, so all ranks leave the same
    epoch and agree on `signum`, which gives the exit code (130 or 143).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)  # in rank order: the later one wins

    def __init__(self, comm: Comm):
        self.comm, self.requested = comm, 0  # 0: none, else 1 + index in SIGNALS
        self.signum: int | None = None
        self._old: dict = {}

    def __enter__(self) -> StopSignals:
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = max(self.requested, 1 + self.SIGNALS.index(signum))

    def should_stop(self) -> bool:
        agreed = int(self.comm.allreduce(np.array([float(self.requested)]), op="max")[0])
        if agreed:
            self.signum = self.SIGNALS[agreed - 1]
        return agreed > 0
