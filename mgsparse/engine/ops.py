"""The primitive ops: each a `Function` with its forward and backward side by side.

Derived ops (sub, div, sqrt, mean, softmax, log_softmax, dropout) are written in
`Tensor` through these primitives and need no backward of their own; the activations
(ReLU, LeakyReLU, ELU, sigmoid, tanh) are in `activations.py`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse import kernels
from mgsparse.engine.masks import Draw, drawn, kept_scale  # noqa: F401  (Tensor.dropout's)
from mgsparse.engine.tensor import Function
from mgsparse.errors import ShapeError
from mgsparse.kernels import output_array


def unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum `grad` back to `shape`, undoing numpy broadcasting (prepended and stretched axes)."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra == 1 and grad.ndim == 2 and grad.dtype.kind == "f":  # a bias gradient
        grad = kernels.column_sums(grad)
    elif extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def _broadcasting(ufunc: np.ufunc, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ufunc(a, b), with numpy's broadcast failure turned into a ShapeError naming both shapes.

    Trying the op is cheaper than `np.broadcast_shapes` up front, which dominated small ops.
    """
    try:
        return ufunc(a, b)
    except ValueError:
        raise ShapeError(
            f"{ufunc.__name__}: shapes {a.shape} and {b.shape} do not broadcast"
        ) from None


def _row_broadcast(a: Any, b: Any) -> bool:
    """b (C,) added to every row of a 2-d a (N, C) of its dtype: a bias, row i of the sum
    reading row i of a only, so row blocks give the one call's numbers."""
    return (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and b.ndim == 1
            and b.shape[0] == a.shape[1] and a.dtype == b.dtype)


def _same_shape(a: Any, b: Any) -> bool:
    """a and b of one shape and dtype, at least 2-d: row i of a + b reads row i of each only,
    so row blocks give the one call's numbers."""
    return (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim >= 2
            and a.shape == b.shape and a.dtype == b.dtype)


# ---------------------------------------------------------------- binary elementwise


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        if _row_broadcast(a, b):  # a bias: row blocks on the pool where it pays
            return kernels.by_rows(lambda o, a_: kernels.add_rows(a_, b, o), np.empty_like(a), a)
        if _same_shape(a, b):  # two layers' outputs (GraphSAGE's neighbour and root terms)
            return kernels.by_rows(lambda o, a_, b_: np.add(a_, b_, out=o), np.empty_like(a),
                                    a, b)
        return _broadcasting(np.add, a, b)

    @staticmethod
    def backward(ctx, g):
        """da = g, db = g (each summed back to its input's shape)."""
        sa, sb = ctx.shapes
        need_a, need_b = ctx.needs_input_grad
        return (unbroadcast(g, sa) if need_a else None, unbroadcast(g, sb) if need_b else None)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _broadcasting(np.multiply, a, b)

    @staticmethod
    def backward(ctx, g):
        """da = g·b, db = g·a."""
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (
            unbroadcast(g * b, a.shape) if need_a else None,
            unbroadcast(g * a, b.shape) if need_b else None,
        )


# ---------------------------------------------------------------- unary elementwise


class Neg(Function):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        """dx = -g."""
        return -g


class Pow(Function):
    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x)
        ctx.p = p
        return x**p

    @staticmethod
    def backward(ctx, g):
        """dx = g·p·x^(p-1), for a constant exponent p (0 when p = 0, even at x = 0, as torch)."""
        (x,) = ctx.saved_tensors
        if ctx.p == 0:
            return np.zeros_like(x), None
        return g * ctx.p * x ** (ctx.p - 1), None


