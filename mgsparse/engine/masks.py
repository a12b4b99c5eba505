"""Dropout keep masks from random bits: drawn from a generator, or hashed from coordinates.

A float uniform per entry costs more than the multiply it gates, so each entry takes only
the bits its p needs: p = 0.5 one bit; p a multiple of 1/256 one byte against a threshold
(exact); any other p a 16-bit word against round(65536·p), i.e. p to the nearest 1/65536
(|error| ≤ 7.7e-6). A kept entry is scaled by 1/P(keep) for the threshold actually drawn
against (`kept_scale`), not by 1/(1-p): with t = round(65536·p), P(keep) = (65536 - t)/65536,
so E[dropout(x)] = x exactly. 1/(1-p) would be off by the rounding over 1-p: 5.5e-4 at
p = 0.99, 0.7% at 0.999. For p = 0.5 and multiples of 1/256 the two coincide.
"""

from __future__ import annotations

import contextlib
import math
import random
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from mgsparse.errors import HyperparameterError, MgsparseError

_CHUNK = 1 << 20  # 64-bit hashes computed at once: bounds the temporaries to a few MB
RAW_BYTES_MIN = 64  # bytes from which `random_bytes` reads PCG64's raw outputs (1.3 kB: 2.2 µs, not 5.3)


def _precision(p: float) -> tuple[int, int]:
    """(bits per entry, threshold): an entry is kept iff its bits, as an integer, >= threshold."""
    if p == 0.5:
        return 1, 1
    if p * 256 == int(p * 256):
        return 8, int(p * 256)
    return 16, min(round(p * 65536), 65535)


def check_probability(p: float) -> None:
    """Refuse a dropout probability outside [0, 1) with one clear line."""
    if not 0 <= p < 1:
        raise HyperparameterError(f"dropout probability must be in [0, 1), got {p}")


def keep_probability(p: float) -> float:
    """P(an entry is kept) under `_precision(p)`'s threshold t: (2^bits - t) / 2^bits, exact
    in binary floating point (a dyadic rational), within 7.7e-6 of 1 - p."""
    bits, threshold = _precision(p)
    return ((1 << bits) - threshold) / (1 << bits)


def kept_scale(p: float) -> float:
    """The inverted-dropout factor 1 / P(keep) of `keep_probability`, so E[mask·scale] = 1."""
    return 1.0 / keep_probability(p)


