"""Dropout whose mask is a function of (key, step, layer, node id, feature), not of draw order.

A generator's masks depend on how many numbers were drawn before and in which order, so a
graph split over K ranks, each dropping out only the rows it owns, would draw different
masks for every K. Here each entry's keep/drop decision hashes its coordinates instead —
a counter-based generator (SplitMix64, Steele et al. 2014) keyed by

    key = mix(seed, step, layer),   counter = node_id * num_columns + column,
    u = top 53 bits of splitmix64(counter ^ key) / 2^53,   keep iff u >= p,

so the same node keeps the same features whichever process holds it, and the single-process
model draws exactly the masks of any partitioned run. Kept entries are scaled by 1/(1-p).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.sparse import SparseTensor

_MASK64 = (1 << 64) - 1
_CHUNK = 1 << 20  # entries hashed at once: bounds the uint64 temporaries to a few MB


def _mix_int(x: int) -> int:
    """SplitMix64's finaliser on one Python int (the key is mixed once per call)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array, in place (uint64 products wrap mod 2^64)."""
    z += np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def stream_key(seed: int, step: int, layer: int) -> int:
    """One 64-bit key per (seed, training step, layer)."""
    return _mix_int(_mix_int(_mix_int(int(seed) & _MASK64) ^ int(step)) ^ int(layer))


def _keep(key: np.uint64, counters: np.ndarray, p: float, scale: Any) -> np.ndarray:
    z = _mix(counters ^ key)
    u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))  # uniform in [0, 1)
    return np.where(u >= p, scale, scale.dtype.type(0))


def keep_scale(key: int, ids: np.ndarray, width: int, p: float, dtype: Any,
               entries: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """1/(1-p) where an entry is kept, 0 where dropped, for rows of `width` columns.

    Entries are (ids[row[k]], col[k]) for `entries=(row, col)` (the stored entries of a
    sparse matrix), else the dense (len(ids), width) block. Either way ~1M entries are
    hashed at a time, so the uint64 temporaries stay a few MB whatever N is.
    """
    dtype = np.dtype(dtype)
    scale, k, w = dtype.type(1.0 / (1.0 - p)), np.uint64(key), np.uint64(width)
    ids = ids.astype(np.uint64, copy=False)
    if entries is not None:
        row, col = entries
        out = np.empty(row.size, dtype=dtype)
        for s in range(0, row.size, _CHUNK):  # chunks of entries, not a loop over nodes
            out[s:s + _CHUNK] = _keep(k, ids[row[s:s + _CHUNK]] * w
                                      + col[s:s + _CHUNK].astype(np.uint64), p, scale)
        return out
    out = np.empty((ids.size, width), dtype=dtype)
    step, ar = max(1, _CHUNK // max(width, 1)), np.arange(width, dtype=np.uint64)
    for r0 in range(0, ids.size, step):  # blocks of rows
        out[r0:r0 + step] = _keep(k, ids[r0:r0 + step, None] * w + ar, p, scale)
    return out


def keyed_dropout(x: Tensor | SparseTensor, p: float, training: bool, key: int,
                  node_ids: np.ndarray | None = None) -> Tensor | SparseTensor:
    """Inverted dropout of `x` (rows are nodes) with the keyed mask; `node_ids` are the global
    ids of x's rows (default 0..N-1). A SparseTensor drops stored values only."""
    if not 0 <= p < 1:
        raise HyperparameterError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    rows, width = x.shape
    ids = np.arange(rows, dtype=np.uint64) if node_ids is None else np.asarray(node_ids)
    if isinstance(x, SparseTensor):
        scale = keep_scale(key, ids, width, p, x.dtype, entries=(x.row, x.col))
        return x.with_values(x.values * scale)
    return x * keep_scale(key, ids, width, p, x.dtype)
