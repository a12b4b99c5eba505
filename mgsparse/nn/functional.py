"""Losses and metrics for node classification: masked cross-entropy, NLL, MSE, BCE, accuracy.

A `mask` selects the rows (nodes) a loss or metric is taken over: a boolean array of length
N, or an array of row indices. Targets are integer class labels; rows outside the mask are
never read, so unlabeled nodes may carry any label (e.g. −1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse import kernels
from mgsparse.engine import Function, Tensor
from mgsparse.errors import ShapeError

# ---------------------------------------------------------------- masks and targets


def _rows(mask: Any, num_rows: int, name: str) -> np.ndarray | None:
    """Row indices in [0, N) a mask selects (None: all rows); boolean masks give sorted rows."""
    if mask is None:
        return None
    mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if mask.dtype == bool:
        if mask.shape != (num_rows,):
            raise ShapeError(f"{name}: boolean mask of shape {mask.shape} for {num_rows} rows")
        rows = np.flatnonzero(mask)
    elif np.issubdtype(mask.dtype, np.integer) and mask.ndim == 1:
        rows = mask.astype(np.int64, copy=False)
        if rows.size and (rows.min() < -num_rows or rows.max() >= num_rows):
            raise ShapeError(f"{name}: mask index out of range for {num_rows} rows")
        rows = rows % num_rows  # −1 and N−1 name one row: uniqueness is decided on these
    else:
        raise ShapeError(f"{name}: mask must be a boolean or integer 1-d array, got {mask.dtype}"
                         f"{mask.shape}")
    if rows.size == 0:
        raise ShapeError(f"{name}: the mask selects no rows")
    return rows


def _targets(target: Any, rows: np.ndarray | None, num_rows: int, num_classes: int,
             name: str) -> np.ndarray:
    """The masked integer targets, checked to be class ids in [0, num_classes)."""
    t = np.asarray(target.data if isinstance(target, Tensor) else target)
    if t.shape != (num_rows,):
        raise ShapeError(f"{name}: target of shape {t.shape} for {num_rows} rows")
    if not np.issubdtype(t.dtype, np.integer):
        raise ShapeError(f"{name}: target must hold integer class ids, got {t.dtype}")
    t = t if rows is None else t[rows]
    if t.size and (t.min() < 0 or t.max() >= num_classes):
        raise ShapeError(f"{name}: target ids must be in [0, {num_classes}), got "
                         f"{t.min()}..{t.max()}")
    return t


class Targets:
    """Integer targets at a mask's rows, checked once against the scores as `cross_entropy`
    (`for_cross_entropy`: (N, C) logits, class ids, rows repeated or not) or `accuracy`
    (`for_accuracy`) checks them, in the same order and with the same errors.

    Why: a task scores the same rows against the same labels every epoch, and the checks
    (range, dtype, uniqueness of the rows) cost ~20 µs of a small graph's epoch. It keeps one
    per split and hands it to `cross_entropy_at` / `accuracy_at`, which skip them, for scores
    of the shape it was checked against: the same rows and targets reach the same kernels,
    so the results are bitwise those of `cross_entropy(scores, target, mask)` and
    `accuracy(...)`. The arrays must not change afterwards (a task's labels and splits never do).
    """

    __slots__ = ("rows", "target", "unique")

    def __init__(self, rows: np.ndarray | None, target: np.ndarray, unique: bool = True):
        self.rows, self.target, self.unique = rows, target, unique

    @classmethod
    def for_cross_entropy(cls, target: Any, mask: Any, logits: Any) -> Targets:
        _check_logits(logits, "cross_entropy")
        num_rows, num_classes = logits.shape
        rows = _rows(mask, num_rows, "cross_entropy")
        unique = (rows is None or _is_bool(mask) or _increasing(rows)
                  or np.unique(rows).size == rows.size)
        return cls(rows, _targets(target, rows, num_rows, num_classes, "cross_entropy"), unique)

    @classmethod
    def for_accuracy(cls, target: Any, mask: Any, scores: np.ndarray) -> Targets:
        if scores.ndim not in (1, 2):
            raise ShapeError(f"accuracy: expects (N, C) scores or (N,) labels, got {scores.shape}")
        t = np.asarray(target.data if isinstance(target, Tensor) else target)
        if t.shape != scores.shape[:1]:
            raise ShapeError(f"accuracy: target of shape {t.shape} for {scores.shape[0]} rows")
        rows = _rows(mask, scores.shape[0], "accuracy")
        t = t if rows is None else t[rows]
        if t.size == 0:
            raise ShapeError("accuracy: no rows")
        return cls(rows, t)


def _check_logits(logits: Tensor, name: str) -> None:
    if logits.ndim != 2:
        raise ShapeError(f"{name}: expects (N, C) scores, got shape {logits.shape}")
    if logits.shape[0] == 0:
        raise ShapeError(f"{name}: no rows")


# ---------------------------------------------------------------- cross-entropy (fused)


class CrossEntropy(Function):
    """loss = −(1/n) Σᵢ log softmax(zᵢ)[tᵢ] over the n masked rows i of the logits z.

    One node instead of the ~8 a composite through log_softmax records (max, sub, exp, sum,
    log, sub, gather, mean), on the hot path of every epoch. Forward, per row, with
    m = max_c z_c for stability (so logits like 1000 never overflow):
        lse = m + log Σ_c exp(z_c − m),   loss_i = lse − z_t.
    Backward, from ∂lse/∂z_c = softmax(z)_c:
        dz_i = g · (softmax(z_i) − onehot(t_i)) / n  at masked rows, 0 elsewhere.
    """

    @staticmethod
    def forward(ctx, z, t, rows, unique_rows):
        n = len(z) if rows is None else len(rows)
        keep = ctx.needs_input_grad[0]
        e = np.empty((n, z.shape[1]), dtype=z.dtype)  # exp(z − m), then softmax (n, C)
        sums, picked = np.empty((n, 1), dtype=z.dtype), np.empty(n, dtype=z.dtype)

        def rows_of(s, stop):  # every step reads and writes rows s..stop only
            zm = z[s:stop] if rows is None else z.take(rows[s:stop], axis=0)  # 4x z[rows]
            m = _row_max(zm)[:, None]
            picked[s:stop] = zm[np.arange(stop - s), t[s:stop]] - m[:, 0]  # z_t − m
            block = np.exp(np.subtract(zm, m, out=e[s:stop]), out=e[s:stop])
            _row_sum(block, out=sums[s:stop, 0])
            if keep:
                block /= sums[s:stop]
        if e.size < kernels.tuning.MIN_PARALLEL_ELEMENTS:
            rows_of(0, n)
        else:  # row blocks (on the pool): each row's numbers are the one call's, bitwise
            kernels.run_blocks(rows_of, kernels.row_blocks(n))
        loss = np.add.reduce(np.log(sums[:, 0])) - np.add.reduce(picked)  # .sum(), unwrapped
        if keep:
            ctx.save_for_backward(e, t, rows)
            ctx.shape, ctx.unique_rows = z.shape, unique_rows
        return np.asarray(loss / n, dtype=z.dtype)

    @staticmethod
    def backward(ctx, g):
        """dz = g·(softmax(z) − onehot(t))/n at the masked rows, 0 elsewhere.

        In blocks of the masked rows, on the pool where it pays: each block scales its
        probabilities and writes them into its own rows of dz. Rows that are unique write
        disjoint rows, so any thread count gives the same array; increasing rows (a split)
        also let each block zero the stretch of dz up to the next block's first row, so dz
        is written once, never first zeroed whole."""
        probs, t, rows = ctx.saved_tensors
        n, scale = probs.shape[0], g / probs.shape[0]
        if rows is not None and not ctx.unique_rows:  # an index mask may repeat a row
            dz = np.zeros(ctx.shape, dtype=probs.dtype)
            np.add.at(dz, rows, _scaled(probs, t, scale))
            return dz, None, None, None
        dz = np.empty(ctx.shape, dtype=probs.dtype)
        spans = rows is not None and _increasing(rows)
        if rows is not None and not spans:
            dz.fill(0)

        def block(s, e):
            if rows is None:
                np.multiply(probs[s:e], scale, out=dz[s:e])
                dz[s + np.arange(e - s), t[s:e]] -= scale
                return
            if spans:  # zero dz from this block's first row to the next block's
                dz[0 if s == 0 else rows[s]:len(dz) if e == n else rows[e]] = 0
            dz[rows[s:e]] = _scaled(probs[s:e], t[s:e], scale)
        if probs.size < kernels.tuning.MIN_PARALLEL_ELEMENTS:
            block(0, n)
        else:  # blocks at one thread too: each zeroes and fills a stretch still in cache
            kernels.run_blocks(block, kernels.row_blocks(n))
        if spans:  # zero outside the masked rows: the products below need not look
            kernels.mark_rows(dz, rows)
        return dz, None, None, None


def _row_max(a: np.ndarray) -> np.ndarray:
    """a.max(axis=1) for a 2-d `a` with at least one row and column, the same bits (NaN
    included), ~2.5x faster: numpy's axis-1 reduction pays ~40 ns of setup per row, a cost
    that dominates at a few classes (Cora's 7, arxiv's 40); `reduceat` over the flat rows
    does not."""
    n, c = a.shape
    return np.maximum.reduceat(a.reshape(-1), np.arange(0, n * c, c))


def _row_sum(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """a.sum(axis=1) into `out`, 4-6x faster for short rows (`_row_max`'s reason). Each row
    is summed by the same kernel wherever it sits, so row blocks give the one call's bits."""
    return np.einsum("ij->i", a, out=out)


def _scaled(probs: np.ndarray, t: np.ndarray, scale: Any) -> np.ndarray:
    """scale·(probs − onehot(t)) for the rows of `probs` and their targets `t`."""
    d = probs * scale
    d[np.arange(len(d)), t] -= scale
    return d


def cross_entropy(logits: Tensor, target: Any, mask: Any = None) -> Tensor:
    """Mean cross-entropy of `logits` (N, C) against integer `target` (N,) over the masked rows.

    Equals `nll_loss(logits.log_softmax(-1), target, mask)`, computed as one fused op.
    """
    return cross_entropy_at(logits, Targets.for_cross_entropy(target, mask, logits))


def cross_entropy_at(logits: Tensor, targets: Targets) -> Tensor:
    """`cross_entropy` on targets checked once against logits of this shape (`Targets`)."""
    return CrossEntropy.apply(logits, targets.target, targets.rows, targets.unique)


def _increasing(rows: np.ndarray) -> bool:
    """Strictly increasing rows (a split's sorted node ids) repeat none: one pass, no sort."""
    return bool(np.all(rows[1:] > rows[:-1]))


def _is_bool(mask: Any) -> bool:
    return np.asarray(mask.data if isinstance(mask, Tensor) else mask).dtype == bool


def nll_loss(log_probs: Tensor, target: Any, mask: Any = None) -> Tensor:
    """−(1/n) Σᵢ log_probs[i, tᵢ] over the n masked rows (inputs are log-probabilities)."""
    _check_logits(log_probs, "nll_loss")
    num_rows, num_classes = log_probs.shape
    rows = _rows(mask, num_rows, "nll_loss")
    t = _targets(target, rows, num_rows, num_classes, "nll_loss")
    rows = np.arange(num_rows) if rows is None else rows
    return log_probs[rows, t].sum() * (-1.0 / rows.size)


# ---------------------------------------------------------------- regression and binary


def mse_loss(pred: Tensor, target: Any) -> Tensor:
    """mean((pred − target)²); shapes must match (a silent broadcast is almost always a bug)."""
    target = target if isinstance(target, Tensor) else Tensor(target, dtype=pred.dtype)
    if pred.shape != target.shape:
        raise ShapeError(f"mse_loss: pred shape {pred.shape} != target shape {target.shape}")
    diff = pred - target
    return (diff * diff).mean()


class BCEWithLogits(Function):
    """loss = mean(max(x, 0) − x·y + log(1 + e^−|x|)), i.e. −[y log σ(x) + (1−y) log(1−σ(x))].

    Fused because the stable form's pieces (relu, abs) have kinks at x = 0 whose one-sided
    derivatives would give −y there instead of the true σ(0) − y = ½ − y.
    Backward: dx = g·(σ(x) − y)/N, dy = −g·x/N.
    """

    @staticmethod
    def forward(ctx, x, y):
        e = np.exp(-np.abs(x))
        loss = np.maximum(x, 0) - x * y + np.log1p(e)
        ctx.save_for_backward(x, y, e)
        return np.asarray(loss.mean(), dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        """dx = g·(σ(x) − y)/N, dy = −g·x/N."""
        x, y, e = ctx.saved_tensors
        scale = g / x.size
        need_x, need_y = ctx.needs_input_grad
        sig = np.where(x >= 0, 1 / (1 + e), e / (1 + e))  # σ(x) without overflow
        return ((sig - y) * scale if need_x else None, -x * scale if need_y else None)


def binary_cross_entropy_with_logits(logits: Tensor, target: Any) -> Tensor:
    """Mean binary cross-entropy of raw scores `logits` against targets in [0, 1] (same shape)."""
    target = target if isinstance(target, Tensor) else Tensor(target, dtype=logits.dtype)
    if logits.shape != target.shape:
        raise ShapeError(f"binary_cross_entropy_with_logits: logits shape {logits.shape} != "
                         f"target shape {target.shape}")
    if logits.size == 0:
        raise ShapeError("binary_cross_entropy_with_logits: empty input")
    return BCEWithLogits.apply(logits, target)


# ---------------------------------------------------------------- metrics


def accuracy(logits_or_pred: Any, target: Any, mask: Any = None) -> float:
    """Fraction of masked rows whose prediction equals the target, in [0, 1].

    A 2-d input (N, C) is scores and predicts its argmax; a 1-d input is predicted labels.
    """
    scores = np.asarray(logits_or_pred.data if isinstance(logits_or_pred, Tensor)
                        else logits_or_pred)
    return accuracy_at(scores, Targets.for_accuracy(target, mask, scores))


def accuracy_at(scores: np.ndarray, targets: Targets) -> float:
    """`accuracy` on targets checked once against scores of this shape (`Targets`)."""
    if targets.rows is not None:  # the masked rows first: argmax over them only
        scores = scores[targets.rows]
    pred = scores.argmax(axis=1) if scores.ndim == 2 else scores
    hits = pred == targets.target
    # the hits counted over their number: np.mean's value bit for bit, without its ~5 µs
    return float(np.count_nonzero(hits) / hits.size) if hits.size else float("nan")
