"""The bodies of the elementwise ops, in fixed row blocks on the pool (`pool.by_rows`).

Each function here is what an op's forward or backward computes, written once: the float
operations in the order of the plain numpy call, on block-sized slices of the rows, so the
result is bitwise the same at any thread count. Selects are made from max/min of the same
floats: numpy's `where` (or a ufunc's `where=` mask) on a random sign pattern costs about ten
times the arithmetic it chooses between. So LeakyReLU is max(x, slope·x) for 0 < slope ≤ 1
and its backward g·max([x > 0], slope); ELU is max(x, α·expm1(min(x, 0))) for 0 < α ≤ 1 and
its backward g·(min(elu(x), 0) + α). They give the select's floats, edges included (±0, ±inf,
NaN, subnormals: tests/engine/test_activations.py compares bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.kernels import dense
from mgsparse.kernels.buffers import output_array
from mgsparse.kernels.pool import by_rows


def add(a: Any, b: Any) -> np.ndarray:
    """a + b. A bias (a (N, C), b (C,), one dtype) and two arrays of one shape (≥ 2-d, one
    dtype) run by row blocks: row i of the sum reads row i of a (and of b) only, so the blocks
    give the one call's numbers. Anything else is numpy's broadcasting `np.add`."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype:
        if a.ndim == 2 and b.ndim == 1 and b.shape[0] == a.shape[1]:
            return by_rows(lambda o, a_: dense.add_rows(a_, b, o), np.empty_like(a), a)
        if a.ndim >= 2 and a.shape == b.shape:  # two layers' outputs (GraphSAGE's two terms)
            return by_rows(lambda o, a_, b_: np.add(a_, b_, out=o), np.empty_like(a), a, b)
    return np.add(a, b)


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a·b for a and b of one shape (b may be a bool mask), a new array by row blocks."""
    return by_rows(lambda o, a_, b_: np.multiply(a_, b_, out=o), np.empty_like(a), a, b)


def relu(x: np.ndarray, keep_mask: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """(max(x, 0), [x > 0]); the mask only when `keep_mask` (a pass with no backward keeps
    none). max, not x·mask: −∞·0 is NaN."""
    if not keep_mask:
        return by_rows(lambda o, x_: np.maximum(x_, 0, out=o), np.empty_like(x), x), None
    mask = np.empty(x.shape, dtype=bool)

    def rows(out, mask_, x_):
        np.greater(x_, 0, out=mask_)
        np.maximum(x_, 0, out=out)
    return by_rows(rows, np.empty_like(x), mask, x), mask


def masked_scale(x: np.ndarray, keep: np.ndarray, scale: float, out: Any = None) -> np.ndarray:
    """x·scale·keep (inverted dropout and its backward) in two in-place passes, no float mask;
    scale in x's dtype. `out` as `buffers.output_array`'s: None, an array or a `Buffers`."""
    scale = x.dtype.type(scale)

    def rows(o, x_, k):
        np.multiply(x_, scale, out=o)
        o *= k
    return by_rows(rows, output_array(out, x), x, keep)


def relu_dropout(x: np.ndarray, keep: np.ndarray, scale: float, out: Any = None) -> np.ndarray:
    """max(x, 0)·scale·keep in the order relu then dropout compute it (the same floats), one
    pass and one array; `out` as `masked_scale`'s."""
    scale = x.dtype.type(scale)

    def rows(o, x_, k):
        np.maximum(x_, 0, out=o)
        o *= scale
        o *= k
    return by_rows(rows, output_array(out, x), x, keep)


def relu_dropout_backward(g: np.ndarray, out: np.ndarray, scale: float) -> np.ndarray:
    """g·scale·[out > 0]: out > 0 exactly where x > 0 and the entry was kept."""
    scale = g.dtype.type(scale)

    def rows(dx, g_, o):
        np.multiply(g_, scale, out=dx)
        dx *= o > 0
    return by_rows(rows, np.empty_like(g), g, out)


