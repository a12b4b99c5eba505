"""The activations: each a `Function`, forward and backward side by side, computed as
max/min of the same floats where numpy would need a select.

numpy's `where` (or a ufunc's `where=` mask) on a random sign pattern costs about ten times
the arithmetic it chooses between. So LeakyReLU is max(x, slope·x) for 0 < slope ≤ 1 and its
backward g·max([x > 0], slope); ELU is max(x, α·expm1(min(x, 0))) for 0 < α ≤ 1 and its
backward g·(min(elu(x), 0) + α). They give the select's floats, edges included (±0, ±inf,
NaN, subnormals: tests/engine/test_activations.py compares bits). GAT's fused attention
softmax (`sparse/graph.py`) uses the two helpers. Large arrays run in row blocks on the
pool (`kernels.by_rows`), bitwise the same for any thread count.
"""

from __future__ import annotations

import numpy as np

from mgsparse import kernels
from mgsparse.engine.masks import drawn
from mgsparse.engine.tensor import Function
from mgsparse.kernels import output_array


class Relu(Function):
    @staticmethod
    def forward(ctx, x):
        if not ctx.needs_input_grad[0]:  # no backward (an evaluation pass): no mask to keep
            return kernels.by_rows(lambda out, x_: np.maximum(x_, 0, out=out),
                                    np.empty_like(x), x)
        mask = np.empty(x.shape, dtype=bool)

        def rows(out, mask_, x_):
            np.greater(x_, 0, out=mask_)
            np.maximum(x_, 0, out=out)  # not x·mask: −∞·0 is NaN
        out = kernels.by_rows(rows, np.empty_like(x), mask, x)
        ctx.save_for_backward(mask)
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·[x > 0]."""
        return kernels.by_rows(lambda dx, g_, m: np.multiply(g_, m, out=dx),
                                np.empty_like(g), g, ctx.saved_tensors[0])


class ReluDropout(Function):
    """relu(x) then inverted dropout, as one op: a hidden layer's activation followed by the
    next layer's dropout (`nn.stack`). out = max(x, 0)·scale·keep, computed in the order
    Relu then Dropout compute it, so the same floats; one (N, F) array and one pass fewer,
    and no mask kept: out > 0 exactly where x > 0 and the entry was kept, which is where both
    derivatives are nonzero."""

    @staticmethod
    def forward(ctx, x, keep, scale, out=None):
        """`keep` and `out` as Dropout's: a mask or a `masks.Draw`; a buffer or a pool."""
        keep = drawn(keep, x.shape)
        ctx.scale = scale = x.dtype.type(scale)

        def rows(o, x_, k):
            np.maximum(x_, 0, out=o)
            o *= scale
            o *= k
        out = kernels.by_rows(rows, output_array(out, x), x, keep)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·scale·[out > 0] (relu' · dropout': keep·[x > 0]·scale)."""
        scale = ctx.scale

        def rows(dx, g_, o):
            np.multiply(g_, scale, out=dx)
            dx *= o > 0
        dx = kernels.by_rows(rows, np.empty_like(g), g, ctx.saved_tensors[0])
        return kernels.same_rows(dx, g), None, None, None


class LeakyRelu(Function):
    @staticmethod
    def forward(ctx, x, slope):
        mask = np.empty(x.shape, dtype=bool)

        def rows(out, mask_, x_):
            np.greater(x_, 0, out=mask_)
            leaky_relu_into(out, x_, slope)
        out = kernels.by_rows(rows, np.empty_like(x), mask, x)
        ctx.save_for_backward(mask)
        ctx.slope = slope
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·(1 if x > 0 else slope)."""
        slope = ctx.slope
        return kernels.by_rows(lambda dx, g_, m: scale_by_sign(dx, g_, m, slope),
                                np.empty_like(g), g, ctx.saved_tensors[0]), None


class Elu(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        mask = np.empty(x.shape, dtype=bool) if alpha != 1 else None

        def rows(out, x_, *mask_):
            if mask_:
                np.greater(x_, 0, out=mask_[0])
            np.minimum(x_, 0, out=out)
            np.expm1(out, out=out)
            if alpha != 1:
                out *= alpha
            if 0 < alpha <= 1:  # x ≤ α·expm1(x) for x ≤ 0, and α·expm1(0) = 0 < x for x > 0
                np.maximum(x_, out, out=out)
            else:
                np.copyto(out, np.where(x_ > 0, x_, out))
        out = kernels.by_rows(rows, np.empty_like(x), x, *([mask] if mask is not None else []))
        ctx.save_for_backward(mask, out)
        ctx.alpha = alpha
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·(1 if x > 0 else elu(x) + alpha).

        For x > 0 elu(x) = x > 0, so min(elu(x), 0) + α is α there and elu(x) + α elsewhere:
        with α = 1 that is the whole factor, no mask read; with 0 < α < 1 the mask lifts the
        x > 0 entries to 1 by a max (elu(x) + α > 0 ≥ mask elsewhere)."""
        mask, out = ctx.saved_tensors
        alpha = ctx.alpha

        def rows(dx, g_, o, *m):
            if 0 < alpha <= 1:
                np.minimum(o, 0, out=dx)
                dx += alpha
                if m:
                    np.maximum(dx, m[0], out=dx)
            else:
                np.copyto(dx, np.where(m[0], 1, o + alpha))
            dx *= g_
        return kernels.by_rows(rows, np.empty_like(g), g, out,
                                *([mask] if mask is not None else [])), None


def leaky_relu_into(out: np.ndarray, x: np.ndarray, slope: float) -> np.ndarray:
    """out = x if x > 0 else slope·x (`out` may be x). For 0 < slope ≤ 1 that is
    max(x, slope·x), the same floats without a select: numpy's `where` (or a `where=` mask)
    on a random sign pattern costs about ten times the arithmetic."""
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


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        # 1/(1+e^-x) overflows for very negative x; exp(-|x|) never does.
        e = np.exp(-np.abs(x))
        out = np.where(x >= 0, 1 / (1 + e), e / (1 + e))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·s·(1 - s)."""
        s = ctx.saved_tensors[0]
        return g * s * (1 - s)


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·(1 - tanh²x)."""
        t = ctx.saved_tensors[0]
        return g * (1 - t * t)
