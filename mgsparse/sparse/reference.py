"""Scalar-decomposition oracles: every sparse op recomputed entry by entry from `Value`s.

Each reference takes the same positional arguments as its op's `forward` — except that every
array that would be a Tensor arrives as an object array of `Value`s — and returns the output
as an object array of `Value`s (or plain 0.0 where no input reaches an entry). One scalar
backward through it gives the vector-Jacobian product with no vectorised code involved, so
it is a third, independent oracle next to finite differences and the dense equivalent.

The same references are the safety net of the hand-written backward passes: when one raises
at run time on a small input (at most FALLBACK_MAX_NNZ numbers across the op's Tensor
inputs: the stored values of its sparse operands plus its dense operands), `fallback_vjp` recomputes the gradient here and warns; on a larger input the
scalar engine would be far too slow, so it raises an error naming the op instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from mgsparse.engine import Tensor, Value
from mgsparse.errors import MgsparseError

FALLBACK_MAX_NNZ = 2000  # stored values of the sparse operands + entries of the dense ones


class ScalarFallbackWarning(RuntimeWarning):
    """A sparse op's backward failed and its gradient came from the scalar decomposition."""


# ---------------------------------------------------------------- Value arrays


def to_values(arr: np.ndarray) -> np.ndarray:
    """An object array of fresh leaf `Value`s holding `arr`'s numbers."""
    arr = np.asarray(arr, dtype=np.float64)
    out = np.empty(arr.shape, dtype=object)
    flat = out.reshape(-1)
    for k, x in enumerate(arr.reshape(-1)):
        flat[k] = Value(float(x))
    return out


def data_of(values: np.ndarray) -> np.ndarray:
    """The float64 numbers of an object array of Values (plain numbers pass through)."""
    return np.array([v.data if isinstance(v, Value) else float(v) for v in values.reshape(-1)],
                    dtype=np.float64).reshape(values.shape)


def grad_of(values: np.ndarray) -> np.ndarray:
    return np.array([v.grad for v in values.reshape(-1)], dtype=np.float64).reshape(values.shape)


def _zeros(shape: tuple) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out.fill(0.0)
    return out


# ---------------------------------------------------------------- references of the Functions


