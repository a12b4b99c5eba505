"""Large arrays handed out again, epoch after epoch, once nothing else holds them.

A fresh 256 MB array (dropout on 1,000,000 × 64 features) comes from the kernel as new pages
every epoch and pays a page fault per 4 KB on first write. `Buffers` keeps the memory it
made and lends it again only when its reference count shows that no Tensor, view or saved
context holds it any more, so a buffer is never written while something can still read it.

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
import sys
from typing import Any

import numpy as np

from mgsparse.kernels import tuning

# references to a pooled buffer while `_free` inspects it: the pool's list, the local name
# and getrefcount's own argument. Anything more is a live user: every array `take` lent is a
# view whose `.base` is the buffer (NumPy collapses views of views to the owner).
_POOL_ONLY = 3


class Buffers:
    """A small pool of byte buffers lent as arrays of any shape and dtype that fits."""

    def __init__(self, max_arrays: int = 16) -> None:
        self._arrays: list[np.ndarray] = []  # flat uint8 buffers
        self.max_arrays = int(max_arrays)

    def __repr__(self) -> str:
        return f"Buffers({len(self._arrays)} arrays, {self.nbytes / 2**20:.1f} MB)"

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays)

    def _free(self, need: int) -> tuple[int | None, int | None]:
        """(index of the smallest free buffer holding `need` bytes, index of the largest free
        buffer), None where there is none. Holds no extra reference to any buffer."""
        fit = largest = None
        for i in range(len(self._arrays)):  # not enumerate: its cached tuple holds a reference
            a = self._arrays[i]
            if sys.getrefcount(a) > _POOL_ONLY:
                continue
            if a.nbytes >= need and (fit is None or a.nbytes < self._arrays[fit].nbytes):
                fit = i
            if largest is None or a.nbytes > self._arrays[largest].nbytes:
                largest = i
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
                grown = max(need, int(self._arrays[largest].nbytes * tuning.GROWTH))
                self._arrays[largest] = np.empty(grown, dtype=np.uint8)
                fit = largest
            elif len(self._arrays) < self.max_arrays:
                self._arrays.append(np.empty(need, dtype=np.uint8))
                fit = len(self._arrays) - 1
            else:  # more live outputs than the pool holds: an ordinary array
                return np.empty(shape, dtype=dtype)
        return self._arrays[fit][:need].view(dtype).reshape(shape)

    def clear(self) -> None:
        self._arrays.clear()


def output_array(out: Any, like: np.ndarray) -> np.ndarray:
    """The array an op writes its output of `like`'s shape into: taken from `out` when it is a
    `Buffers` (in the op's forward, so that a step run again from its tape takes a free buffer
    each time, never the one it was recorded with), `out` itself when it is an array, else a
    new one."""
    if out is None:
        return np.empty_like(like)
    return out.take(like.shape, like.dtype) if isinstance(out, Buffers) else out
