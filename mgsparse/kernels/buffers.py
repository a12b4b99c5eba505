"""Large arrays handed out again, epoch after epoch, once nothing else holds them.

A fresh 256 MB array (dropout on 1,000,000 × 64 features) comes from the kernel as new pages
every epoch and pays a page fault per 4 KB on first write. `Buffers` keeps the memory it
made and lends it again only once the array it lent has died: no Tensor, view or saved
context can hold it any more, so a buffer is never written while something can still read it.

The lifetime is the lent array's own, seen by a weak reference (never a reference count:
CPython does not promise its counts). For that to cover every array that reads the memory,
each array derived from the lent one must hold it: numpy collapses a view's `.base` to the
first array that owns its memory, so a view of a plain slice of the pool's buffer would hold
the buffer, not the lent array. Lent arrays are therefore made over a `memoryview` of the
buffer (`np.frombuffer`): a view's base chain stops at the array whose base is not an array,
the lent root, so a view, a transpose or a reshape of it keeps the root, and its memory, out
of the pool.

The pool holds flat byte buffers, not arrays of one shape, and lends the first n bytes of a
free buffer of capacity ≥ n as an array of the shape asked for. Sampled training asks for a
new shape every batch: a pool keyed by shape kept one array per shape ever seen, so a sampled
run's held memory grew epoch after epoch. Here the buffers number at most the outputs alive at
once (bounded by `max_arrays`), each as large as the largest request it served: a buffer too small
for a request is replaced by one `GROWTH` times larger, so a sequence of slowly growing
batches reallocates O(log(max/min)) times, and a full batch (one shape) allocates exactly its
size once and reuses it every epoch, as before.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from mgsparse.kernels import tuning


class _Slot:
    """One pooled buffer and, while it is lent, a weak reference to the array lent from it:
    the slot is free again when that array dies (`_returned`)."""

    __slots__ = ("lent", "memory")

    def __init__(self, nbytes: int) -> None:
        self.memory = np.empty(nbytes, dtype=np.uint8)
        self.lent: weakref.ref | None = None

    def _returned(self, _: weakref.ref) -> None:  # the lent array died: the memory is free
        self.lent = None

    def lend(self, need: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        root = np.frombuffer(memoryview(self.memory), dtype=dtype, count=need // dtype.itemsize)
        self.lent = weakref.ref(root, self._returned)
        return root.reshape(shape)  # a view of root: holds it, as every view of it does


class Buffers:
    """A small pool of byte buffers lent as arrays of any shape and dtype that fits."""

    def __init__(self, max_arrays: int = 16) -> None:
        self._slots: list[_Slot] = []
        self.max_arrays = int(max_arrays)

    def __repr__(self) -> str:
        return f"Buffers({len(self._slots)} arrays, {self.nbytes / 2**20:.1f} MB)"

    @property
    def nbytes(self) -> int:
        return sum(s.memory.nbytes for s in self._slots)

    @property
    def lent(self) -> int:
        """How many buffers an array still alive holds."""
        return sum(s.lent is not None for s in self._slots)

    def _free(self, need: int) -> tuple[_Slot | None, _Slot | None]:
        """(the smallest free buffer holding `need` bytes, the largest free buffer), None
        where there is none."""
        fit = largest = None
        for s in self._slots:
            if s.lent is not None:
                continue
            size = s.memory.nbytes
            if size >= need and (fit is None or size < fit.memory.nbytes):
                fit = s
            if largest is None or size > largest.memory.nbytes:
                largest = s
        return fit, largest

    def take(self, shape: tuple, dtype: Any) -> np.ndarray:
        """An uninitialised array of `shape`, lent from a free pooled buffer when one fits."""
        dtype = np.dtype(dtype)
        need = int(math.prod(shape)) * dtype.itemsize
        if need == 0:
            return np.empty(shape, dtype=dtype)
        fit, largest = self._free(need)
        if fit is None:
            if largest is not None:  # every free buffer is too small: grow the largest
                largest.memory = np.empty(max(need, int(largest.memory.nbytes * tuning.GROWTH)),
                                          dtype=np.uint8)
                fit = largest
            elif len(self._slots) < self.max_arrays:
                fit = _Slot(need)
                self._slots.append(fit)
            else:  # more live outputs than the pool holds: an ordinary array
                return np.empty(shape, dtype=dtype)
        return fit.lend(need, shape, dtype)

    def clear(self) -> None:
        self._slots.clear()


def output_array(out: Any, like: np.ndarray) -> np.ndarray:
    """The array an op writes its output of `like`'s shape into: taken from `out` when it is a
    `Buffers` (in the op's forward, so that a step run again from its tape takes a free buffer
    each time, never the one it was recorded with), `out` itself when it is an array, else a
    new one."""
    if out is None:
        return np.empty_like(like)
    return out.take(like.shape, like.dtype) if isinstance(out, Buffers) else out
