"""Keyed (hashed) keep masks: the keep rate, and the same rows whichever process draws them."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine.masks import hashed_keep_mask


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
