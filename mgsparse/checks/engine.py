"""Gradient-check cases of the dense engine ops: float64 inputs and a scalar reference each.

One line per op: `op(name, inputs, fn, scalar)` with `inputs(rng, n, m)` building the op's
inputs from the dense operand size (n, m) of the `Size` (n = 0 at size "empty": every op must
also run on an empty operand). Entries stay `KINK_MARGIN` away from every kink (relu at 0,
the clip bounds), where central differences would straddle a one-sided derivative. The
scalar reference recomputes the op entry by entry through micrograd `Value`s (Tensors arrive
as object arrays of Values); `None` where `Value` cannot express the op (max: a Value has no
comparison).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mgsparse.checks.case import DROPOUT_P, Case, dropout_rng, dropout_scale, each, normal, positive
from mgsparse.engine import Value, concatenate, stack


def op(name: str, inputs: Callable, fn: Callable, scalar: Callable | None = None,
       group: str = "engine") -> Case:
    """A case `group.name` whose inputs(rng, n, m) get the dense size (n, m) of the Size."""
    return Case(f"{group}.{name}", lambda rng, size: inputs(rng, *size.dense), fn, scalar=scalar)


def unary(name: str, fn: Callable, scalar: Callable | None, kinks=(), pos=False) -> Case:
    def inputs(rng, n, m):
        return (positive(rng, (n, m)) if pos else normal(rng, (n, m), kinks),)
    return op(name, inputs, fn, scalar)


# ---------------------------------------------------------------- scalar references


def _scalar_softmax(a: np.ndarray) -> np.ndarray:
    e = each(Value.exp)(a)
    return e / e.sum(axis=-1, keepdims=True)


def _scalar_log_softmax(a: np.ndarray) -> np.ndarray:
    return a - each(Value.log)(each(Value.exp)(a).sum(axis=-1, keepdims=True))


def _clip(v: Value, lo: float = -0.5, hi: float = 0.5):
    return v if lo <= v.data <= hi else min(max(v.data, lo), hi)


def _getitem(n: int) -> tuple:
    """Rows 0, n−1, 0 (a repeated row: its gradients must add), columns 1 onwards."""
    rows = np.array([0, n - 1, 0]) if n else np.zeros(0, dtype=np.int64)
    return rows, slice(1, None)


def _dropout(x):
    return x.dropout(DROPOUT_P, True, dropout_rng())


def _scalar_dropout(a: np.ndarray) -> np.ndarray:
    return a * dropout_scale(a.shape)


# ---------------------------------------------------------------- the cases


CASES: list[Case] = [
    op("add", lambda r, n, m: (normal(r, (n, m)), normal(r, (m,))),
       lambda a, b: a + b, lambda a, b: a + b),
    op("sub", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, 1))),
       lambda a, b: a - b, lambda a, b: a - b),
    op("mul", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, 1))),
       lambda a, b: a * b, lambda a, b: a * b),
    op("div", lambda r, n, m: (normal(r, (n, m)), positive(r, (m,))),
       lambda a, b: a / b, lambda a, b: a / b),
    op("pow_tensor", lambda r, n, m: (positive(r, (n, m)), normal(r, (n, m))),
       lambda a, b: a**b, each(lambda a, b: (b * a.log()).exp())),
    unary("neg", lambda x: -x, lambda a: -a),
    unary("pow", lambda x: x**2.5, lambda a: a**2.5, pos=True),
    unary("rpow", lambda x: 1.5**x, lambda a: 1.5**a),
    unary("sqrt", lambda x: x.sqrt(), lambda a: a**0.5, pos=True),
    unary("exp", lambda x: x.exp(), each(Value.exp)),
    unary("log", lambda x: x.log(), each(Value.log), pos=True),
    unary("relu", lambda x: x.relu(), each(Value.relu), kinks=(0,)),
    unary("leaky_relu", lambda x: x.leaky_relu(0.2),
          each(lambda v: v.relu() - (-v).relu() * 0.2), kinks=(0,)),
    unary("elu", lambda x: x.elu(1.0), each(lambda v: v if v.data > 0 else v.exp() - 1),
          kinks=(0,)),
    unary("sigmoid", lambda x: x.sigmoid(), each(Value.sigmoid)),
    unary("tanh", lambda x: x.tanh(), each(Value.tanh)),
    unary("abs", lambda x: x.abs(), each(lambda v: v if v.data >= 0 else -v), kinks=(0,)),
    unary("clip", lambda x: x.clip(-0.5, 0.5), each(_clip), kinks=(-0.5, 0.5)),
    unary("cast", lambda x: x.astype(np.float64), lambda a: a),
    unary("sum", lambda x: x.sum(axis=0), lambda a: a.sum(axis=0)),
    unary("max", lambda x: x.max(axis=1), None),  # Value has no comparison: no scalar reference
    unary("mean", lambda x: x.mean(axis=1, keepdims=True),
          lambda a: a.sum(axis=1, keepdims=True) * (1.0 / a.shape[1])),
    unary("softmax", lambda x: x.softmax(-1), _scalar_softmax),
    unary("log_softmax", lambda x: x.log_softmax(-1), _scalar_log_softmax),
    unary("reshape", lambda x: x.reshape(x.shape[1], x.shape[0]),
          lambda a: a.reshape(a.shape[1], a.shape[0])),
    op("transpose", lambda r, n, m: (normal(r, (2, n, m)),),
       lambda x: x.transpose(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    unary("getitem", lambda x: x[_getitem(len(x))], lambda a: a[_getitem(len(a))]),
    op("getitem_mask", lambda r, n, m: (normal(r, (n, m)), r.random((n, m)) < .5),
       lambda x, mask: x[mask], lambda a, mask: a[mask]),
    op("concatenate", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, 2))),
       lambda a, b: concatenate([a, b], axis=1), lambda a, b: np.concatenate([a, b], axis=1)),
    op("stack", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, m))),
       lambda a, b: stack([a, b], axis=1), lambda a, b: np.stack([a, b], axis=1)),
    op("matmul", lambda r, n, m: (normal(r, (n, m)), normal(r, (m, 3))),
       lambda a, b: a @ b, np.dot),
    op("matmul_vector", lambda r, n, m: (normal(r, (n, m)), normal(r, (m,))),
       lambda a, b: a @ b, np.dot),
    op("matmul_batched", lambda r, n, m: (normal(r, (2, n, m)), normal(r, (m, 3))),
       lambda a, b: a @ b, np.matmul),
    unary("dropout", _dropout, _scalar_dropout),
    unary("relu_dropout", lambda x: x.relu_dropout(DROPOUT_P, True, dropout_rng()),
          lambda a: _scalar_dropout(each(Value.relu)(a)), kinks=(0,)),
]

