"""Keep masks: the keep rate, the same rows whichever process draws them (keyed masks), and
inverted dropout's scale matching the keep probability the drawn bits realise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.engine.masks import (
    RAW_BYTES_MIN,
    _precision,
    hashed_keep_mask,
    keep_probability,
    kept_scale,
    random_bytes,
)


@pytest.mark.parametrize("p", [0.5, 0.25, 0.3])  # bits, bytes, 16-bit words
def test_hashed_keep_rate_is_within_five_sigma(p):
    mask = hashed_keep_mask(42, np.arange(5000), 67, p)  # 67: a partial last group
    n = mask.size
    assert abs(mask.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)
    per_column = mask.mean(axis=0)  # no column is stuck on or off
    assert per_column.min() > 1 - p - 0.1 and per_column.max() < 1 - p + 0.1


@pytest.mark.parametrize("p", [0.5, 0.25, 0.3])
def test_any_subset_of_rows_draws_those_rows_of_the_full_mask(p):
    full = hashed_keep_mask(7, np.arange(3000), 40, p)
    part = np.array([2999, 5, 1000, 17])
    np.testing.assert_array_equal(hashed_keep_mask(7, part, 40, p), full[part])
    row, col = np.array([5, 5, 2999, 0]), np.array([0, 39, 17, 33])  # stored entries
    np.testing.assert_array_equal(hashed_keep_mask(7, np.arange(3000), 40, p, (row, col)),
                                  full[row, col])
    assert not np.array_equal(hashed_keep_mask(8, np.arange(3000), 40, p), full)


class _EveryWord:
    """A stand-in generator whose `bytes` are every 16-bit word once, in order, repeated: a
    mask of 2^20 entries drawn from it keeps exactly P(keep) of them (p = 0.5: every bit of
    every word), so their mean is the expectation itself, with no sampling noise (a bias of
    5.5e-4 at p = 0.99 would need ~10^10 random draws to show)."""

    def bytes(self, n: int) -> bytes:
        words = np.arange(1 << 16, dtype="<u2").tobytes()
        return (words * -(-n // len(words)))[:n]


@pytest.mark.parametrize("p", [0.3, 0.5, 0.75, 0.9, 0.99, 0.995, 0.999, 0.9999, 1e-6])
def test_dropout_of_ones_has_mean_one_exactly_for_the_drawn_threshold(p):
    out = Tensor(np.ones(1 << 20)).dropout(p, rng=_EveryWord()).data  # all words, all bits
    assert abs(out.mean() - 1.0) < 1e-12  # 1/(1-p) as the scale: 5.5e-4 off at 0.99
    bits, threshold = _precision(p)
    assert keep_probability(p) == Fraction((1 << bits) - threshold, 1 << bits)
    assert abs(Fraction(kept_scale(p)) * Fraction(keep_probability(p)) - 1) <= Fraction(1, 2**52)
    assert abs(keep_probability(p) - (1 - p)) <= 2**-17  # p itself to the nearest 1/65536


@pytest.mark.parametrize("p", [0.99, 0.999])
def test_dropout_mean_with_a_real_generator_is_one_within_its_noise(p):
    n = 1 << 22
    out = Tensor(np.ones(n)).dropout(p, rng=np.random.default_rng(0)).data
    sigma = np.sqrt(p / (1 - p) / n)  # sd of the mean of n independent scale·Bernoulli(1-p)
    assert abs(out.mean() - 1.0) < 5 * sigma
    assert set(np.unique(out)) == {0.0, kept_scale(p)}


@pytest.mark.parametrize("before", [0, 1, 2, 3])
def test_random_bytes_are_the_generators_bytes_and_leave_it_in_the_same_state(before):
    """PCG64's raw outputs stand in for `Generator.bytes` from RAW_BYTES_MIN bytes: the same
    bytes for an even or odd count of uint32s, after draws that leave a half waiting or not,
    and every later draw of either kind the same."""
    n0 = RAW_BYTES_MIN
    for n in (n0, n0 + 1, n0 + 2, n0 + 3, n0 + 4, n0 + 5, 3 * n0 + 7, 20 * n0 + 9, 1 << 21):
        a, b = np.random.default_rng(n), np.random.default_rng(n)
        for g in (a, b):
            g.integers(0, 2**32, before, dtype=np.uint32)
        np.testing.assert_array_equal(random_bytes(b, n), np.frombuffer(a.bytes(n), np.uint8))
        assert a.bytes(13) == b.bytes(13)
        np.testing.assert_array_equal(a.integers(0, 2**32, 5, dtype=np.uint32),
                                      b.integers(0, 2**32, 5, dtype=np.uint32))
        assert a.random() == b.random() and _same_state(a, b)


def test_other_generators_and_small_draws_take_the_generators_own_bytes():
    for rng, n in ((np.random.Generator(np.random.MT19937(1)), 1 << 20),
                   (np.random.default_rng(1), RAW_BYTES_MIN - 1)):
        twin = np.random.Generator(type(rng.bit_generator)(1))
        np.testing.assert_array_equal(random_bytes(rng, n), np.frombuffer(twin.bytes(n), np.uint8))
        assert _same_state(rng, twin)


def _same_state(a: np.random.Generator, b: np.random.Generator) -> bool:
    """The generators' states, a waiting uint32 half compared only where one is waiting."""
    sa, sb = a.bit_generator.state, b.bit_generator.state
    if "has_uint32" not in sa:
        return repr(sa) == repr(sb)
    return (sa["state"] == sb["state"] and sa["has_uint32"] == sb["has_uint32"]
            and (not sa["has_uint32"] or sa["uinteger"] == sb["uinteger"]))
