"""Gradient checking: the analytic backward against central finite differences, in float64.

For an output y = f(x₁, …) of any shape, a fixed random weighting w turns it into the scalar
s = Σ w·y; one backward gives ∂s/∂xᵢ, and each entry is compared with
(s(x + ε·e) − s(x − ε·e)) / 2ε. An entry passes when |analytic − numeric| ≤ atol + rtol·|numeric|.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mgsparse.engine.tensor import Tensor, no_grad
from mgsparse.errors import GradcheckError


@dataclass(frozen=True)
class InputCheck:
    index: int
    shape: tuple
    max_abs_err: float
    max_rel_err: float
    passed: bool


@dataclass
class GradcheckResult:
    inputs: list[InputCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.inputs)

    @property
    def max_abs_err(self) -> float:
        return max((c.max_abs_err for c in self.inputs), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((c.max_rel_err for c in self.inputs), default=0.0)

    def __bool__(self) -> bool:
        return self.passed


def gradcheck(
    fn: Callable[..., Tensor],
    inputs: Sequence,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    raise_exception: bool = True,
    seed: int = 0,
) -> GradcheckResult:
    """Check `fn(*inputs)`'s gradient for every input Tensor that requires grad.

    Tensors are checked as float64 copies (finite differences in float32 are noise);
    other inputs are passed through unchanged.
    """
    args = [Tensor(a.data.astype(np.float64), requires_grad=a.requires_grad)
            if isinstance(a, Tensor) else a for a in inputs]
    out = fn(*args)
    weights = np.random.default_rng(seed).standard_normal(out.shape)

    def scalar() -> float:
        with no_grad():
            return float(np.sum(weights * fn(*args).data))

    checked = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if not checked:
        raise GradcheckError("gradcheck: no input requires grad")
    if not out.requires_grad:
        raise GradcheckError("gradcheck: the output does not depend on any input that requires grad")
    out.backward(weights)
    result = GradcheckResult()
    for i, a in checked:
        analytic = np.zeros_like(a.data) if a.grad is None else a.grad
        numeric = _numeric_grad(scalar, a.data, eps)
        err = np.abs(analytic - numeric)
        ok = bool(np.all(err <= atol + rtol * np.abs(numeric)))
        rel = err / np.maximum(np.abs(numeric), 1e-12)
        result.inputs.append(InputCheck(i, a.shape, float(err.max(initial=0)),
                                        float(rel.max(initial=0)), ok))
    if raise_exception and not result.passed:
        bad = next(c for c in result.inputs if not c.passed)
        raise GradcheckError(
            f"gradcheck: input {bad.index} of shape {bad.shape}: analytic and numeric gradients differ "
            f"(max abs err {bad.max_abs_err:.3g}, max rel err {bad.max_rel_err:.3g})"
        )
    return result


def _numeric_grad(scalar: Callable[[], float], x: np.ndarray, eps: float) -> np.ndarray:
    """Central differences, perturbing x in place one entry at a time (restored after)."""
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        plus = scalar()
        flat[k] = old - eps
        minus = scalar()
        flat[k] = old
        gflat[k] = (plus - minus) / (2 * eps)
    return grad
