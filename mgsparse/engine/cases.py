"""Gradient-check cases for every dense engine op: float64 inputs and a scalar oracle.

`ENGINE_OPS` maps an op name to an `OpCase`:

- ``build(rng, size) -> inputs``: float64 Tensors (``requires_grad=True``) and constants
  passed through (boolean masks, index arrays). ``size`` is a key of `SIZES`, which gives the
  (n, m) of a dense operand. Entries stay `KINK_MARGIN` away from every kink (relu at 0, the
  clip bounds), where central differences would straddle a one-sided derivative.
- ``fn(*inputs) -> Tensor``: the op under test.
- ``scalar(*inputs) -> object array of Value``: the same computation entry by entry through
  micrograd `Value`s, Tensors arriving as object arrays of Values; ``None`` where `Value`
  cannot express the op (max: a Value has no comparison).

The input builders and scalar helpers (`leaf`, `normal`, `each`, `scalar_mean`, `op_case`)
also serve the loss cases of `mgsparse.nn.cases` and the layer cases of `mgsparse.checks`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mgsparse.engine import Tensor, Value, concatenate, stack
from mgsparse.engine.ops import keep_mask

SIZES = {"small": (3, 4), "medium": (12, 16)}  # (n, m) of a dense operand
KINK_MARGIN = 0.1  # inputs stay this far from kinks (relu at 0, clip bounds)


@dataclass(frozen=True)
class OpCase:
    name: str
    build: Callable[[np.random.Generator, str], tuple]
    fn: Callable[..., Tensor]
    scalar: Callable[..., np.ndarray] | None = None

    def __repr__(self) -> str:
        return f"OpCase({self.name!r}, scalar={self.scalar is not None})"


def by_name(cases: Sequence) -> dict:
    """name → case, in order; two cases of one name (say, an op added twice) would hide one."""
    names = [c.name for c in cases]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"duplicate gradcheck cases: {', '.join(repeated)}")
    return {c.name: c for c in cases}


# ---------------------------------------------------------------- inputs


def leaf(x: np.ndarray) -> Tensor:
    return Tensor(np.asarray(x, dtype=np.float64), requires_grad=True)


def normal(rng: np.random.Generator, shape: tuple, kinks: Sequence[float] = ()) -> Tensor:
    """Standard normal entries, each at least KINK_MARGIN away from every kink, where a
    one-sided derivative would make central differences meaningless."""
    x = rng.standard_normal(shape)
    for k in kinks:
        x = np.where(np.abs(x - k) < KINK_MARGIN, k + np.copysign(KINK_MARGIN, x - k), x)
    return leaf(x)


def _positive(rng: np.random.Generator, shape: tuple) -> Tensor:
    return leaf(np.abs(rng.standard_normal(shape)) + 0.5)


def _keep(shape: tuple, p: float = 0.5, seed: int = 7) -> np.ndarray:
    """The inverted-dropout scaling `Tensor.dropout` draws from default_rng(seed)."""
    return keep_mask(shape, p, np.random.default_rng(seed)) / (1 - p)


# ---------------------------------------------------------------- scalar references


def each(f: Callable) -> Callable[..., np.ndarray]:
    """f applied entry by entry (with broadcasting) to object arrays of Values."""
    return np.vectorize(f, otypes=[object])


def scalar_mean(a: np.ndarray):
    return a.sum() * (1.0 / a.size)


def _scalar_softmax(a: np.ndarray) -> np.ndarray:
    e = each(Value.exp)(a)
    return e / e.sum(axis=-1, keepdims=True)


def _scalar_log_softmax(a: np.ndarray) -> np.ndarray:
    return a - each(Value.log)(each(Value.exp)(a).sum(axis=-1, keepdims=True))


def _clip(v: Value, lo: float = -0.5, hi: float = 0.5):
    return v if lo <= v.data <= hi else min(max(v.data, lo), hi)


# ---------------------------------------------------------------- engine ops


def op_case(name: str, inputs: Callable, fn: Callable, scalar: Callable | None = None) -> OpCase:
    """inputs(rng, n, m) → the op's inputs, with (n, m) = SIZES[size]; a scalar reference
    returning one Value (a loss) is wrapped as a 0-d object array."""
    as_array = scalar and (lambda *a: np.asarray(scalar(*a), dtype=object))
    return OpCase(name, lambda rng, size: inputs(rng, *SIZES[size]), fn, as_array)


def _unary(name: str, fn: Callable, scalar: Callable | None, kinks=(), positive=False) -> OpCase:
    def inputs(rng, n, m):
        return (_positive(rng, (n, m)) if positive else normal(rng, (n, m), kinks),)
    return op_case(name, inputs, fn, scalar)


_GETITEM = (np.array([0, 2, 0]), slice(1, None))  # a repeated row: the gradients must add
ENGINE_OPS: dict[str, OpCase] = by_name([
    op_case("add", lambda r, n, m: (normal(r, (n, m)), normal(r, (m,))),
            lambda a, b: a + b, lambda a, b: a + b),
    op_case("sub", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, 1))),
            lambda a, b: a - b, lambda a, b: a - b),
    op_case("mul", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, 1))),
            lambda a, b: a * b, lambda a, b: a * b),
    op_case("div", lambda r, n, m: (normal(r, (n, m)), _positive(r, (m,))),
            lambda a, b: a / b, lambda a, b: a / b),
    op_case("pow_tensor", lambda r, n, m: (_positive(r, (n, m)), normal(r, (n, m))),
            lambda a, b: a**b, each(lambda a, b: (b * a.log()).exp())),
    _unary("neg", lambda x: -x, lambda a: -a),
    _unary("pow", lambda x: x**2.5, lambda a: a**2.5, positive=True),
    _unary("sqrt", lambda x: x.sqrt(), lambda a: a**0.5, positive=True),
    _unary("exp", lambda x: x.exp(), each(Value.exp)),
    _unary("log", lambda x: x.log(), each(Value.log), positive=True),
    _unary("relu", lambda x: x.relu(), each(Value.relu), kinks=(0,)),
    _unary("leaky_relu", lambda x: x.leaky_relu(0.2),
           each(lambda v: v.relu() - (-v).relu() * 0.2), kinks=(0,)),
    _unary("elu", lambda x: x.elu(1.0), each(lambda v: v if v.data > 0 else v.exp() - 1),
           kinks=(0,)),
    _unary("sigmoid", lambda x: x.sigmoid(), each(Value.sigmoid)),
    _unary("tanh", lambda x: x.tanh(), each(Value.tanh)),
    _unary("abs", lambda x: x.abs(), each(lambda v: v if v.data >= 0 else -v), kinks=(0,)),
    _unary("clip", lambda x: x.clip(-0.5, 0.5), each(_clip), kinks=(-0.5, 0.5)),
    _unary("cast", lambda x: x.astype(np.float64), lambda a: a),
    _unary("sum", lambda x: x.sum(axis=0), lambda a: a.sum(axis=0)),
    _unary("max", lambda x: x.max(axis=1), None),  # Value has no comparison: no scalar reference
    _unary("mean", lambda x: x.mean(axis=1, keepdims=True),
           lambda a: a.sum(axis=1, keepdims=True) * (1.0 / a.shape[1])),
    _unary("softmax", lambda x: x.softmax(-1), _scalar_softmax),
    _unary("log_softmax", lambda x: x.log_softmax(-1), _scalar_log_softmax),
    _unary("reshape", lambda x: x.reshape(x.shape[1], -1), lambda a: a.reshape(a.shape[1], -1)),
    op_case("transpose", lambda r, n, m: (normal(r, (2, n, m)),),
            lambda x: x.transpose(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    _unary("getitem", lambda x: x[_GETITEM], lambda a: a[_GETITEM]),
    op_case("getitem_mask", lambda r, n, m: (normal(r, (n, m)), r.random((n, m)) < .5),
            lambda x, mask: x[mask], lambda a, mask: a[mask]),
    op_case("concatenate", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, 2))),
            lambda a, b: concatenate([a, b], axis=1),
            lambda a, b: np.concatenate([a, b], axis=1)),
    op_case("stack", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, m))),
            lambda a, b: stack([a, b], axis=1), lambda a, b: np.stack([a, b], axis=1)),
    op_case("matmul", lambda r, n, m: (normal(r, (n, m)), normal(r, (m, 3))),
            lambda a, b: a @ b, np.dot),
    op_case("matmul_vector", lambda r, n, m: (normal(r, (n, m)), normal(r, (m,))),
            lambda a, b: a @ b, np.dot),
    op_case("matmul_batched", lambda r, n, m: (normal(r, (2, n, m)), normal(r, (m, 3))),
            lambda a, b: a @ b, np.matmul),
    _unary("dropout", lambda x: x.dropout(0.5, True, np.random.default_rng(7)),
           lambda a: a * _keep(a.shape)),
])