def scatter_add(values: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """out[j] = Σ_{k: index_k = j} values_k."""
    out = _zeros((size,))
    for k, j in enumerate(index):
        out[j] = out[j] + values[k]
    return out


def gather(x: np.ndarray, index: np.ndarray) -> np.ndarray:
    """out_k = x[index_k]."""
    out = _zeros((len(index),))
    for k, j in enumerate(index):
        out[k] = x[j]
    return out


def spmm(values: np.ndarray, X: np.ndarray, s: Any, bias: np.ndarray | None = None
         ) -> np.ndarray:
    """Y[i, :] = Σ_{k: row_k = i} values_k · X[col_k, :] (+ bias)."""
    Y = _zeros((s.shape[0],) + X.shape[1:])
    for k, (i, j) in enumerate(zip(s.row, s.col)):
        Y[i] = Y[i] + X[j] * values[k]  # X[j] first: a row array times a Value, elementwise
    return Y if bias is None else Y + bias


def sddmm(X: np.ndarray, Y: np.ndarray, s: Any) -> np.ndarray:
    """out_k = Σ_f X[row_k, f] · Y[col_k, f]."""
    out = _zeros((s.nnz,))
    for k, (i, j) in enumerate(zip(s.row, s.col)):
        out[k] = sum((a * b for a, b in zip(X[i].reshape(-1), Y[j].reshape(-1))), 0.0)
    return out


def spspmm(va: np.ndarray, vb: np.ndarray, sa: Any, sb: Any, sc: Any) -> np.ndarray:
    """C[i, j] = Σ_{k in A, l in B: col_k = row_l} va_k · vb_l, listed in sc's order."""
    acc: dict[tuple[int, int], Any] = {}
    for k, (i, m) in enumerate(zip(sa.row, sa.col)):
        for l_, (m2, j) in enumerate(zip(sb.row, sb.col)):
            if m == m2:
                acc[i, j] = acc.get((i, j), 0.0) + va[k] * vb[l_]
    out = _zeros((sc.nnz,))
    for k, (i, j) in enumerate(zip(sc.row, sc.col)):
        out[k] = acc.get((int(i), int(j)), 0.0)
    return out


def row_softmax(values: np.ndarray, s: Any) -> np.ndarray:
    """out_k = exp(v_k − m_i) / Σ_{l in row i} exp(v_l − m_i), i = row_k, m_i the row max.

    The max is a constant shift (softmax is invariant to it), so it is taken from the data.
    """
    out = _zeros((s.nnz,))
    for i in np.unique(s.row):
        ks = np.flatnonzero(s.row == i)
        m = max(values[k].data for k in ks)
        exps = {k: (values[k] - m).exp() for k in ks}
        total = sum(exps.values(), 0.0)
        for k in ks:
            out[k] = exps[k] / total
    return out


def attention_softmax(dst: np.ndarray, src: np.ndarray, s: Any, slope: float) -> np.ndarray:
    """out = row_softmax of LeakyReLU(dst[row_k] + src[col_k]) on the pattern s."""
    logits = _zeros((s.nnz,))
    for k, (i, j) in enumerate(zip(s.row, s.col)):
        z = dst[i] + src[j]
        logits[k] = z.relu() - (-z).relu() * slope
    return row_softmax(logits, s)


def segment_max(x: np.ndarray, seg: Any) -> np.ndarray:
    """out[b, f] = the first x[i, f] of largest value among the rows i of segment b (0.0 for
    an empty segment): the choice is made on the data, the chosen Value passed through."""
    x2 = x.reshape(len(x), -1) if len(x) else x.reshape(0, int(np.prod(x.shape[1:])))
    out = _zeros((seg.num_segments, x2.shape[1]))
    for b in range(seg.num_segments):
        rows = np.flatnonzero(seg.batch == b)
        for f in range(x2.shape[1]):
            if len(rows):
                best = max(rows, key=lambda i: (x2[i, f].data, -i))  # ties: the first row
                out[b, f] = x2[best, f]
    return out.reshape((seg.num_segments,) + x.shape[1:])


# ---------------------------------------------------------------- vjp and fallback


def scalar_vjp(reference: Callable[..., np.ndarray], args: tuple, g: np.ndarray) -> tuple:
    """Σ g·out differentiated by the scalar engine: one gradient per arg (None for non-Tensors)."""
    leaves = [to_values(a.data) if isinstance(a, Tensor) else None for a in args]
    out = reference(*(v if v is not None else a for v, a in zip(leaves, args)))
    g = np.asarray(g, dtype=np.float64).reshape(out.shape)
    terms = [o * float(w) for o, w in zip(out.reshape(-1), g.reshape(-1))
             if isinstance(o, Value) and w != 0]
    if terms:
        sum(terms[1:], terms[0]).backward()
    return tuple(None if v is None else grad_of(v).astype(a.dtype) for v, a in zip(leaves, args))


def operand_size(args: tuple) -> int:
    """Numbers in an op's Tensor inputs: stored values of sparse operands + dense entries."""
    return sum(a.size for a in args if isinstance(a, Tensor))


def fallback_vjp(op_name: str, reference: Callable[..., np.ndarray], args: tuple,
                 g: np.ndarray, err: Exception) -> tuple:
    """The gradient of a failed hand-written backward, from the scalar decomposition."""
    size = operand_size(args)
    if size > FALLBACK_MAX_NNZ:
        raise MgsparseError(
            f"{op_name}: backward failed ({type(err).__name__}: {err}) and the input holds "
            f"{size:,} stored numbers, above the scalar-fallback limit of {FALLBACK_MAX_NNZ:,}"
        ) from err
    warnings.warn(
        f"{op_name}: backward failed ({type(err).__name__}: {err}); using the scalar "
        f"decomposition instead ({size} stored numbers)", ScalarFallbackWarning, stacklevel=2)
    return scalar_vjp(reference, args, g)
