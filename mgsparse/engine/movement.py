"""Movement ops: reshape, transpose, indexing, concatenation and stacking.

They move or copy entries without arithmetic, so each backward routes the gradient back to
where the entries came from: the inverse reshape or permutation, a scatter-add into the
indexed positions, a split along the joined axis.
"""

from __future__ import annotations

import numpy as np

from mgsparse import kernels
from mgsparse.engine.tensor import Function
from mgsparse.errors import ShapeError


class Reshape(Function):
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise ShapeError(f"reshape: cannot reshape {x.shape} into {shape}") from None

    def backward(ctx, g):
        """dx = g reshaped back."""
        return g.reshape(ctx.shape), None


class Transpose(Function):
    def forward(ctx, x, axes):
        try:
            out = x.transpose(axes)
        except (ValueError, TypeError):
            raise ShapeError(f"transpose: axes {axes} do not permute shape {x.shape}") from None
        # negative axes are normalised so that argsort gives the inverse permutation
        ctx.axes = None if axes is None else tuple(a % x.ndim for a in axes)
        return out

    def backward(ctx, g):
        """dx = g with the inverse permutation."""
        inverse = None if ctx.axes is None else tuple(np.argsort(ctx.axes))
        return g.transpose(inverse), None


def _is_basic_index(idx) -> bool:
    """Slices, ints, None and Ellipsis select each element at most once."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    return all(isinstance(p, (slice, int, np.integer, type(None), type(Ellipsis))) for p in parts)


def _is_mask_index(idx) -> bool:
    return isinstance(idx, np.ndarray) and idx.dtype == bool


class GetItem(Function):
    def forward(ctx, x, idx):
        ctx.shape, ctx.dtype, ctx.idx = x.shape, x.dtype, idx
        return np.asarray(x[idx])

    def backward(ctx, g):
        """dx = zeros with g scattered (added) back to the gathered positions."""
        return _scattered(g, ctx.idx, ctx.shape, ctx.dtype), None


def _scattered(g: np.ndarray, idx, shape: tuple, dtype) -> np.ndarray:
    """zeros(shape) with g added at `idx`: assigned where each position is reached at most
    once, `np.add.at` where repeated indices must sum; its rows recorded where few."""
    dx = np.zeros(shape, dtype=dtype)
    if _is_basic_index(idx) or _is_mask_index(idx):
        dx[idx] = g
    else:
        np.add.at(dx, idx, g)
    rows = _rows_written(idx, shape, g)
    return dx if rows is None else kernels.mark_rows(dx, rows)


def _rows_written(idx, shape: tuple, g: np.ndarray) -> np.ndarray | None:
    """The rows of GetItem's dx that g reaches, where they are few and cheap to name (the
    rows of a node-level output picked for a loss, `out[train]`; a block of rows or columns of
    a gradient whose own rows are recorded), for `kernels.sparse_rows`; else None."""
    if len(shape) < 1 or shape[0] < kernels.tuning.MIN_BLOCK_ROWS:
        return None
    n, few = shape[0], kernels.tuning.SPARSE_ROWS_MAX * shape[0]
    if isinstance(idx, np.ndarray) and idx.ndim == 1:  # rows picked along axis 0
        if idx.dtype == bool:
            return np.flatnonzero(idx) if idx.shape == (n,) and idx.sum() <= few else None
        if idx.dtype.kind in "iu" and len(idx) <= few:
            return np.unique(idx % n)
        return None
    first = idx[0] if isinstance(idx, tuple) and idx else idx
    known = kernels.known_rows(g)
    if known is None or not isinstance(first, slice) or first.step not in (None, 1):
        return None
    start = first.indices(n)[0]
    return known + start  # rows start.. of dx are g's rows, in order


class Concatenate(Function):
    def forward(ctx, axis, *xs):
        out = _joined(np.concatenate, "concatenate", axis, xs)
        ctx.axis = axis
        ctx.splits = np.cumsum([x.shape[axis] for x in xs])[:-1]
        return out

    def backward(ctx, g):
        """dx_i = the slice of g that x_i filled."""
        return (None, *np.split(g, ctx.splits, axis=ctx.axis))


class Stack(Function):
    def forward(ctx, axis, *xs):
        ctx.axis = axis
        return _joined(np.stack, "stack", axis, xs)

    def backward(ctx, g):
        """dx_i = g[..., i, ...] along the stacked axis."""
        return (None, *(np.take(g, i, axis=ctx.axis) for i in range(g.shape[ctx.axis])))


def _joined(join, name: str, axis: int, xs: tuple) -> np.ndarray:
    """join(xs, axis=axis), numpy's refusal turned into a ShapeError naming every shape."""
    try:
        return join(xs, axis=axis)
    except ValueError as e:
        shapes = ", ".join(str(x.shape) for x in xs)
        raise ShapeError(f"{name} along axis {axis}: shapes {shapes} ({e})") from None
