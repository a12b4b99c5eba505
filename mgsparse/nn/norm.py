"""Normalisation layers: `BatchNorm1d` (over the rows of a batch) and `LayerNorm` (per row).

Both are composites of engine primitives (mean, subtraction, power −½, an affine map), so
their backward is the engine's own — no hand-written gradient to get wrong. The formulas and
defaults are torch's, so a model moves between the two with the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.inplace import modified_in_place
from mgsparse.errors import HyperparameterError, ShapeError
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

    def forward(self, x: Tensor) -> Tensor:
        _check_input("BatchNorm1d", x, self.num_features, (2,))
        if not self.training:
            return self._affine(x - self.running_mean.data, self.running_var.data + self.eps)
        if x.shape[0] < 2:  # torch refuses too: the variance of one row is 0, the output bias
            raise ShapeError(f"BatchNorm1d: training needs more than one row per feature, got "
                             f"input {x.shape}")
        mean = x.mean(axis=0)  # (F,)
        centred = x - mean
        var = (centred * centred).mean(axis=0)  # (F,) biased: what normalises the batch
        self._update(mean.data, var.data * (x.shape[0] / (x.shape[0] - 1)))
        return self._affine(centred, var + self.eps)

    def _affine(self, centred: Tensor, var_eps: Any) -> Tensor:
        """centred · (var + eps)^(−½) · weight + bias, the scale folded into one (F,) vector."""
        scale = (var_eps if isinstance(var_eps, Tensor) else Tensor(var_eps)) ** -0.5
        if self.weight is not None:
            scale = scale * self.weight
        out = centred * scale
        return out + self.bias if self.bias is not None else out

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
