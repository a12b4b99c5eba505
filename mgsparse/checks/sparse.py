"""Gradient-check cases of the sparse ops: random patterns and all three oracles each.

One entry per op: `op(name, build, fn, dense, scalar)`. `build(rng, size)` makes the inputs
from the (rows, cols, nnz) of the `Size` — "one" is a 1×1 matrix, "empty" has nnz = 0.
Random patterns have an empty last row, an empty last column, duplicated entries (except
for value-wise ops, whose dense equivalent only exists on a coalesced pattern) and are
stored in shuffled order. `fn` is the op under test (sparse results densified by
`to_tensor`), `dense` the same math on dense matrices through the Tensor engine only,
`scalar` the decomposition of `mgsparse.sparse.reference` on object arrays of `Value`s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mgsparse.checks.case import DROPOUT_P, Case, Size, dropout_rng, dropout_scale
from mgsparse.engine import Tensor
from mgsparse.sparse import graph, ops
from mgsparse.sparse import reference as ref
from mgsparse.sparse.tensor import SparseTensor


def op(name: str, build: Callable, fn: Callable, dense: Callable, scalar: Callable) -> Case:
    return Case(f"sparse.{name}", build, fn, dense, scalar)


# ---------------------------------------------------------------- inputs


def random_pattern(rng: np.random.Generator, shape: tuple[int, int], nnz: int,
                   duplicates: bool = True) -> np.ndarray:
    """(2, nnz) indices in shuffled order; the last row and column stay empty when there are
    at least two, and the first two entries are repeated at the end when `duplicates`."""
    rows, cols = shape
    hi_r, hi_c = max(rows - 1, 1), max(cols - 1, 1)
    if not duplicates:
        keys = rng.choice(hi_r * hi_c, size=min(nnz, hi_r * hi_c), replace=False)
        return np.stack([keys // hi_c, keys % hi_c]).astype(np.int64)
    idx = np.stack([rng.integers(0, hi_r, nnz), rng.integers(0, hi_c, nnz)]).astype(np.int64)
    if nnz >= 4:
        idx[:, -2:] = idx[:, :2]
    return idx[:, rng.permutation(nnz)]


def _template(rng, shape, nnz, duplicates=True, positive=False) -> SparseTensor:
    idx = random_pattern(rng, shape, nnz, duplicates)
    values = rng.standard_normal(idx.shape[1])
    values = np.abs(values) + 0.1 if positive else values
    return SparseTensor(idx, values, shape)


def _leaf(rng, shape) -> Tensor:
    return Tensor(rng.standard_normal(shape), requires_grad=True)


def _values(A: SparseTensor) -> Tensor:
    return Tensor(A.values.data, requires_grad=True)


def _dims(size: Size, square: bool) -> tuple[tuple[int, int], int]:
    rows, cols, nnz = size.sparse
    return ((rows, rows) if square else (rows, cols)), nnz


def one_matrix(square=False, duplicates=True, positive=False) -> Callable:
    """inputs (values, A); positive values (edge weights) for the degree-normalising ops."""
    def build(rng, size):
        shape, nnz = _dims(size, square)
        A = _template(rng, shape, nnz, duplicates, positive)
        return _values(A), A
    return build


def matrix_and_dense(dense_shape: Callable[[tuple[int, int], int], tuple]) -> Callable:
    """inputs (values, X, A) with X of shape dense_shape(A.shape, f)."""
    def build(rng, size):
        shape, nnz = _dims(size, False)
        A = _template(rng, shape, nnz)
        return _values(A), _leaf(rng, dense_shape(shape, 3)), A
    return build


def matrix_dense_bias(rng, size):
    """inputs (values, X, bias, A): X (cols, 3) and a bias (3,) for A·X + b."""
    shape, nnz = _dims(size, False)
    A = _template(rng, shape, nnz)
    return _values(A), _leaf(rng, (shape[1], 3)), _leaf(rng, (3,)), A


def two_matrices(chain: bool) -> Callable:
    """inputs (va, vb, A, B): B of A's shape, or of shape (A.cols, rows) when chained."""
    def build(rng, size):
        shape, nnz = _dims(size, False)
        A = _template(rng, shape, nnz)
        B = _template(rng, (shape[1], shape[0]) if chain else shape, nnz)
        return _values(A), _values(B), A, B
    return build