def keep_mask(shape: tuple, p: float, rng: np.random.Generator) -> np.ndarray:
    """A boolean keep mask, each entry False with probability p, from `rng`'s random bytes."""
    n = int(math.prod(shape))
    bits, threshold = _precision(p)
    if bits == 1:
        drawn = np.unpackbits(random_bytes(rng, -(-n // 8)), count=n)
        return drawn.view(np.bool_).reshape(shape)
    words = random_bytes(rng, n * bits // 8).view(np.uint8 if bits == 8 else "<u2")
    return (words >= threshold).reshape(shape)


class Draw(NamedTuple):
    """A keep mask still to be drawn: the op that applies it draws it from `rng` in its
    forward, at the point the caller would have drawn it (the same bits). An op recorded on a
    tape (`engine.tape`) then draws a fresh mask each time the tape runs, never the recorded
    one. While `draws_logged` watches, each draw is logged with the generator's state before
    and after it: what a recorded step's ops drew, told apart from what its Python drew."""

    p: float
    rng: np.random.Generator

    def mask(self, shape: tuple) -> np.ndarray:
        log = _DrawLog.draws
        if log is None:
            return keep_mask(shape, self.p, self.rng)
        holder = state_holder(self.rng)
        before = generator_state(holder)
        keep = keep_mask(shape, self.p, self.rng)
        log.append((holder, before, generator_state(holder)))
        return keep


class _DrawLog:
    draws: list | None = None  # set by `draws_logged`


@contextlib.contextmanager
def draws_logged() -> Iterator[list]:
    """Every `Draw` made inside the block, in order, as (state holder, state before, state
    after) (`state_holder`, `generator_state`)."""
    if _DrawLog.draws is not None:
        raise MgsparseError("draws_logged(): already logging")
    _DrawLog.draws = log = []
    try:
        yield log
    finally:
        _DrawLog.draws = None


def state_holder(rng: Any) -> Any:
    """The object whose state a draw from `rng` advances (a Generator's bit generator, which
    two Generators may share), or None for something that is no generator numpy or Python
    knows."""
    if isinstance(rng, np.random.Generator):
        return rng.bit_generator
    if isinstance(rng, np.random.RandomState):
        return rng._bit_generator
    if isinstance(rng, (np.random.BitGenerator, random.Random)):
        return rng
    return None


def generator_state(holder: Any) -> Any:
    """`holder`'s whole state as a value `==` compares (arrays as bytes), or None for None."""
    if holder is None:
        return None
    if isinstance(holder, random.Random):
        return holder.getstate()
    return _frozen(holder.state)


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, (list, tuple)):
        return tuple(map(_frozen, value))
    return value


def drawn(keep: Any, shape: tuple) -> np.ndarray:
    """`keep` as the mask of `shape` an op applies: drawn now for a `Draw`, else as given."""
    return keep.mask(shape) if isinstance(keep, Draw) else keep


def random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    """`rng.bytes(n)` as uint8, bit for bit, the generator left in the same state: 5x faster.

    `Generator.bytes` draws n/4 bounded uint32s one at a time and copies them out (0.85 GB/s
    here). PCG64 makes a uint32 from each 64-bit output, low half first, then the high half,
    which it keeps for the next uint32 — the 64-bit outputs' own little-endian bytes. So
    `random_raw` gives the same bytes (4.6 GB/s), and for an odd number of uint32s the last
    output's high half is left waiting, as `bytes` leaves it. Other bit generators, a
    generator already holding a half, a big-endian machine and small draws take `bytes`.
    """
    bitgen = getattr(rng, "bit_generator", None)  # anything with `.bytes` may draw a mask
    if n < RAW_BYTES_MIN or type(bitgen) is not np.random.PCG64 or sys.byteorder != "little":
        return np.frombuffer(rng.bytes(n), np.uint8)
    state = bitgen.state
    if state["has_uint32"]:
        return np.frombuffer(rng.bytes(n), np.uint8)
    words = -(-n // 4)  # the uint32s `bytes` draws
    raw = bitgen.random_raw(-(-words // 2))
    if words % 2:
        state = bitgen.state
        state["has_uint32"], state["uinteger"] = 1, int(raw[-1] >> np.uint64(32))
        bitgen.state = state
    return raw.view(np.uint8)[:n]


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele et al. 2014) on a uint64 array, in place."""
    z += np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def hashed_keep_mask(key: int, ids: np.ndarray, width: int, p: float,
                     entries: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """A keep mask that is a function of (key, ids[row], column) alone, not of draw order.

    Row r's columns are cut into groups of 64/bits; group j of row r takes the 64 bits of
    splitmix64((ids[r]·groups + j) ^ key), column c its bits at offset bits·(c mod 64/bits).
    So a process holding any subset of the rows draws exactly those rows of the full mask,
    with one hash per 64 entries at p = 0.5, per 8 bytes or per 4 words otherwise (a hash
    per entry, with a float conversion, costs 12x more at 100,000 × 64).
    Returns (len(ids), width) booleans, or one per stored entry for `entries=(row, col)`.
    """
    bits, threshold = _precision(p)
    per = 64 // bits
    groups, k = np.uint64(-(-width // per)), np.uint64(key & (2**64 - 1))
    ids = np.asarray(ids).astype(np.uint64, copy=False)
    if entries is not None:
        row, col = (np.asarray(a).astype(np.uint64, copy=False) for a in entries)
        z = _mix((ids[row] * groups + col // np.uint64(per)) ^ k)
        z >>= (col % np.uint64(per)) * np.uint64(bits)
        return (z & np.uint64((1 << bits) - 1)) >= np.uint64(threshold)
    out = np.empty((len(ids), width), dtype=np.bool_)
    step = max(1, _CHUNK // int(groups))
    for r0 in range(0, len(ids), step):  # blocks of rows, not a loop over nodes
        z = _mix((ids[r0:r0 + step, None] * groups + np.arange(groups, dtype=np.uint64)) ^ k)
        raw = z.astype("<u8", copy=False).view(np.uint8)  # little-endian bytes on any host
        if bits == 1:
            block = np.unpackbits(raw, axis=1, count=width, bitorder="little").view(np.bool_)
        else:
            block = raw.view(np.uint8 if bits == 8 else "<u2")[:, :width] >= threshold
        out[r0:r0 + step] = block
    return out
