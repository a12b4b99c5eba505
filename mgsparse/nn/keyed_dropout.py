"""Dropout whose mask is a function of (key, step, layer, node id, feature), not of draw order.

A generator's masks depend on how many numbers were drawn before and in which order, so a
graph split over K ranks, each dropping out only the rows it owns, would draw different
masks for every K. Here each entry's keep/drop decision hashes its coordinates instead —
a counter-based generator (SplitMix64, Steele et al. 2014) keyed by

    key = mix(seed, step, layer),   the bits of splitmix64((node_id·groups + group) ^ key),
    keep iff the entry's bits (1, 8 or 16 of them, by p) pass the threshold,

so the same node keeps the same features whichever process holds it, and the single-process
model draws exactly the masks of any partitioned run. Kept entries are scaled by 1/(1-p).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.masks import check_probability, hashed_keep_mask, kept_scale
from mgsparse.sparse import SparseTensor

_MASK64 = (1 << 64) - 1


def _mix_int(x: int) -> int:
    """SplitMix64's finaliser on one Python int (the key is mixed once per call)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def stream_key(seed: int, step: int, layer: int) -> int:
    """One 64-bit key per (seed, training step, layer)."""
    return _mix_int(_mix_int(_mix_int(int(seed) & _MASK64) ^ int(step)) ^ int(layer))


def keep_scale(key: int, ids: np.ndarray, width: int, p: float, dtype: Any,
               entries: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """1/P(keep) where an entry is kept, 0 where dropped, for rows of `width` columns: the
    (len(ids), width) block, or one value per stored entry for `entries=(row, col)`. The
    mask is `engine.masks.hashed_keep_mask`: one hash per 64 bits of mask, not per entry."""
    dtype = np.dtype(dtype)
    mask = hashed_keep_mask(key, ids, width, p, entries)
    return mask.astype(dtype) * dtype.type(kept_scale(p))


def keyed_dropout(x: Tensor | SparseTensor, p: float, training: bool, key: int,
                  node_ids: np.ndarray | None = None) -> Tensor | SparseTensor:
    """Inverted dropout of `x` (rows are nodes) with the keyed mask; `node_ids` are the global
    ids of x's rows (default 0..N-1). A SparseTensor drops stored values only."""
    check_probability(p)
    if not training or p == 0:
        return x
    rows, width = x.shape
    ids = np.arange(rows, dtype=np.uint64) if node_ids is None else np.asarray(node_ids)
    if isinstance(x, SparseTensor):
        scale = keep_scale(key, ids, width, p, x.dtype, entries=(x.row, x.col))
        return x.with_values(x.values * scale)
    return x * keep_scale(key, ids, width, p, x.dtype)
