"""The primitive ops: each a `Function` with its forward and backward side by side.

Derived ops (sub, div, sqrt, mean, softmax, log_softmax, dropout) are written in
`Tensor` through these primitives and need no backward of their own; the activations
(ReLU, LeakyReLU, ELU, sigmoid, tanh) are in `activations.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mgsparse import kernels
from mgsparse.engine.masks import Draw, drawn, kept_scale  # noqa: F401  (Tensor.dropout's)
from mgsparse.engine.tensor import Function
from mgsparse.errors import ShapeError


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


def _broadcasting(op: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """op(a, b), with numpy's broadcast failure turned into a ShapeError naming both shapes.

    Trying the op is cheaper than `np.broadcast_shapes` up front, which dominated small ops.
    """
    try:
        return op(a, b)
    except ValueError:
        raise ShapeError(
            f"{op.__name__}: shapes {a.shape} and {b.shape} do not broadcast"
        ) from None


# ---------------------------------------------------------------- binary elementwise


class Add(Function):
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        return _broadcasting(kernels.add, a, b)  # a bias or two equal shapes: by row blocks

    def backward(ctx, g):
        """da = g, db = g (each summed back to its input's shape)."""
        (sa, sb), (need_a, need_b) = ctx.shapes, ctx.needs_input_grad
        return (unbroadcast(g, sa) if need_a else None, unbroadcast(g, sb) if need_b else None)


class Mul(Function):
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _broadcasting(np.multiply, a, b)

    def backward(ctx, g):
        """da = g·b, db = g·a."""
        (a, b), (need_a, need_b) = ctx.saved_tensors, ctx.needs_input_grad
        return (unbroadcast(g * b, a.shape) if need_a else None,
                unbroadcast(g * a, b.shape) if need_b else None)


# ---------------------------------------------------------------- unary elementwise


class Neg(Function):
    def forward(ctx, x):
        return -x

    def backward(ctx, g):
        """dx = -g."""
        return -g


class Pow(Function):
    def forward(ctx, x, p):
        ctx.save_for_backward(x)
        ctx.p = p
        return x**p

    def backward(ctx, g):
        """dx = g·p·x^(p-1), for a constant exponent p (0 when p = 0, even at x = 0, as torch)."""
        (x,) = ctx.saved_tensors
        if ctx.p == 0:
            return np.zeros_like(x), None
        return g * ctx.p * x ** (ctx.p - 1), None


class RPow(Function):
    """base ** x for a constant base: exact at integer x for a negative base, 0 ** 0 = 1."""

    def forward(ctx, x, base):
        with np.errstate(divide="ignore", invalid="ignore"):  # 0^-1 = ∞, (-2)^0.5 = NaN
            out = np.power(x.dtype.type(base), x)
        ctx.save_for_backward(out)
        ctx.base = base
        return out

    def backward(ctx, g):
        """dx = g·base^x·ln(base); 0 where base = 0 and x ≥ 0 (torch's rule: no 0·∞)."""
        (out,) = ctx.saved_tensors
        with np.errstate(invalid="ignore"):  # ln of a negative base: NaN, as in torch
            if ctx.base == 0:  # x ≥ 0 gives 0^x ∈ {0, 1}, x < 0 gives ∞
                return np.where(np.isinf(out), g * out * -np.inf, 0).astype(out.dtype), None
            return g * out * out.dtype.type(np.log(ctx.base)), None


class Exp(Function):
    def forward(ctx, x):
        out = np.exp(x)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, g):
        """dx = g·exp(x)."""
        return g * ctx.saved_tensors[0]


class Log(Function):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.log(x)

    def backward(ctx, g):
        """dx = g / x."""
        return g / ctx.saved_tensors[0]


class Abs(Function):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.abs(x)

    def backward(ctx, g):
        """dx = g·sign(x) (0 at 0)."""
        return g * np.sign(ctx.saved_tensors[0])


class Clip(Function):
    def forward(ctx, x, lo, hi):
        lo = -np.inf if lo is None else lo
        hi = np.inf if hi is None else hi
        ctx.save_for_backward((x >= lo) & (x <= hi))
        return np.clip(x, lo, hi)

    def backward(ctx, g):
        """dx = g inside [lo, hi], 0 where clipped."""
        return g * ctx.saved_tensors[0], None, None


class Dropout(Function):
    def forward(ctx, x, keep, scale, out=None):
        """out = x·keep·scale; `keep` a mask or a `masks.Draw`, `out` a buffer or a `Buffers`."""
        keep = drawn(keep, x.shape)
        ctx.save_for_backward(keep)  # bool: a quarter of a float32 multiplier's bytes
        ctx.scale = scale
        return kernels.masked_scale(x, keep, scale, out)

    def backward(ctx, g):
        """dx = g·keep·scale, scale = 1/P(keep)."""
        return kernels.masked_scale(g, ctx.saved_tensors[0], ctx.scale), None, None, None


class Cast(Function):
    def forward(ctx, x, dtype):
        ctx.dtype, ctx.out_dtype = x.dtype, dtype
        return x.astype(dtype)

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
    def forward(ctx, x, axis, keepdims):
        ctx.shape, ctx.axis = x.shape, axis
        return np.asarray(x.sum(axis=axis, keepdims=keepdims))

    def backward(ctx, g):
        """dx = g broadcast back over the summed axes."""
        g = g.reshape(_keepdims_shape(ctx.shape, ctx.axis))
        return np.broadcast_to(g, ctx.shape), None, None


class Max(Function):
    def forward(ctx, x, axis, keepdims):
        out = x.max(axis=axis, keepdims=True)
        ctx.save_for_backward(x == out)
        ctx.axis = axis
        return np.asarray(out if keepdims else np.squeeze(out, axis=axis))

    def backward(ctx, g):
        """dx = g at the maxima, shared equally between ties, 0 elsewhere."""
        (is_max,) = ctx.saved_tensors
        g = g.reshape(_keepdims_shape(is_max.shape, ctx.axis))
        return g * is_max / is_max.sum(axis=ctx.axis, keepdims=True), None, None


# ---------------------------------------------------------------- matmul


class MatMul(Function):
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        try:
            return kernels.matmul(a, b)  # 2-d × 2-d in row blocks on every core
        except ValueError:
            raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} are not aligned") from None

    def backward(ctx, g):
        """da = g·bᵀ, db = aᵀ·g (1-d operands promoted, batch axes summed back)."""
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        if a.ndim == 2 and b.ndim == 2:  # x·W, the hot path: row blocks, thread-count exact
            return (kernels.same_rows(kernels.matmul(g, b.T), g) if need_a else None,
                    kernels.matmul_tn(a, g) if need_b else None)
        return _promoted_grads(a, b, g, need_a, need_b)


def _promoted_grads(a: np.ndarray, b: np.ndarray, g: np.ndarray, need_a: bool,
                    need_b: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """MatMul's gradients for 1-d or batched operands: numpy's promotion of a 1-d operand
    (a row vector on the left, a column on the right) undone, broadcast batch axes summed."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    # g in the promoted (..., n, m) shape: restores the axes numpy dropped for 1-d operands
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    g2 = g.reshape(batch + (a2.shape[-2], b2.shape[-1]))
    da = unbroadcast(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape) if need_a else None
    db = unbroadcast(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape) if need_b else None
    return da, db
