"""The few MPI collectives distributed training needs, each bounded by a deadline.

A blocking collective waits forever for a rank that died or hangs. Every call here is the
nonblocking form (`Ialltoallv`, `Iallreduce`) polled against a deadline: past it, the rank
raises `DistributedError` naming the collective, and the caller aborts the job
(`abort_on_error`), which ends every other rank too. mpi4py is imported lazily (it is the
optional extra `mgsparse[distributed]`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mgsparse.errors import DistributedError

DEFAULT_TIMEOUT = 120.0  # seconds a collective may wait for the slowest rank


def mpi() -> Any:
    """The mpi4py.MPI module, or a DistributedError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise DistributedError("distributed training needs mpi4py: "
                               "pip install 'mgsparse[distributed]'") from None
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

    def _wait(self, request: Any, what: str) -> None:
        deadline, delay = time.monotonic() + self.timeout, 0.0
        while not request.Test():
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"rank {self.rank}/{self.size}: {what} had no answer from the other ranks "
                    f"within {self.timeout:g} s (a rank died or hangs)")
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

    def allreduce(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """Elementwise sum (or max) over ranks, in float64: every rank gets the same array."""
        MPI = mpi()
        send = np.ascontiguousarray(values, dtype=np.float64)
        recv = np.empty_like(send)
        request = self.comm.Iallreduce(send, recv, MPI.SUM if op == "sum" else MPI.MAX)
        self._wait(request, f"Allreduce ({op})")
        return recv

    def abort(self, code: int = 1) -> None:
        """End every rank of the job (MPI_Abort): the way out when a peer is gone."""
        self.comm.Abort(code)


@contextmanager
def abort_on_error(comm: Comm, report: Callable[[BaseException], None] | None = None
                   ) -> Iterator[None]:
    """Run a rank's work; on any exception, `report` it (the CLI prints one line) and abort
    the whole job, so the other ranks stop at once instead of waiting for their deadline."""
    try:
        yield
    except BaseException as e:
        if comm.size == 1:
            raise
        if report is not None:
            report(e)
        comm.abort(1)
        raise


class StopSignals:
    """Ctrl-C / SIGTERM on any rank ends the run after the current epoch on all ranks.

    The handler only sets a flag; `should_stop()` (called by every rank once per epoch)
    takes the maximum of the flags over ranks, so all ranks leave the same epoch.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, comm: Comm):
        self.comm, self.requested = comm, False
        self._old: dict = {}

    def __enter__(self) -> StopSignals:
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def should_stop(self) -> bool:
        return bool(self.comm.allreduce(np.array([float(self.requested)]), op="max")[0] > 0)
