"""Scores of predictions in plain numpy: accuracy, macro-F1, ROC-AUC, average precision, Hits@K.

Each follows the reference definition the field reports numbers with, ties included:

- `accuracy`: the fraction of rows whose predicted label is the target;
- `macro_f1`: the unweighted mean over classes of F1_c = 2 TP_c / (2 TP_c + FP_c + FN_c), over
  the classes present in the targets or the predictions (sklearn's `f1_score(average="macro")`);
- `roc_auc`: the Mann-Whitney statistic, AUC = (Σ ranks of positives − P(P + 1)/2) / (P N)
  with tied scores given their average rank, i.e. P(s⁺ > s⁻) + ½ P(s⁺ = s⁻); for (n, C)
  scores the mean of the one-vs-rest AUCs of the classes that occur (sklearn's "ovr" macro);
- `average_precision`: Σₙ (Rₙ − Rₙ₋₁) Pₙ over the distinct score thresholds, highest first,
  equal scores entering together (sklearn's `average_precision_score`);
- `hits_at_k`: OGB's link-prediction Hits@K, the fraction of positive pairs scored strictly
  above the K-th highest negative score (1.0 when there are fewer than K negatives).

Vectorised over rows (a sort and cumulative sums); the per-class loops run over classes only.
Bad shapes are a one-line `ShapeError`; a score undefined for the input (an AUC without a
positive or without a negative) is a one-line `MgsparseError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.errors import MgsparseError, ShapeError


def _labels(y: Any, who: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.dtype.kind not in "iub":
        raise ShapeError(f"{who}: labels must be a 1-d integer array, got {y.dtype} {y.shape}")
    return y.astype(np.int64)


def _pair(y_true: Any, other: Any, who: str) -> tuple[np.ndarray, np.ndarray]:
    t, o = _labels(y_true, who), np.asarray(other)
    if o.shape[:1] != t.shape or len(t) == 0:
        raise ShapeError(f"{who}: {len(t)} targets for {o.shape[0] if o.ndim else 0} "
                         f"predictions (at least one row, as many of each)")
    return t, o


def accuracy(y_true: Any, y_pred: Any) -> float:
    """Fraction of rows with y_pred == y_true."""
    t, p = _pair(y_true, y_pred, "accuracy")
    return float(np.mean(t == _labels(p, "accuracy")))


def macro_f1(y_true: Any, y_pred: Any) -> float:
    """Mean over the classes in y_true ∪ y_pred of 2 TP / (2 TP + FP + FN)."""
    t, p = _pair(y_true, y_pred, "macro_f1")
    p = _labels(p, "macro_f1")
    n = int(max(t.max(), p.max())) + 1
    tp = np.bincount(t[t == p], minlength=n)
    fp = np.bincount(p, minlength=n) - tp  # predicted c, was not c
    fn = np.bincount(t, minlength=n) - tp  # was c, predicted otherwise
    present = (tp + fp + fn) > 0
    return float(np.mean(2 * tp[present] / (2 * tp[present] + fp[present] + fn[present])))


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of x, ties given the mean of the ranks they span (scipy's rankdata)."""
    order = np.argsort(x, kind="stable")
    s = x[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # first index of each tie group
    ends = np.r_[starts[1:], len(s)]
    mean_rank = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def _binary_auc(positive: np.ndarray, scores: np.ndarray) -> float:
    p = int(positive.sum())
    n = len(positive) - p
    if p == 0 or n == 0:
        raise MgsparseError(f"roc_auc: undefined with {p} positive and {n} negative rows")
    r = average_ranks(scores)[positive].sum()
    return float((r - p * (p + 1) / 2.0) / (p * n))


def roc_auc(y_true: Any, scores: Any) -> float:
    """ROC-AUC. Scores (n,) with 0/1 targets: binary. Scores (n, C) (class probabilities, as
    sklearn expects) with targets in 0..C-1: the mean one-vs-rest AUC over the classes that
    occur in y_true (a class absent from the targets has no positive to rank)."""
    t, s = _pair(y_true, scores, "roc_auc")
    s = s.astype(np.float64)
    if s.ndim == 1:
        if not np.isin(t, (0, 1)).all():
            raise ShapeError("roc_auc: 1-d scores need 0/1 targets; pass (n, C) scores for "
                             "several classes")
        return _binary_auc(t == 1, s)
    if s.ndim != 2 or t.min() < 0 or t.max() >= s.shape[1]:
        raise ShapeError(f"roc_auc: targets must index the {s.shape[-1]} columns of the "
                         f"scores, got labels {t.min()}..{t.max()}")
    classes = np.unique(t)
    if len(classes) < 2:
        raise MgsparseError(f"roc_auc: undefined with a single class ({classes[0]}) in the targets")
    return float(np.mean([_binary_auc(t == c, s[:, c]) for c in classes]))


def average_precision(y_true: Any, scores: Any) -> float:
    """Σ (Rₙ − Rₙ₋₁) Pₙ over the distinct thresholds, highest score first (sklearn's)."""
    t, s = _pair(y_true, scores, "average_precision")
    if s.ndim != 1 or not np.isin(t, (0, 1)).all():
        raise ShapeError("average_precision: needs 1-d scores and 0/1 targets")
    positives = int(t.sum())
    if positives == 0:
        raise MgsparseError("average_precision: undefined without a positive row")
    order = np.argsort(-s.astype(np.float64), kind="stable")
    s, t = s[order], t[order]
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1]  # each threshold's last row
    tp = np.cumsum(t)[last]
    precision = tp / (last + 1.0)
    recall = tp / positives
    return float(np.sum(np.diff(recall, prepend=0.0) * precision))


def hits_at_k(pos_scores: Any, neg_scores: Any, k: int) -> float:
    """OGB's Hits@K: the fraction of positive scores strictly greater than the K-th highest
    negative score; 1.0 when there are fewer than K negatives (OGB's convention)."""
    pos, neg = np.ravel(pos_scores), np.ravel(neg_scores)
    if k < 1 or len(pos) == 0:
        raise ShapeError(f"hits_at_k: needs k >= 1 and a positive score (k={k}, "
                         f"{len(pos)} positives)")
    if len(neg) < k:
        return 1.0
    kth = np.partition(neg, len(neg) - k)[len(neg) - k]
    return float(np.mean(pos > kth))
