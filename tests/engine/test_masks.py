"""Keep masks: the keep rate, the same rows whichever process draws them (keyed masks), and
inverted dropout's scale matching the keep probability the drawn bits realise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.engine.masks import _precision, hashed_keep_mask, keep_probability, kept_scale


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

