"""How many cores the kernels use: one thread pool, fixed work blocks, one BLAS thread a block.

numpy's matmul and scipy's sparse kernels release the GIL, so plain Python threads run them
on every core. The work is cut into blocks whose bounds depend on the problem only (rows,
nnz), never on the thread count; threads merely choose which blocks to run. Each output row
is computed inside one block in one fixed order, and partial sums over blocks are added in
block order, so a result is bitwise the same for 1 thread or 16.

The setting: `set_num_threads(n)` (the run layer calls it with the config's
`sparse.threads`), else the environment variable ``MGSPARSE_NUM_THREADS``, else the cores
this process may run on (``os.sched_getaffinity``). While mgsparse computes, OpenBLAS is
held to one thread a call, and given back its own count after (`blas.one_thread`): n BLAS
calls side by side on k threads each would put n·k threads on n cores.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mgsparse.errors import HyperparameterError
from mgsparse.kernels import modes, tuning
from mgsparse.kernels.blas import one_thread

ENV_VAR = "MGSPARSE_NUM_THREADS"


class _State:
    threads: int | None = None
    pool: ThreadPoolExecutor | None = None


def _forget_pool_in_child() -> None:
    """A forked child inherits the pool object but none of its threads: work handed to it
    would wait forever. The child builds its own pool on first use instead."""
    _State.pool, _State.threads = None, None


os.register_at_fork(after_in_child=_forget_pool_in_child)


# ---------------------------------------------------------------- the setting


def default_num_threads() -> int:
    """``MGSPARSE_NUM_THREADS`` if set, else the number of cores this process may use."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if raw:
        return _check_threads(raw, ENV_VAR)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


def _check_threads(n: Any, name: str) -> int:
    try:
        value = int(str(n).strip())
    except ValueError:
        value = 0
    if value < 1 or isinstance(n, bool):
        raise HyperparameterError(f"{name} must be a whole number >= 1, got {n!r}")
    return value


def set_num_threads(n: int | None) -> int:
    """Run kernels on `n` threads (None: the default above); the process's BLAS setting is
    left alone (mgsparse holds BLAS to one thread only while it computes: `blas.one_thread`).

    Returns the number now in force. Results do not depend on it (see the module docstring).
    """
    n = default_num_threads() if n is None else _check_threads(n, "threads")
    if n != _State.threads:
        if _State.pool is not None:
            _State.pool.shutdown(wait=True)
        # n - 1 helpers: the calling thread works the blocks beside them (`run_blocks`)
        _State.pool = ThreadPoolExecutor(n - 1, thread_name_prefix="mgsparse") if n > 1 else None
        _State.threads = n
    return n


def get_num_threads() -> int:
    if _State.threads is None:
        set_num_threads(None)
    return _State.threads


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[int]:
    """`set_num_threads(n)` inside the block, the previous setting after it."""
    previous = _State.threads
    try:
        yield set_num_threads(n)
    finally:
        set_num_threads(previous)


# ---------------------------------------------------------------- blocks and the pool


