"""The two switches of the gradient proof: `reference()` and `tiny()`.

Every fast path claims the bits of its plain path (one numpy or scipy call) at any thread
count, but each starts at a size gradcheck never reaches (4,096 rows, 2^20 elements, 4 MiB of
output). `tiny()` lowers every threshold of `kernels.tuning` to gradcheck sizes, so each fast
path runs on small inputs; `reference()` turns every one off. The gradcheck sweep runs each
case under `tiny()` at 1 and 2 threads and compares with `reference()` (`checks.sweep`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mgsparse.kernels import tuning


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
def tiny() -> Iterator[None]:
    """Every threshold lowered (`tuning.TINY`): each fast path runs at gradcheck sizes."""
    with _thresholds(tuning.TINY):
        yield


@contextlib.contextmanager
def reference() -> Iterator[None]:
    """Every kernel on its plain path: no blocks, slices, row records or tiling."""
    previous, State.reference = State.reference, True
    try:
        yield
    finally:
        State.reference = previous