def sddmm_inputs(rng, size):
    shape, nnz = _dims(size, False)
    A = _template(rng, shape, nnz)
    return _leaf(rng, (shape[0], 3)), _leaf(rng, (shape[1], 3)), A


def features_inputs(rng, size):
    """Sparse features (constant values) times dense weights W: only W is checked."""
    shape, nnz = _dims(size, False)
    return _leaf(rng, (shape[1], 3)), _template(rng, shape, nnz)


# ---------------------------------------------------------------- dense and scalar helpers


def dense_of(v: Tensor, A: SparseTensor) -> Tensor:
    """The dense matrix of values v on A's pattern, by engine ops only: v @ one-hot, reshaped."""
    rows, cols = A.shape
    onehot = np.zeros((A.nnz, rows * cols), dtype=v.dtype)
    onehot[np.arange(A.nnz), A.row * cols + A.col] = 1
    return (v @ Tensor(onehot)).reshape(rows, cols)


def counts_of(A: SparseTensor, dtype=np.float64) -> Tensor:
    """How many stored entries sit at each position (the pattern mask, duplicates counted)."""
    out = np.zeros(A.shape, dtype=dtype)
    np.add.at(out, (A.row, A.col), 1)
    return Tensor(out)


def dok_dense(values: np.ndarray, A) -> np.ndarray:
    """Object (rows, cols) array: Σ of the Values stored at each position, 0.0 elsewhere."""
    out = np.empty(A.shape, dtype=object)
    out.fill(0.0)
    for k, (i, j) in enumerate(zip(A.row, A.col)):
        out[i, j] = out[i, j] + values[k]
    return out


def _data(x) -> float:
    return x.data if hasattr(x, "data") else float(x)


def _scalar_gcn_norm(v, A, add_loops):
    M = dok_dense(v, A)
    mask = counts_of(A).data > 0
    if add_loops:
        M = M + np.eye(A.shape[0])
        mask |= np.eye(A.shape[0], dtype=bool)
    d = [deg ** -0.5 if _data(deg) > 0 else 0.0 for deg in M.sum(axis=1)]
    out = np.empty(A.shape, dtype=object)
    for (i, j), m in np.ndenumerate(M):
        out[i, j] = m * d[i] * d[j] if mask[i, j] else 0.0
    return out


def _dense_gcn_norm(v, A, add_loops):
    M = dense_of(v, A) + (np.eye(A.shape[0], dtype=v.dtype) if add_loops else 0.0)
    deg = M.sum(axis=1)
    pos = (deg.data > 0).astype(v.dtype)
    d = (deg * pos + (1 - pos)) ** -0.5 * pos
    return d.reshape(-1, 1) * M * d.reshape(1, -1)


def _dense_row_softmax(v, A):
    mask = counts_of(A, v.dtype)
    M = dense_of(v, A)
    shift = np.where(mask.data > 0, M.data, -np.inf).max(axis=1, keepdims=True, initial=-np.inf)
    e = (M - np.where(np.isfinite(shift), shift, 0.0)).exp() * mask
    empty = (mask.data.sum(axis=1, keepdims=True) == 0).astype(v.dtype)
    return e / (e.sum(axis=1, keepdims=True) + empty)


def attention_inputs(rng, size):
    """inputs (dst, src, A): per-row and per-column scores of A's pattern (no duplicates)."""
    shape, nnz = _dims(size, False)
    A = _template(rng, shape, nnz, duplicates=False)
    return _leaf(rng, (shape[0],)), _leaf(rng, (shape[1],)), A