def row_blocks(num_rows: int, min_rows: int | None = None) -> list[tuple[int, int]]:
    """Row ranges [start, stop) covering `num_rows`, about equal: one per `min_rows` rows
    (rounded up), an even count where there are several, at most tuning.MAX_BLOCKS.

    Depends on the size only, so every thread count cuts the work the same way. Equal and
    even so that two threads take equal shares: 9,700 rows were cut 4,096 + 4,096 + 1,508,
    one thread's share half again the other's (a sampled batch's weight gradient at two
    threads: 0.82–0.91 ms, 0.76 in four blocks of 2,425). One block under `kernels.reference()`.
    """
    if num_rows <= 0 or modes.State.reference:
        return [(0, max(num_rows, 0))]
    min_rows = tuning.MIN_BLOCK_ROWS if min_rows is None else min_rows
    count = min(tuning.MAX_BLOCKS, -(-num_rows // min_rows))
    count += count % 2 if count > 1 else 0
    size = -(-num_rows // count)
    return [(s, min(s + size, num_rows)) for s in range(0, num_rows, size)]


def _nnz_block_count(num_rows: int) -> int:
    """How many blocks `nnz_blocks` cuts `num_rows` rows into: the size's alone, so that
    `runs_as_one_call` can tell without the pattern."""
    return min(tuning.MAX_BLOCKS, max(num_rows // tuning.MIN_BLOCK_ROWS, 1))


def nnz_blocks(indptr: np.ndarray) -> list[tuple[int, int]]:
    """Row ranges of a CSR pattern holding about equal numbers of entries (a fixed cut)."""
    num_rows, nnz = len(indptr) - 1, int(indptr[-1])
    count = _nnz_block_count(num_rows)
    if count == 1 or nnz == 0:
        return [(0, num_rows)]
    cuts = np.searchsorted(indptr, np.linspace(0, nnz, count + 1)[1:-1]).tolist()
    bounds = sorted({0, *cuts, num_rows})
    return list(itertools.pairwise(bounds))


def runs_as_one_call(num_rows: int) -> bool:
    """Whether a product over `num_rows` output rows cut by `nnz_blocks` runs as one kernel
    call: on one thread, or with too few rows to cut (a bound on the size alone).

    A kernel that cannot be cut into blocks of output rows (one that scatters into them)
    may stand in for the blocked one exactly there: the pool would not have split the work."""
    return get_num_threads() == 1 or _nnz_block_count(num_rows) == 1


def run_blocks(fn: Callable[[int, int], Any], blocks: Sequence[tuple[int, int]],
               here: bool = False) -> list:
    """fn(start, stop) for every block, on the pool; results in block order. `here`: all on
    the calling thread (work too small for the hand-off), the same blocks in the same order.

    The calling thread and the pool's helpers take the next block from one shared counter
    until none is left: one hand-off per helper and op, not a future per block (~10 µs each,
    a thousand in an arxiv-sized epoch), and the caller works instead of waiting. A block
    that raises stops the others from starting new blocks; the first error is raised once
    every helper is done, so nothing still writes into the outputs. BLAS runs on one thread
    a block meanwhile, and at the caller's count again once every helper is done. Under
    `kernels.reference()` every block runs here, in order (`modes.counting` sees each cut)."""
    get_num_threads()
    if modes.COUNTS is not None and len(blocks) > 1:
        modes.count_caller()
    if (here or _State.pool is None or len(blocks) < 2 or modes.State.reference
            or getattr(_IN_BLOCK, "active", False)):
        return [fn(a, b) for a, b in blocks]  # a block's own blocks run where it runs
    if modes.COUNTS is not None:
        modes.count("pool threads")
    results: list = [None] * len(blocks)
    claim, errors = _Counter(len(blocks)), []

    def work() -> None:
        _IN_BLOCK.active = True
        try:
            while not errors and (i := claim.next()) is not None:
                try:
                    results[i] = fn(*blocks[i])
                except BaseException as err:  # noqa: BLE001 (raised below, in the caller)
                    errors.append(err)
        finally:
            _IN_BLOCK.active = False
    with one_thread():
        helpers = [_State.pool.submit(work)
                   for _ in range(min(_State.threads, len(blocks)) - 1)]
        try:
            work()
        except BaseException as err:  # Ctrl-C between blocks: the helpers start no new block
            errors.append(err)
            raise
        finally:
            for h in helpers:
                h.result()
    if errors:
        raise errors[0]
    return results


_IN_BLOCK = threading.local()  # .active while a thread runs blocks: nested calls stay on it


class _Counter:
    """0, 1, ..., n - 1 to whichever thread asks next, then None."""

    __slots__ = ("_lock", "_n", "_next")

    def __init__(self, n: int):
        self._lock, self._next, self._n = threading.Lock(), 0, n

    def next(self) -> int | None:
        with self._lock:
            i = self._next
            if i >= self._n:
                return None
            self._next = i + 1
            return i


def by_rows(fn: Callable[..., Any], out: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
    """fn(out[s:e], *(a[s:e] for a in arrays)) over fixed row blocks, on the pool; returns out.

    For elementwise work whose row i reads and writes row i only: every block computes its rows
    exactly as one call over all rows would, so the result is bitwise the same for any thread
    count. Arrays under tuning.MIN_PARALLEL_ELEMENTS (or one thread) take one call."""
    if out.ndim == 0 or out.size < tuning.MIN_PARALLEL_ELEMENTS or get_num_threads() == 1:
        fn(out, *arrays)
    else:
        run_blocks(lambda s, e: fn(out[s:e], *(a[s:e] for a in arrays)), row_blocks(len(out)))
    return out
