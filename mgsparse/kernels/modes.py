"""The three switches of the gradient proof: `reference()`, `tiny()` and `counting()`.

Every fast path claims the bits of its plain path (one numpy or scipy call) at any thread
count, but each starts at a size gradcheck never reaches (4,096 rows, 2^20 elements, 4 MiB of
output). `tiny()` lowers every threshold of `kernels.tuning` to gradcheck sizes, so each fast
path runs on small inputs; `reference()` turns every one off: its thresholds are out of reach
(`tuning.REFERENCE`) and `State.reference` tells the choices that no threshold makes (a
symmetric or transposed scatter, the CSC read, a row record) to take the plain call. The
gradcheck sweep runs each case under `tiny()` at 1 and 2 threads and compares it with
`reference()` (`checks.fast_paths`).

`counting()` says which fast paths ran: each path chooser adds one to `COUNTS[path]` while a
sweep asks (`if modes.COUNTS is not None`: nothing else is paid). A cut made by
`pool.run_blocks` is counted by the function that asked for it (``blocks: scatter_sum``), so
a path outside this package is seen without naming it here.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from mgsparse.kernels import tuning

COUNTS: dict[str, int] | None = None  # path -> times taken, only inside `counting()`


class State:
    reference = False  # every kernel on its plain one-call path


@contextlib.contextmanager
def _thresholds(values: dict[str, float]) -> Iterator[None]:
    before = {name: getattr(tuning, name) for name in values}
    try:
        for name, value in values.items():
            setattr(tuning, name, value)
        yield
    finally:
        for name, value in before.items():
            setattr(tuning, name, value)


@contextlib.contextmanager
def tiny(regroup: bool = True) -> Iterator[None]:
    """Every threshold lowered (`tuning.TINY`): each fast path runs at gradcheck sizes.

    `regroup=False` keeps the paths whose floats may differ from the one call's on their
    one call (`tuning.ONE_CALL_SUMS`: the dense products by row blocks, aᵀ·g by partials, a
    scatter-add by chunks), so that every other path is held to the one call's bits in the
    same computation (`checks.fast_paths`)."""
    with _thresholds({**tuning.TINY, **({} if regroup else tuning.ONE_CALL_SUMS)}):
        yield


@contextlib.contextmanager
def reference() -> Iterator[None]:
    """Every kernel on its plain path: no blocks, slices, CSC read, row records, tiling or
    chunks (inside `tiny()` too: it sets its own thresholds)."""
    previous, State.reference = State.reference, True
    try:
        with _thresholds(tuning.REFERENCE):
            yield
    finally:
        State.reference = previous


@contextlib.contextmanager
def counting() -> Iterator[dict[str, int]]:
    """The paths taken inside the block, path -> count (a count lost to a race between two
    threads never matters: a sweep asks only whether a path ran)."""
    global COUNTS
    previous, COUNTS = COUNTS, {}
    try:
        yield COUNTS
    finally:
        COUNTS = previous


def count(path: str) -> None:
    """One more `path` taken, when counting (callers test `COUNTS is not None` first)."""
    counts = COUNTS
    if counts is not None:
        counts[path] = counts.get(path, 0) + 1


def count_caller(depth: int = 2) -> None:
    """Count a cut under the name of the function `depth` frames up (``blocks: name``)."""
    code = sys._getframe(depth).f_code
    count(f"blocks: {getattr(code, 'co_qualname', code.co_name)}")
