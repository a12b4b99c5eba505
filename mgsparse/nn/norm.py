"""Normalisation layers: `BatchNorm1d` (over the rows of a batch) and `LayerNorm` (per row).

BatchNorm1d in training is one fused op, `BatchNormTrain` (checked against finite differences,
the scalar engine and the composite it replaces): it sits on the hot path of every GIN step,
where the composite's dozen elementwise passes and graph nodes cost more than the products
around it. Everything else here (BatchNorm1d in eval, LayerNorm) is a composite of engine
primitives, with the engine's own backward. The formulas and defaults are torch's, so a model
moves between the two with the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse import kernels
from mgsparse.engine import Function, Tensor, is_grad_enabled
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.kernels import column_sums, modified_in_place
from mgsparse.nn.module import Buffer, Module, Parameter


def _check_features(who: str, num_features: int, eps: float) -> int:
    if int(num_features) < 1:
        raise HyperparameterError(f"{who} needs a positive feature count, got {num_features}")
    if not eps > 0:
        raise HyperparameterError(f"{who}: eps must be positive, got {eps}")
    return int(num_features)


def _check_input(who: str, x: Any, num_features: int, ndim: tuple[int, ...]) -> None:
    if not isinstance(x, Tensor):
        raise ShapeError(f"{who}: needs a dense Tensor, got {type(x).__name__}")
    if x.ndim not in ndim or x.shape[-1] != num_features:
        raise ShapeError(f"{who}({num_features}): expected input (..., {num_features}), "
                         f"got {x.shape}")


# ---------------------------------------------------------------- the fused training op


class BatchNormTrain(Function):
    """y = γ·x̂ + β, x̂ = (x − μ)/σ̂, σ̂ = √(σ² + eps), with μ and σ² (biased) the column mean
    and variance of x (N, F); then y ← max(y, 0) when `relu`. `w`, `b` (F,) or None.

    One graph node where the composite records about twelve, each a full pass over (N, F).
    x̂ is never formed: y = c·(γ/σ̂) + β from the centred c = x − μ, which the backward keeps
    (x̂ = c/σ̂ there). `stats`, an (2, F) array or None, receives μ and σ² (the caller's
    running statistics need them).
    """

    @staticmethod
    def forward(ctx, x, w, b, eps, relu, stats):
        n = x.shape[0]
        mean = x.sum(axis=0) / n  # numpy's own x.mean(axis=0), to the last bit
        c = np.subtract(x, mean)
        out = np.multiply(c, c)  # (N, F) the squares, then the output in place
        var = column_sums(out) / n
        inv = 1.0 / np.sqrt(var + x.dtype.type(eps))  # (F,) 1/σ̂
        scale = inv * w if w is not None else inv  # (F,) γ/σ̂
        np.multiply(c, scale, out=out)
        if b is not None:
            out += b
        positive = relu_(out) if relu else None
        if stats is not None:
            stats[0], stats[1] = mean, var
        ctx.save_for_backward(c, inv, scale, positive)
        return out

    @staticmethod
    def backward(ctx, g):
        """dx = (γ/σ̂)/N · (N·dy − Σdy − x̂·Σ(dy·x̂)), dγ = Σ dy·x̂, dβ = Σ dy (sums over rows;
        dy = g·[y > 0] with the ReLU, else g; x̂ = c/σ̂)."""
        c, inv, scale, positive = ctx.saved_tensors
        n = g.shape[0]
        dy = g * positive if positive is not None else g
        dx = np.multiply(dy, c)  # (N, F) dy·c, then dx in place
        dgamma, dbeta = column_sums(dx) * inv, column_sums(dy)
        np.multiply(c, inv * dgamma / n, out=dx)  # x̂·Σ(dy·x̂)/N
        np.subtract(dy, dx, out=dx)
        dx -= dbeta / n
        dx *= scale
        _, need_w, need_b = ctx.needs_input_grad[:3]
        return (dx, dgamma if need_w else None, dbeta if need_b else None, None, None, None)


def relu_(y: np.ndarray) -> np.ndarray:
    """max(y, 0) in place as y·[y > 0]; returns the mask [y > 0] (the backward's).

    About 45 µs where np.maximum takes 75 µs on a (3,800 × 64) float32 array, with the same
    numbers for finite y: a negative entry becomes 0 (as −0.0, equal to 0), a NaN stays NaN.
    Only −∞ differs (NaN, not 0); a batch norm's output is finite unless its input is not.
    """
    positive = y > 0
    np.multiply(y, positive, out=y)
    return positive


def batch_norm_train(x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float,
                     relu: bool = False, stats: np.ndarray | None = None) -> Tensor:
    """Training-mode batch norm of x (N, F) over its rows (then ReLU when `relu`): see
    `BatchNormTrain`. `stats` (2, F), if given, receives the batch mean and biased variance."""
    return BatchNormTrain.apply(x, weight, bias, float(eps), bool(relu), stats)


# ---------------------------------------------------------------- the layers


class BatchNorm1d(Module):
    """y = (x − μ) / √(σ² + eps) · weight + bias, per feature, over the rows of x (N, F).

    Training: μ and σ² are the batch's mean and *biased* variance (divided by N), and the
    running statistics move by `momentum`: r ← (1 − m)·r + m·s, with the batch mean and the
    *unbiased* variance (divided by N − 1) — torch's rule, so the two agree number for number.
    Eval: μ and σ² are the running statistics, so a prediction does not depend on the other
    rows of its batch. `running_mean` (zeros) and `running_var` (ones) are buffers, saved in
    `state_dict`; weight starts at 1, bias at 0 (`affine=False`: neither). Unlike torch there is
    no `num_batches_tracked` (it only serves `momentum=None`, not supported here).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, dtype: Any = np.float32):
        super().__init__()
        self.num_features = _check_features("BatchNorm1d", num_features, eps)
        if not 0.0 <= momentum <= 1.0:
            raise HyperparameterError(f"BatchNorm1d: momentum must be in [0, 1], got {momentum}")
        self.eps, self.momentum = float(eps), float(momentum)
        self.weight = Parameter(np.ones(num_features), dtype=dtype) if affine else None
        self.bias = Parameter(np.zeros(num_features), dtype=dtype) if affine else None
        self.running_mean = Buffer(np.zeros(num_features), dtype=dtype)
        self.running_var = Buffer(np.ones(num_features), dtype=dtype)

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        """BN(x), or max(BN(x), 0) with `relu`: the ReLU that follows BN in GIN, fused into the
        training op (one node and one pass fewer each way)."""
        _check_input("BatchNorm1d", x, self.num_features, (2,))
        if not self.training and not is_grad_enabled():  # inference: no graph to record
            return Tensor(self._inference(x.data, relu))
        if not self.training:
            out = self._affine(x - self.running_mean.data, self.running_var.data + self.eps)
            return out.relu() if relu else out
        if x.shape[0] < 2:  # torch refuses too: the variance of one row is 0, the output bias
            raise ShapeError(f"BatchNorm1d: training needs more than one row per feature, got "
                             f"input {x.shape}")
        stats = np.empty((2, self.num_features), dtype=x.dtype)  # μ and the biased σ²
        out = batch_norm_train(x, self.weight, self.bias, self.eps, relu, stats)
        self._update(stats[0], stats[1] * (x.shape[0] / (x.shape[0] - 1)))
        return out

    def after_linear(self, x: Tensor, linear: Any, relu: bool = False) -> Tensor:
        """BN(linear(x)), then max(·, 0) with `relu`: the Linear → BatchNorm1d pair of a GIN
        MLP. In inference (eval mode, no gradient) BN is an affine map of fixed statistics, so
        it folds into the Linear: x·W' + b' with W' = W·s, b' = (b − μ_r)·s + β, s = γ/√(σ²_r +
        eps) — one product and the bias, where the pair costs the product and four passes over
        its output. Equal to the pair up to float rounding. Otherwise the two ops, unchanged."""
        w, b = linear.weight, linear.bias
        if (self.training or is_grad_enabled() or not isinstance(x, Tensor) or x.ndim != 2
                or w.shape[1] != self.num_features):
            return self(linear(x), relu=relu)
        scale = (self.running_var.data + self.eps) ** -0.5
        if self.weight is not None:
            scale = scale * self.weight.data
        shift = -self.running_mean.data if b is None else b.data - self.running_mean.data
        shift = shift * scale
        if self.bias is not None:
            shift = shift + self.bias.data
        out = kernels.matmul(x.data, w.data * scale)
        out += shift
        if relu:
            relu_(out)
        return Tensor(out)

    def _affine(self, centred: Tensor, var_eps: Any) -> Tensor:
        """centred · (var + eps)^(−½) · weight + bias, the scale folded into one (F,) vector."""
        scale = (var_eps if isinstance(var_eps, Tensor) else Tensor(var_eps)) ** -0.5
        if self.weight is not None:
            scale = scale * self.weight
        out = centred * scale
        return out + self.bias if self.bias is not None else out

    def _inference(self, x: np.ndarray, relu: bool) -> np.ndarray:
        """`_affine`'s numbers (then max(·, 0) with `relu`) computed in one fresh array, in
        place: the same float operations in the same order, so its output to the last bit
        (the ReLU's zeros may be −0.0)."""
        scale = (self.running_var.data + self.eps) ** -0.5
        if self.weight is not None:
            scale = scale * self.weight.data
        out = np.subtract(x, self.running_mean.data)
        out *= scale
        if self.bias is not None:
            out += self.bias.data
        if relu:
            relu_(out)
        return out

    def _update(self, mean: np.ndarray, unbiased_var: np.ndarray) -> None:
        m = self.momentum
        for buffer, value in ((self.running_mean, mean), (self.running_var, unbiased_var)):
            with modified_in_place(buffer) as data:
                data *= 1.0 - m
                data += m * value.astype(data.dtype)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.weight is not None}")


