"""Fused ops: one node where the composite would allocate a full-size temporary per step.

`linear(x, w, b)` is x·W + b. As a composite it is a MatMul and an Add, and the Add writes a
second (N, F_out) array: on an ogbn-arxiv-shaped graph (169,343 rows, 40 classes) a fresh
27 MB array every forward, paid in page faults. Here the bias is added in place into the
product's own output, with the same arithmetic (the products, then + b), so the result and
the gradients are bitwise those of the composite.
"""

from __future__ import annotations

from typing import Any

from mgsparse.engine import parallel
from mgsparse.engine.tensor import Function, Tensor
from mgsparse.errors import ShapeError


class Affine(Function):
    @staticmethod
    def forward(ctx, x, w, b):
        """out = x·W + b for x (N, F_in), W (F_in, F_out), b (F_out,); b added in place."""
        ctx.save_for_backward(x, w)
        try:
            out = parallel.matmul(x, w)  # row blocks on every core, as MatMul
        except ValueError:
            raise ShapeError(f"linear: shapes {x.shape} and {w.shape} are not aligned") from None
        out += b
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = G·Wᵀ, dW = xᵀ·G, db = 1ᵀ·G (the composite's kernels, so bitwise the same)."""
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        return (parallel.matmul(g, w.T) if need_x else None,
                parallel.matmul_tn(x, g) if need_w else None,
                parallel.column_sums(g) if need_b else None)


def linear(x: Any, w: Tensor, b: Tensor | None = None) -> Any:
    """x·W + b: fused for a 2-d float Tensor x, 2-d W and 1-d b of W's width; otherwise (no
    bias, a sparse x, batched or 1-d operands) the composite `x @ w + b`."""
    fusable = (b is not None and isinstance(x, Tensor) and x.ndim == 2 and w.ndim == 2
               and b.shape == (w.shape[1],) and x.dtype.kind == "f")
    if fusable:
        return Affine.apply(x, w, b)
    out = x @ w
    return out if b is None else out + b
