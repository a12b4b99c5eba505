"""Dense layers: `Linear` (Glorot init), `Dropout` and the activations, plus the `glorot_` initialiser."""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse import kernels
from mgsparse.engine import Function, Tensor
from mgsparse.engine.masks import Draw, check_probability, drawn, kept_scale
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.module import Module, Parameter


def glorot_(shape: tuple[int, ...], rng: np.random.Generator | None = None,
            dtype: Any = np.float32, gain: float = 1.0) -> np.ndarray:
    """A fresh array drawn from Glorot/Xavier uniform: U(−a, a), a = gain·√(6 / (fan_in + fan_out)).

    Keeps the variance of activations and of gradients about constant from layer to layer
    (Glorot & Bengio, 2010). fan_in, fan_out are the last two axes (`(in, out)` for a
    weight used as `x @ W`; a 1-d shape uses its length for both). Sampled in float64 and
    then cast, so the same generator gives the same numbers in float32 and float64.
    """
    shape = tuple(int(n) for n in shape)
    if not shape or min(shape) < 1:
        raise HyperparameterError(f"glorot_: shape must have positive sizes, got {shape}")
    fan_in, fan_out = (shape[0], shape[0]) if len(shape) == 1 else shape[-2:]
    bound = gain * np.sqrt(6.0 / (fan_in + fan_out))
    rng = rng if rng is not None else np.random.default_rng()
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


class LinearOp(Function):
    """y = x·W + b for a dense x (N, in): the bias added in place into the product's own fresh
    output, one graph node and one (N, out) array fewer than the product and a broadcast add.
    Computes the same float operations in the same order as `x @ W + b`, bit for bit."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        try:
            return kernels.matmul(x, w, b)
        except ValueError:
            raise ShapeError(f"Linear: input {x.shape} does not fit weight {w.shape}") from None

    @staticmethod
    def backward(ctx, g):
        """dx = g·Wᵀ, dW = xᵀ·g, db = Σ_rows g."""
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        return (kernels.same_rows(kernels.matmul(g, w.T), g) if need_x else None,
                kernels.matmul_tn(x, g) if need_w else None,
                kernels.column_sums(g) if need_b else None)


class DropoutLinearOp(Function):
    """y = (x·keep·scale)·W: an input's inverted dropout and the product that reads it, as one
    op. The dropped copy of x is never stored: rows of it are made a cache's worth at a time
    for the product, and again for the backward's xᵀ-product, which reads x and the byte mask
    instead of a second (N, F) float array (an arxiv-sized input: 87 MB written and read twice
    fewer per step). Each dropped row is x·scale·keep as Dropout computes it, so dW and dx are
    the floats of `x.dropout(...) @ W`; y's rows agree with it to BLAS's rounding (a row's last
    bit may follow the row count of the BLAS call it falls in), the same at any thread count.

    Backward: dW = (x·keep·scale)ᵀ·g, dx = (g·Wᵀ)·scale·keep."""

    @staticmethod
    def forward(ctx, x, keep, scale, w):
        """`keep`: a bool mask of x's shape or a `masks.Draw`, drawn here (as Dropout's)."""
        keep = drawn(keep, x.shape)
        ctx.save_for_backward(x, keep, w)
        ctx.scale = scale = x.dtype.type(scale)
        try:
            return kernels.matmul_computed(_dropped_rows(x, keep, scale), x.shape, w)
        except ValueError:
            raise ShapeError(f"Linear: input {x.shape} does not fit weight {w.shape}") from None

    @staticmethod
    def backward(ctx, g):
        x, keep, w = ctx.saved_tensors
        need_x, _, _, need_w = ctx.needs_input_grad
        scale, dx = ctx.scale, None
        if need_x:
            dx = kernels.matmul(g, w.T)
            dx = kernels.by_rows(lambda d, k: _scale_kept(d, k, scale), dx, keep)
        dw = (kernels.matmul_tn_computed(_dropped_rows(x, keep, scale), x.shape, g)
              if need_w else None)
        return dx, None, None, dw


def _dropped_rows(x: np.ndarray, keep: np.ndarray, scale: Any):
    """index -> x[index]·scale·keep[index], in Dropout's order of operations (same floats)."""
    def rows_of(index: Any) -> np.ndarray:
        rows = np.multiply(x[index], scale)
        rows *= keep[index]
        return rows
    return rows_of


def _scale_kept(d: np.ndarray, keep: np.ndarray, scale: Any) -> None:
    d *= scale
    d *= keep


def dropout_linear(x: Tensor, w: Tensor, p: float, rng: np.random.Generator) -> Tensor:
    """`x.dropout(p, True, rng) @ w` for a dense 2-d x, as one op (`DropoutLinearOp`): the
    same mask drawn from `rng` at the same point (the product rounded by BLAS's row blocks)."""
    check_probability(p)
    if p == 0:
        return x @ w
    return DropoutLinearOp.apply(x, Draw(p, rng), kept_scale(p), w)


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features) so no transpose is needed.

    W is Glorot-uniform, b starts at zero (the GCN paper's choice). Pass `rng` for a
    reproducible initialisation.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise HyperparameterError(
                f"Linear needs positive sizes, got in_features={in_features}, "
                f"out_features={out_features}"
            )
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = Parameter(glorot_((in_features, out_features), rng, dtype), dtype=dtype)
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if self.bias is not None and isinstance(x, Tensor) and x.ndim == 2:
            return LinearOp.apply(x, self.weight, self.bias)  # (N, out_features)
        out = x @ self.weight  # sparse or batched x: the product, then the bias
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Dropout(Module):
    """Inverted dropout in training (zero with probability p, scale the rest by 1/(1−p)); identity
    in eval. Owns its generator, so a seeded model draws the same masks run after run."""

    def __init__(self, p: float = 0.5, rng: np.random.Generator | None = None):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise HyperparameterError(f"Dropout probability must be in [0, 1), got {p}")
        self.p = float(p)
        self.rng = rng if rng is not None else np.random.default_rng()

    def forward(self, x: Tensor) -> Tensor:
        return x.dropout(self.p, self.training, self.rng)

    def extra_repr(self) -> str:
        return f"p={self.p}"


# ---------------------------------------------------------------- activations


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class ELU(Module):
    """x if x > 0 else alpha·(eˣ − 1): smooth and non-zero-mean below zero (GAT's choice)."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x: Tensor) -> Tensor:
        return x.elu(self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class LeakyReLU(Module):
    """x if x > 0 else negative_slope·x."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x: Tensor) -> Tensor:
        return x.leaky_relu(self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """1 / (1 + e⁻ˣ)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class Identity(Module):
    """Returns its input: a placeholder where a layer is optional (no activation, no dropout)."""

    def forward(self, x: Any) -> Any:
        return x