def _dense_attention_softmax(dst, src, A):
    logits = dst.reshape(-1, 1) + src.reshape(1, -1)  # (rows, cols); the pattern picks entries
    onehot = np.zeros((A.shape[0] * A.shape[1], A.nnz), dtype=dst.dtype)
    onehot[A.row * A.shape[1] + A.col, np.arange(A.nnz)] = 1
    v = (logits.reshape(1, -1) @ Tensor(onehot)).reshape(-1).leaky_relu(0.2)
    return _dense_row_softmax(v, A)


def _dropout(A: SparseTensor) -> SparseTensor:
    return ops.sparse_dropout(A, DROPOUT_P, training=True, rng=dropout_rng())


def _keep(A: SparseTensor) -> np.ndarray:
    """The dropout scaling per stored entry, drawn exactly as `sparse_dropout` draws it."""
    return dropout_scale(A.nnz)


def _valuewise(f: Callable) -> Callable:
    """The scalar reference of a value-wise op: f on each stored Value, then densified."""
    return lambda v, A: dok_dense(np.array([f(x) for x in v], dtype=object), A)


# ---------------------------------------------------------------- the cases


_ST = ops.to_tensor
CASES: list[Case] = [
    op("spmm", matrix_and_dense(lambda s, f: (s[1], f)),
       lambda v, X, A: A.with_values(v) @ X,
       lambda v, X, A: dense_of(v, A) @ X,
       lambda v, X, A: ref.spmm(v, X, A._structure)),
    op("spmm_bias", matrix_dense_bias,
       lambda v, X, b, A: ops.spmm(A.with_values(v), X, b),
       lambda v, X, b, A: dense_of(v, A) @ X + b,
       lambda v, X, b, A: ref.spmm(v, X, A._structure, b)),
    op("dense_spmm", matrix_and_dense(lambda s, f: (f, s[0])),
       lambda v, X, A: X @ A.with_values(v),
       lambda v, X, A: X @ dense_of(v, A),
       lambda v, X, A: ref.spmm(v, X.T, A.T._structure).T),
    op("sparse_features", features_inputs,
       lambda W, A: A @ W,
       lambda W, A: Tensor(A.to_dense()) @ W,
       lambda W, A: ref.spmm(A.values.data, W, A._structure)),
    op("sddmm", sddmm_inputs,
       lambda X, Y, A: _ST(ops.sddmm(A, X, Y)),
       lambda X, Y, A: (X @ Y.T) * counts_of(A, X.dtype),
       lambda X, Y, A: dok_dense(ref.sddmm(X, Y, A._structure), A)),
    op("spspmm", two_matrices(chain=True),
       lambda va, vb, A, B: _ST(A.with_values(va) @ B.with_values(vb)),
       lambda va, vb, A, B: dense_of(va, A) @ dense_of(vb, B),
       lambda va, vb, A, B: np.dot(dok_dense(va, A), dok_dense(vb, B))),
    op("add", two_matrices(chain=False),
       lambda va, vb, A, B: _ST(A.with_values(va) + B.with_values(vb)),
       lambda va, vb, A, B: dense_of(va, A) + dense_of(vb, B),
       lambda va, vb, A, B: dok_dense(va, A) + dok_dense(vb, B)),
    op("sub", two_matrices(chain=False),
       lambda va, vb, A, B: _ST(A.with_values(va) - B.with_values(vb)),
       lambda va, vb, A, B: dense_of(va, A) - dense_of(vb, B),
       lambda va, vb, A, B: dok_dense(va, A) - dok_dense(vb, B)),
    op("mul_sparse", two_matrices(chain=False),
       lambda va, vb, A, B: _ST(A.with_values(va) * B.with_values(vb)),
       lambda va, vb, A, B: dense_of(va, A) * dense_of(vb, B),
       lambda va, vb, A, B: dok_dense(va, A) * dok_dense(vb, B)),
    op("mul_scalar", one_matrix(),
       lambda v, A: _ST(A.with_values(v) * 2.5),
       lambda v, A: dense_of(v, A) * 2.5,
       lambda v, A: dok_dense(v, A) * 2.5),
    op("mul_dense", matrix_and_dense(lambda s, f: s),
       lambda v, D, A: _ST(A.with_values(v) * D),
       lambda v, D, A: dense_of(v, A) * D,
       lambda v, D, A: dok_dense(v, A) * D),
    op("sum_rows", one_matrix(),
       lambda v, A: A.with_values(v).sum(axis=1),
       lambda v, A: dense_of(v, A).sum(axis=1),
       lambda v, A: dok_dense(v, A).sum(axis=1)),
    op("sum_cols", one_matrix(),
       lambda v, A: A.with_values(v).sum(axis=0),
       lambda v, A: dense_of(v, A).sum(axis=0),
       lambda v, A: dok_dense(v, A).sum(axis=0)),
    op("coalesce", one_matrix(),
       lambda v, A: _ST(A.with_values(v).coalesce()),
       lambda v, A: dense_of(v, A),
       lambda v, A: dok_dense(v, A)),
    op("transpose", one_matrix(),
       lambda v, A: _ST(A.with_values(v).T),
       lambda v, A: dense_of(v, A).T,
       lambda v, A: dok_dense(v, A).T),
    op("relu", one_matrix(duplicates=False),
       lambda v, A: _ST(A.with_values(v).relu()),
       lambda v, A: dense_of(v, A).relu(),
       _valuewise(lambda x: x.relu())),
    op("exp", one_matrix(duplicates=False),
       lambda v, A: _ST(A.with_values(v).exp()),
       lambda v, A: dense_of(v, A).exp() * counts_of(A, v.dtype),
       _valuewise(lambda x: x.exp())),
    op("leaky_relu", one_matrix(duplicates=False),
       lambda v, A: _ST(A.with_values(v).leaky_relu(0.2)),
       lambda v, A: dense_of(v, A).leaky_relu(0.2),
       _valuewise(lambda x: x.relu() - (-x).relu() * 0.2)),
    op("sparse_dropout", one_matrix(duplicates=False),
       lambda v, A: _ST(_dropout(A.with_values(v))),
       lambda v, A: dense_of(v * _keep(A), A),
       lambda v, A: dok_dense(v * _keep(A), A)),
    op("add_self_loops", one_matrix(square=True),
       lambda v, A: _ST(graph.add_self_loops(A.with_values(v))),
       lambda v, A: dense_of(v, A) + np.eye(A.shape[0], dtype=v.dtype),
       lambda v, A: dok_dense(v, A) + np.eye(A.shape[0])),
    op("gcn_norm", one_matrix(square=True, positive=True),
       lambda v, A: _ST(graph.gcn_norm(A.with_values(v))),
       lambda v, A: _dense_gcn_norm(v, A, True),
       lambda v, A: _scalar_gcn_norm(v, A, True)),
    op("gcn_norm_no_loops", one_matrix(square=True, positive=True),
       lambda v, A: _ST(graph.gcn_norm(A.with_values(v), add_loops=False)),
       lambda v, A: _dense_gcn_norm(v, A, False),
       lambda v, A: _scalar_gcn_norm(v, A, False)),
    op("row_softmax", one_matrix(duplicates=False),
       lambda v, A: _ST(graph.row_softmax(A.with_values(v))),
       _dense_row_softmax,
       lambda v, A: dok_dense(ref.row_softmax(v, A._structure), A)),
    op("attention_softmax", attention_inputs,
       lambda dst, src, A: _ST(graph.attention_softmax(A, dst, src, 0.2)),
       _dense_attention_softmax,
       lambda dst, src, A: dok_dense(ref.attention_softmax(dst, src, A._structure, 0.2), A)),
]
