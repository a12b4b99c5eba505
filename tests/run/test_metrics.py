"""Metrics against hand-computed cases, ties included (each case's arithmetic in its comment)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.errors import MgsparseError, ShapeError
from mgsparse.run.metrics import (
    accuracy,
    average_precision,
    average_ranks,
    hits_at_k,
    macro_f1,
    roc_auc,
)


def test_accuracy():
    assert accuracy([0, 1, 2, 2], [0, 2, 2, 2]) == 0.75
    with pytest.raises(ShapeError, match=r"^accuracy: 3 targets for 2 predictions"):
        accuracy([0, 1, 2], [0, 1])


def test_macro_f1_by_hand():
    """Class 0: TP 1, FP 1 (row 4), FN 1 (row 1): 2/4. Class 1: TP 2, FP 1, FN 0: 4/5.
    Class 2: TP 0, FN 1: 0. Mean 1.3 / 3."""
    assert macro_f1([0, 0, 1, 1, 2], [0, 1, 1, 1, 0]) == pytest.approx(1.3 / 3)
    # a class only predicted counts (F1 0); class 0: 2/3
    assert macro_f1([0, 0], [0, 1]) == pytest.approx(1 / 3)
    assert macro_f1([3, 3], [3, 3]) == 1.0  # absent classes 0..2 are not averaged in


def test_average_ranks_share_ties():
    np.testing.assert_array_equal(average_ranks(np.array([0.5, 0.5, 0.2, 0.9, 0.5])),
                                  [3.0, 3.0, 1.0, 5.0, 3.0])


def test_binary_roc_auc_with_ties_is_mann_whitney():
    # no ties: the pairs (pos, neg) ranked right are 3 of 4
    assert roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    # pos {0.5, 0.9}, neg {0.5, 0.2}: (0.5, 0.5) counts one half, the other three pairs one
    assert roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == 0.875
    assert roc_auc([0, 1, 1, 0], [0.3, 0.3, 0.3, 0.3]) == 0.5
    assert roc_auc([1, 1, 0], [0.1, 0.2, 0.9]) == 0.0


def test_multiclass_roc_auc_is_the_one_vs_rest_mean():
    """Class 0: 0.7 beats 0.5, 0.2, 0.1 → 1. Class 1: 0.2 vs 0.2, 0.2, 0.5 → (½ + ½ + 0)/3.
    Class 2: 0.6 and 0.4 beat 0.1 and 0.3 → 1. Mean (2 + 1/3) / 3 = 7/9."""
    scores = [[0.7, 0.2, 0.1], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6], [0.1, 0.5, 0.4]]
    assert roc_auc([0, 1, 2, 2], scores) == pytest.approx(7 / 9)
    # class 3 never occurs in the targets: averaged over classes 0..2 only
    wide = np.c_[scores, np.zeros(4)]
    assert roc_auc([0, 1, 2, 2], wide) == pytest.approx(7 / 9)


def test_auc_undefined_or_misshaped_is_one_line():
    with pytest.raises(MgsparseError, match=r"^roc_auc: undefined with 0 positive and 3 "):
        roc_auc([0, 0, 0], [0.1, 0.2, 0.3])
    with pytest.raises(MgsparseError, match=r"^roc_auc: undefined with a single class \(2\)"):
        roc_auc([2, 2], [[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    with pytest.raises(ShapeError, match=r"^roc_auc: 1-d scores need 0/1 targets"):
        roc_auc([0, 2], [0.1, 0.2])
    with pytest.raises(ShapeError, match=r"^roc_auc: targets must index the 2 columns"):
        roc_auc([0, 2], [[0.1, 0.9], [0.5, 0.5]])


def test_average_precision_by_hand():
    """Thresholds 0.8, 0.4, 0.35, 0.1: (R, P) = (½, 1), (½, ½), (1, ⅔), (1, ½);
    AP = ½·1 + 0·½ + ½·⅔ + 0·½ = 5/6 (sklearn's documented example)."""
    assert average_precision([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(5 / 6)
    assert average_precision([1, 0, 1], [0.9, 0.1, 0.8]) == 1.0


def test_average_precision_groups_tied_scores():
    """Rows 1 (positive) and 2 (negative) tie at 0.5: one threshold, (R, P) = (1, ⅔) after the
    first (½, 1): AP = ½ + ½·⅔ = 5/6. Taking the positive first would give 1."""
    assert average_precision([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1]) == pytest.approx(5 / 6)
    with pytest.raises(MgsparseError, match=r"^average_precision: undefined without a positive"):
        average_precision([0, 0], [0.1, 0.2])


def test_hits_at_k_is_ogbs():
    """Negatives sorted 0.8, 0.5, 0.4, 0.1; a positive must beat the K-th strictly."""
    pos, neg = [0.9, 0.5, 0.3], [0.8, 0.5, 0.1, 0.4]
    assert hits_at_k(pos, neg, 1) == pytest.approx(1 / 3)
    assert hits_at_k(pos, neg, 2) == pytest.approx(1 / 3)  # 0.5 does not beat 0.5
    assert hits_at_k(pos, neg, 3) == pytest.approx(2 / 3)
    assert hits_at_k(pos, neg, 5) == 1.0  # fewer negatives than K
    with pytest.raises(ShapeError, match=r"^hits_at_k: needs k >= 1"):
        hits_at_k(pos, neg, 0)
