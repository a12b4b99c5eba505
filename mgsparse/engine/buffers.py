"""Large arrays handed out again, epoch after epoch, once nothing else holds them.

A fresh 256 MB array (dropout on 1,000,000 × 64 features) comes from the kernel as new pages
every epoch and pays a page fault per 4 KB on first write. `Buffers` keeps the arrays it
made and gives one back only when its reference count shows that no Tensor, view or saved
context holds it any more, so a buffer is never written while something can still read it.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

# references to a pooled array while `take` inspects it: the pool's list, the loop
# variable and getrefcount's own argument. Anything more is a live user.
_POOL_ONLY = 3


class Buffers:
    """A small pool of arrays keyed by shape and dtype."""

    def __init__(self) -> None:
        self._arrays: list[np.ndarray] = []

    def __repr__(self) -> str:
        return f"Buffers({len(self._arrays)} arrays, {self.nbytes / 2**20:.1f} MB)"

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays)

    def take(self, shape: tuple, dtype: Any) -> np.ndarray:
        """An uninitialised array of `shape`, reused when a pooled one is free."""
        dtype = np.dtype(dtype)
        for a in self._arrays:
            if (a.shape == shape and a.dtype == dtype and a.flags.writeable
                    and sys.getrefcount(a) <= _POOL_ONLY):
                return a
        out = np.empty(shape, dtype=dtype)
        self._arrays.append(out)
        return out

    def clear(self) -> None:
        self._arrays.clear()
