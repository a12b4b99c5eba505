"""In-place writes versus saved arrays: read-only locks and the sanctioned way to write.

A backward reads the arrays its forward saved. Writing one of them in place in between would
give a silently wrong gradient (torch raises). Two guards, both free of per-element cost:

- while a graph holds an input array for its backward, that array is read-only, so a raw
  `t.data[...] = x` fails at once (numpy: "assignment destination is read-only");
- an optimizer step or a state load writes through `modified_in_place(t)`, which lifts the
  lock for the write and bumps `t._version`; the backward compares versions and names the op.

Locks are counted per array (two live graphs may save the same weight) and released when the
context is freed by the backward or collected with its graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

_LOCKS: dict[int, int] = {}  # id(array) → how many live contexts hold it read-only

_LOCKS: dict[int, int] = {}


def lock(arr: np.ndarray) -> None:
    """Make `arr` read-only for one more holder (an array read-only already is left alone)."""
    key = id(arr)  # stable: the context holds arr until it unlocks it
    count = _LOCKS.get(key)
    if count is not None:
        _LOCKS[key] = count + 1
    elif arr.flags.writeable:
        arr.flags.writeable = False
        _LOCKS[key] = 1


def unlock(arr: np.ndarray) -> None:
    """One holder fewer; the last one makes `arr` writeable again."""
    key = id(arr)
    count = _LOCKS.get(key)
    if count is None:
        return
    if count > 1:
        _LOCKS[key] = count - 1
    else:
        del _LOCKS[key]
        arr.flags.writeable = True


@contextlib.contextmanager
def modified_in_place(t: Any) -> Iterator[np.ndarray]:
    """Write Tensor `t`'s data in place on purpose (an optimizer step, a state load).

    Bumps `t._version`, so a graph that saved the old values refuses its backward, and lifts
    the read-only lock for the duration of the write."""
    arr = t.data
    locked = id(arr) in _LOCKS
    if locked:
        arr.flags.writeable = True
    try:
        yield arr
    finally:
        t._version += 1
        if locked:
            arr.flags.writeable = False