def leaky_relu_into(out: np.ndarray, x: np.ndarray, slope: float) -> np.ndarray:
    """out = x if x > 0 else slope·x (`out` may be x). For 0 < slope ≤ 1 that is
    max(x, slope·x), the same floats without a select."""
    if 0 < slope <= 1:
        return np.maximum(x, np.multiply(x, slope), out=out)
    negative = ~np.greater(x, 0)
    if out is not x:
        np.copyto(out, x)
    return np.multiply(out, slope, out=out, where=negative)


def scale_by_sign(out: np.ndarray, g: np.ndarray, positive: np.ndarray,
                  slope: float) -> np.ndarray:
    """out = g if positive else slope·g, LeakyReLU's backward (`out` may be g): g times a
    factor built without a select, max(positive, slope), exactly 1 or slope for 0 < slope ≤ 1."""
    if 0 < slope <= 1:
        factor = np.maximum(positive, g.dtype.type(slope), dtype=g.dtype)
        return np.multiply(g, factor, out=out)
    if out is not g:
        np.copyto(out, g)
    return np.multiply(out, slope, out=out, where=~positive)


def leaky_relu(x: np.ndarray, slope: float) -> tuple[np.ndarray, np.ndarray]:
    """(x if x > 0 else slope·x, [x > 0])."""
    mask = np.empty(x.shape, dtype=bool)

    def rows(out, mask_, x_):
        np.greater(x_, 0, out=mask_)
        leaky_relu_into(out, x_, slope)
    return by_rows(rows, np.empty_like(x), mask, x), mask


def leaky_relu_backward(g: np.ndarray, positive: np.ndarray, slope: float) -> np.ndarray:
    """g·(1 if x > 0 else slope), from the forward's mask."""
    return by_rows(lambda dx, g_, m: scale_by_sign(dx, g_, m, slope), np.empty_like(g), g,
                   positive)


def elu(x: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray | None]:
    """(x if x > 0 else α·expm1(x), [x > 0] or None): the mask only for α ≠ 1, where the
    backward needs it. For 0 < α ≤ 1 the select is a max: x ≤ α·expm1(x) for x ≤ 0, and
    α·expm1(0) = 0 < x for x > 0."""
    mask = np.empty(x.shape, dtype=bool) if alpha != 1 else None

    def rows(out, x_, *mask_):
        if mask_:
            np.greater(x_, 0, out=mask_[0])
        np.minimum(x_, 0, out=out)
        np.expm1(out, out=out)
        if alpha != 1:
            out *= alpha
        if 0 < alpha <= 1:
            np.maximum(x_, out, out=out)
        else:
            np.copyto(out, np.where(x_ > 0, x_, out))
    return by_rows(rows, np.empty_like(x), x, *([mask] if mask is not None else [])), mask


def elu_backward(g: np.ndarray, mask: np.ndarray | None, out: np.ndarray,
                 alpha: float) -> np.ndarray:
    """g·(1 if x > 0 else elu(x) + α), from the forward's output and mask.

    For x > 0 elu(x) = x > 0, so min(elu(x), 0) + α is α there and elu(x) + α elsewhere:
    with α = 1 that is the whole factor, no mask read; with 0 < α < 1 the mask lifts the
    x > 0 entries to 1 by a max (elu(x) + α > 0 ≥ mask elsewhere)."""
    def rows(dx, g_, o, *m):
        if 0 < alpha <= 1:
            np.minimum(o, 0, out=dx)
            dx += alpha
            if m:
                np.maximum(dx, m[0], out=dx)
        else:
            np.copyto(dx, np.where(m[0], 1, o + alpha))
        dx *= g_
    return by_rows(rows, np.empty_like(g), g, out, *([mask] if mask is not None else []))


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1/(1 + e^-x), from e = exp(-|x|) on both sides (1/(1+e) for x ≥ 0, e/(1+e) below):
    1/(1+e^-x) itself overflows for very negative x, exp(-|x|) never does."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))
