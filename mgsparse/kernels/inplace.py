"""In-place writes versus saved arrays: read-only locks and the sanctioned way to write.

A backward reads the arrays its forward saved. Writing one of them in place in between would
give a silently wrong gradient (torch raises). Two guards, both free of per-element cost:

- while a graph holds an input array for its backward, that array is read-only, so a raw
  `t.data[...] = x` fails at once (numpy: "assignment destination is read-only");
- an optimizer step or a state load writes through `modified_in_place(t)`, which lifts the
  lock for the write and bumps `t._version`; the backward compares versions and names the op.

Locks are counted per *buffer* — the array that owns the memory, reached through `.base` —
not per array object: a slice `v = x[:2]` taken before `x` is saved keeps its own writeable
flag, and numpy refuses to make `v` writeable again while `x` is read-only. So every array
locked on one buffer is released together, when the last holder of any of them lets go,
base before views (numpy's rule: a view may be writeable only when its base is). Holders are
the contexts of live graphs, released by the backward or when the graph is collected.

A cache keyed by an array (a fixed Â's permuted copy) needs it never to change, and makes it
read-only for good (`freeze`), but only an array mgsparse owns (`own`: a copy it made of the
caller's values) or one its owner froze already (`keep`): the caller's own arrays stay
writable, and are never cached.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np


class _Buffer:
    """The locks on one memory buffer: how many holders, and which arrays we made read-only."""

    __slots__ = ("flipped", "holders", "key")

    def __init__(self, key: int) -> None:
        self.key = key  # id of the array that owns the memory
        self.holders = 0
        self.flipped: list[np.ndarray] = []  # arrays this module turned read-only

    def release(self) -> None:
        """Make every flipped array writeable again, shallowest first (bases before views)."""
        flipped = self.flipped
        for arr in (flipped if len(flipped) < 2 else sorted(flipped, key=_depth)):
            try:
                arr.setflags(write=True)
            except ValueError:  # a view of a frozen array (`freeze`) stays read-only
                pass

    def relock(self) -> None:
        for arr in self.flipped:
            arr.setflags(write=False)


_BUFFERS: dict[int, _Buffer] = {}  # id(owning array) → its locks (a flipped array keeps it alive)
_FROZEN: dict[int, weakref.ref] = {}  # id(frozen array) → the array, while it lives
_OWNED: dict[int, weakref.ref] = {}  # id(array mgsparse made and holds alone) → the array


def _root(arr: np.ndarray) -> np.ndarray:
    """The array that owns `arr`'s memory (the end of its chain of ndarray bases)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _depth(arr: np.ndarray) -> int:
    depth = 0
    while isinstance(arr.base, np.ndarray):
        arr, depth = arr.base, depth + 1
    return depth


def lock(arr: np.ndarray) -> _Buffer | None:
    """Make `arr` read-only for one more holder; returns the lock, for `unlock`. None when
    nothing was locked: an array read-only already, on a buffer this module does not lock, is
    left alone (a user's frozen array stays frozen)."""
    flags = arr.flags
    key = id(arr if arr.base is None else _root(arr))  # stable: the holder keeps arr alive
    buf = _BUFFERS.get(key)
    if buf is None:
        if not flags.writeable:
            return None
        buf = _BUFFERS[key] = _Buffer(key)
    buf.holders += 1
    if flags.writeable:
        arr.setflags(write=False)
        buf.flipped.append(arr)
    return buf


def unlock(buf: _Buffer | None) -> None:
    """One holder fewer on the lock `lock` returned; the last holder on the buffer makes its
    arrays writeable again."""
    if buf is None:
        return
    buf.holders -= 1
    if buf.holders == 0:
        del _BUFFERS[buf.key]
        buf.release()


def freeze(arr: np.ndarray) -> None:
    """Make `arr` read-only for good: a cache keyed by the array (a fixed Â's permuted copy)
    must never meet new values. A lock held on it now no longer counts it among the arrays
    to make writeable again when the last holder lets go."""
    buf = _BUFFERS.get(id(_root(arr)))
    if buf is not None:
        buf.flipped = [a for a in buf.flipped if a is not arr]
    arr.flags.writeable = False
    key = id(arr)
    if key not in _FROZEN or _FROZEN[key]() is not arr:
        _FROZEN[key] = weakref.ref(arr, lambda _, key=key: _FROZEN.pop(key, None))


def own(arr: np.ndarray) -> np.ndarray:
    """Record that mgsparse made `arr` and no caller holds it (a `SparseTensor`'s copy of the
    values it was given), so a cache may freeze it (`keep`). Returns arr."""
    key = id(arr)
    _OWNED[key] = weakref.ref(arr, lambda _, key=key: _OWNED.pop(key, None))
    return arr


def keep(arr: np.ndarray) -> bool:
    """Whether a cache may keep a copy made from `arr` while it lives: yes for an array its
    owner froze (`freeze`), and for one mgsparse owns (`own`), frozen now; no for anyone
    else's, whose flags are left alone: a caller's array stays writable, and uncached."""
    if is_frozen(arr):
        return True
    ref = _OWNED.get(id(arr))
    if ref is None or ref() is not arr or arr.base is not None:
        return False
    freeze(arr)
    return True


def is_frozen(arr: np.ndarray) -> bool:
    """Whether `arr` was frozen (`freeze`) and so can never change: a read-only flag alone
    does not say it (a graph's lock is lifted again, a view's base may still be written)."""
    ref = _FROZEN.get(id(arr))
    return ref is not None and ref() is arr and not _root(arr).flags.writeable


class modified_in_place:  # lower case: used as a function, `with modified_in_place(t) as a:`
    """Write Tensor `t`'s data in place on purpose (an optimizer step, a state load).

    Bumps `t._version`, so a graph that saved the old values refuses its backward, and lifts
    the read-only locks on its buffer for the duration of the write. A class rather than a
    generator: an optimizer enters it once per parameter and step."""

    __slots__ = ("buf", "t")

    def __init__(self, t: Any):
        self.t, self.buf = t, None

    def __enter__(self) -> np.ndarray:
        arr = self.t.data
        self.buf = buf = _BUFFERS.get(id(arr if arr.base is None else _root(arr)))
        if buf is not None:
            buf.release()
        return arr

    def __exit__(self, *exc: object) -> None:
        self.t._version += 1
        if self.buf is not None:
            self.buf.relock()