class LayerNorm(Module):
    """y = (x − μ) / √(σ² + eps) · weight + bias, with μ, σ² (biased) over the last axis of
    each row: no batch statistics, so training and eval compute the same thing.

    `normalized_shape` is the size of the last axis (an int, or a 1-tuple as torch allows);
    weight starts at 1, bias at 0 (`elementwise_affine=False`: neither).
    """

    def __init__(self, normalized_shape: int | tuple[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, dtype: Any = np.float32):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list)):
            if len(normalized_shape) != 1:
                raise HyperparameterError("LayerNorm normalises the last axis only; got "
                                          f"normalized_shape={tuple(normalized_shape)}")
            normalized_shape = normalized_shape[0]
        self.normalized_shape = _check_features("LayerNorm", normalized_shape, eps)
        self.eps = float(eps)
        size = self.normalized_shape
        self.weight = Parameter(np.ones(size), dtype=dtype) if elementwise_affine else None
        self.bias = Parameter(np.zeros(size), dtype=dtype) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        _check_input("LayerNorm", x, self.normalized_shape, (1, 2, 3))
        centred = x - x.mean(axis=-1, keepdims=True)
        var = (centred * centred).mean(axis=-1, keepdims=True)  # (..., 1) biased
        out = centred * (var + self.eps) ** -0.5
        if self.weight is not None:
            out = out * self.weight
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.weight is not None}")