class RPow(Function):
    """base ** x for a constant base: exact at integer x for a negative base, 0 ** 0 = 1."""

    @staticmethod
    def forward(ctx, x, base):
        with np.errstate(divide="ignore", invalid="ignore"):  # 0^-1 = ∞, (-2)^0.5 = NaN
            out = np.power(x.dtype.type(base), x)
        ctx.save_for_backward(out)
        ctx.base = base
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·base^x·ln(base); 0 where base = 0 and x ≥ 0 (torch's rule: no 0·∞)."""
        (out,) = ctx.saved_tensors
        with np.errstate(invalid="ignore"):  # ln of a negative base: NaN, as in torch
            if ctx.base == 0:  # x ≥ 0 gives 0^x ∈ {0, 1}, x < 0 gives ∞
                return np.where(np.isinf(out), g * out * -np.inf, 0).astype(out.dtype), None
            return g * out * out.dtype.type(np.log(ctx.base)), None


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        out = np.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = g·exp(x)."""
        return g * ctx.saved_tensors[0]


class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.log(x)

    @staticmethod
    def backward(ctx, g):
        """dx = g / x."""
        return g / ctx.saved_tensors[0]


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.abs(x)

    @staticmethod
    def backward(ctx, g):
        """dx = g·sign(x) (0 at 0)."""
        return g * np.sign(ctx.saved_tensors[0])


class Clip(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        lo = -np.inf if lo is None else lo
        hi = np.inf if hi is None else hi
        ctx.save_for_backward((x >= lo) & (x <= hi))
        return np.clip(x, lo, hi)

    @staticmethod
    def backward(ctx, g):
        """dx = g inside [lo, hi], 0 where clipped."""
        return g * ctx.saved_tensors[0], None, None


class Dropout(Function):
    @staticmethod
    def forward(ctx, x, keep, scale, out=None):
        """out = x·keep·scale. `keep`: a bool mask of x's shape or a `masks.Draw`, drawn here;
        `out`: a free buffer of x's shape to write into, or a `Buffers` to take one from."""
        keep = drawn(keep, x.shape)
        ctx.save_for_backward(keep)  # bool: a quarter of a float32 multiplier's bytes
        ctx.scale = scale = x.dtype.type(scale)
        return kernels.by_rows(lambda o, x_, k: _masked_scale(o, x_, k, scale),
                                output_array(out, x), x, keep)

    @staticmethod
    def backward(ctx, g):
        """dx = g·keep·scale, scale = 1/P(keep)."""
        scale = ctx.scale
        return kernels.by_rows(lambda o, g_, k: _masked_scale(o, g_, k, scale),
                                np.empty_like(g), g, ctx.saved_tensors[0]), None, None, None


def _masked_scale(out: np.ndarray, x: np.ndarray, keep: np.ndarray, scale) -> None:
    """out = x·scale·keep in two in-place passes (no float mask)."""
    np.multiply(x, scale, out=out)
    out *= keep


class Cast(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype, ctx.out_dtype = x.dtype, dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        """dx = g, cast back to the input's dtype."""
        return g.astype(ctx.dtype), None


# ---------------------------------------------------------------- reductions


def _keepdims_shape(shape: tuple, axis) -> tuple:
    if axis is None:
        return (1,) * len(shape)
    axes = {a % len(shape) for a in np.atleast_1d(axis)}
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class Sum(Function):
    @staticmethod
    def forward(ctx, x, axis, keepdims):
        ctx.shape, ctx.axis = x.shape, axis
        return np.asarray(x.sum(axis=axis, keepdims=keepdims))

    @staticmethod
    def backward(ctx, g):
        """dx = g broadcast back over the summed axes."""
        g = g.reshape(_keepdims_shape(ctx.shape, ctx.axis))
        return np.broadcast_to(g, ctx.shape), None, None


class Max(Function):
    @staticmethod
    def forward(ctx, x, axis, keepdims):
        out = x.max(axis=axis, keepdims=True)
        ctx.save_for_backward(x == out)
        ctx.axis = axis
        return np.asarray(out if keepdims else np.squeeze(out, axis=axis))

    @staticmethod
    def backward(ctx, g):
        """dx = g at the maxima, shared equally between ties, 0 elsewhere."""
        (is_max,) = ctx.saved_tensors
        g = g.reshape(_keepdims_shape(is_max.shape, ctx.axis))
        return g * is_max / is_max.sum(axis=ctx.axis, keepdims=True), None, None


# ---------------------------------------------------------------- matmul


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        try:
            return kernels.matmul(a, b)  # 2-d × 2-d in row blocks on every core
        except ValueError:
            raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} are not aligned") from None

    @staticmethod
    def backward(ctx, g):
        """da = g·bᵀ, db = aᵀ·g (1-d operands promoted, batch axes summed back)."""
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        if a.ndim == 2 and b.ndim == 2:  # x·W, the hot path: row blocks, thread-count exact
            return (kernels.same_rows(kernels.matmul(g, b.T), g) if need_a else None,
                    kernels.matmul_tn(a, g) if need_b else None)
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        # g in the promoted (..., n, m) shape: restores the axes numpy dropped for 1-d operands
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        g2 = g.reshape(batch + (a2.shape[-2], b2.shape[-1]))
        da = unbroadcast(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape) if need_a else None
        db = unbroadcast(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape) if need_b else None
        return da, db
