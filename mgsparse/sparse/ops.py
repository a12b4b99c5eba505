"""Sparse primitives as Functions with hand-written backward passes, and the ops built on them.

Primitives (each a `SparseFunction`; gradients reach the stored values and dense operands only,
never the indices):

- `ScatterAdd`  out[j] = Σ_{index_k=j} v_k        (coalesce, row/column sums, densify)
- `Gather`      out_k = x[index_k]                  (its adjoint: per-entry scaling, sampling)
- `SpMM`        Y = A·X                             (scipy CSR kernel, cached views)
- `Sddmm`       out_k = X[row_k]·Y[col_k]           (sampled dense-dense product)
- `SpSpMM`      C = A·B, both sparse                (scipy kernel + pattern sampling)

Everything else — elementwise union/intersection, scalar and dense-sampled products, dropout,
value-wise nonlinearities, dense×sparse — is composed from these and the engine's own ops,
and needs no backward of its own. No op allocates a dense rows×cols array except `to_tensor`,
which exists to do exactly that on request.

Adding an op (four files; nothing else counts or names the ops):

1. here: a `SparseFunction` subclass with `op_name`, `reference`, `forward` and `vjp` side by
   side (the vjp's docstring states its math), and the front-end function that applies it;
2. `reference.py`: the scalar reference, the same arguments as `forward` with object arrays
   of `Value`s in place of the Tensors (it is also the fallback of a failing `vjp`);
3. `tensor.py`: the one-line `SparseTensor` method (or, for a free function, its name in
   `sparse/__init__.py` instead);
4. `mgsparse/checks/sparse.py`: one `op(...)` entry: the inputs, the op, its dense equivalent
   through the Tensor engine, and its scalar reference.

The tests and `mgsparse gradcheck` read the registry: the new case runs against its three
oracles at every size, and `tests/checks/test_registry.py` fails while some Function is
reached by no case.
"""

from __future__ import annotations

from numbers import Number
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse import kernels
from mgsparse.engine import Function, Tensor, concatenate
from mgsparse.engine.masks import keep_mask, kept_scale
from mgsparse.engine.ops import Dropout
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.sparse import reference as ref
from mgsparse.sparse.structure import Structure, from_csr, from_keys
from mgsparse.sparse.tensor import SparseTensor


class SparseFunction(Function):
    """A Function whose hand-written backward (`vjp`) is guarded by the scalar decomposition.

    Subclasses write `forward` and `vjp` side by side and name their `reference` (see
    reference.py). If `vjp` raises, a small input falls back to the reference with a
    `ScalarFallbackWarning`; a large one raises an MgsparseError naming `op_name`.
    """

    op_name = "sparse op"
    reference = None
    _ctx_methods = ("forward", "backward", "vjp")  # plain defs become staticmethods

    @classmethod
    def backward(cls, ctx, g):
        try:
            return cls.vjp(ctx, g)
        except Exception as err:  # noqa: BLE001 — any failure of the custom backward
            return ref.fallback_vjp(cls.op_name, cls.reference, ctx.parents, g, err)

    def vjp(ctx, g):
        raise NotImplementedError


# ---------------------------------------------------------------- index primitives


def scatter_sum(index: np.ndarray, v: np.ndarray, size: int) -> np.ndarray:
    """out[j] = Σ_{index_k = j} v_k in float64, as `np.bincount(index, weights=v)`.

    Above the pool's size the entries are cut into kernels.tuning.SCATTER_CHUNKS fixed chunks, each summed
    on the pool into its own float64 array, then added in chunk order: the rounding depends on
    the chunks alone, never on the thread count (a GAT head's 8.8M-entry source gradient
    took 32 ms as one serial `bincount`)."""
    if len(v) < kernels.tuning.MIN_PARALLEL_ELEMENTS:
        return np.bincount(index, weights=v, minlength=size)
    step = -(-len(v) // kernels.tuning.SCATTER_CHUNKS)
    parts = kernels.run_blocks(
        lambda a, b: np.bincount(index[a:b], weights=v[a:b], minlength=size),
        [(a, min(a + step, len(v))) for a in range(0, len(v), step)])
    for part in parts[1:]:
        parts[0] += part
    return parts[0]


class ScatterAdd(SparseFunction):
    op_name, reference = "scatter_add", staticmethod(ref.scatter_add)

    def forward(ctx, v, index, size):
        ctx.index = index
        return scatter_sum(index, v, size).astype(v.dtype, copy=False)

    def vjp(ctx, g):
        """dv_k = g[index_k]."""
        return g[ctx.index], None, None


class Gather(SparseFunction):
    op_name, reference = "gather", staticmethod(ref.gather)

    def forward(ctx, x, index):
        ctx.index, ctx.size = index, len(x)
        return x[index]

    def vjp(ctx, g):
        """dx[j] = Σ_{index_k=j} g_k."""
        return scatter_sum(ctx.index, g, ctx.size).astype(g.dtype, copy=False), None


# ---------------------------------------------------------------- products


def sddmm_kernel(row: np.ndarray, col: np.ndarray, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """out_k = X[row_k]·Y[col_k], in blocks so that the gathered rows never exceed a few MB."""
    if X.ndim == 1:
        return X[row] * Y[col]
    out = np.empty(len(row), dtype=np.result_type(X, Y))
    step = max(kernels.tuning.SDDMM_CHUNK // max(X.shape[1], 1), 1)
    chunks = [(s, min(s + step, len(row))) for s in range(0, len(row), step)]
    # take along axis 0: several times faster than X[idx] for narrow rows (same values)
    kernels.run_blocks(lambda s, e: np.einsum("ij,ij->i", X.take(row[s:e], axis=0),
                                               Y.take(col[s:e], axis=0), out=out[s:e]), chunks)
    return out


class SpMM(SparseFunction):
    op_name, reference = "spmm", staticmethod(ref.spmm)

    def forward(ctx, v, X, s, bias=None):
        ctx.save_for_backward(v, X)
        ctx.s = s
        # values that need no gradient are a fixed Â: its CSR-ordered copy may be cached
        return s.matmul(v, X, constant=not ctx.needs_input_grad[0], bias=bias)

    def vjp(ctx, g):
        """dX = Aᵀ·G (cached transposed CSR); dv_k = G[row_k]·X[col_k] (SDDMM); with a bias
        (Y = A·X + b), db = Σ_rows G."""
        v, X = ctx.saved_tensors
        s, (need_v, need_x, _, *need_bias) = ctx.s, ctx.needs_input_grad
        dv = sddmm_kernel(s.row, s.col, g, X) if need_v else None
        dX = s.t_matmul(v, g, constant=not need_v) if need_x else None
        db = [kernels.column_sums(g) if need else None for need in need_bias]  # [] if none
        return dv, dX, None, *db


class Sddmm(SparseFunction):
    op_name, reference = "sddmm", staticmethod(ref.sddmm)

    def forward(ctx, X, Y, s):
        ctx.save_for_backward(X, Y)
        ctx.s = s
        return sddmm_kernel(s.row, s.col, X, Y)

    def vjp(ctx, g):
        """dX = G·Y, dY = Gᵀ·X, with G the sparse matrix of g on the pattern."""
        X, Y = ctx.saved_tensors
        s, (need_x, need_y, _) = ctx.s, ctx.needs_input_grad
        dX = s.csr().matmul(g, Y) if need_x else None
        dY = s.t_matmul(g, X) if need_y else None
        return dX, dY, None


def sample_at(m: sp.csr_matrix, s: Structure) -> np.ndarray:
    """The entries of a scipy CSR matrix (no duplicates) at every entry of pattern `s`."""
    out = np.zeros(s.nnz, dtype=m.dtype)
    if m.nnz == 0 or s.nnz == 0:
        return out
    m.sort_indices()
    row = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    keys = row * np.int64(m.shape[1]) + m.indices
    pos = np.minimum(np.searchsorted(keys, s.keys()), len(keys) - 1)
    found = keys[pos] == s.keys()
    out[found] = m.data[pos[found]]
    return out


class SpSpMM(SparseFunction):
    op_name, reference = "spspmm", staticmethod(ref.spspmm)

    def forward(ctx, va, vb, sa, sb, sc):
        ctx.save_for_backward(va, vb)
        ctx.structures = sa, sb, sc
        return sample_at(sa.csr_matrix(va) @ sb.csr_matrix(vb), sc)

    def vjp(ctx, g):
        """dA = (G·Bᵀ) at A's pattern, dB = (Aᵀ·G) at B's pattern — sparse products only."""
        va, vb = ctx.saved_tensors
        (sa, sb, sc), (need_a, need_b, *_) = ctx.structures, ctx.needs_input_grad
        G = sc.csr_matrix(g)
        da = sample_at(G @ sb.csr_t_matrix(vb), sa) if need_a else None
        db = sample_at(sa.csr_t_matrix(va) @ G, sb) if need_b else None
        return da, db, None, None, None


def product_structure(sa: Structure, sb: Structure) -> Structure:
    """The structural pattern of A·B: path counts of the 0/1 patterns, which never cancel."""
    ones = sa.csr_matrix(np.ones(sa.nnz)) @ sb.csr_matrix(np.ones(sb.nnz))
    ones.sort_indices()
    return from_csr(ones)


# ---------------------------------------------------------------- front end


def _dense(X: Any, dtype: Any) -> Tensor:
    return X if isinstance(X, Tensor) else Tensor(np.asarray(X), dtype=dtype)


def _need_sparse(name: str, A: Any) -> None:
    if not isinstance(A, SparseTensor):
        raise ShapeError(f"{name}: expected a SparseTensor, got {type(A).__name__}")


def spmm(A: SparseTensor, X: Any, bias: Any = None) -> Tensor:
    """A·X for dense X (N, F) or (N,): differentiable w.r.t. A.values and X. A `bias` (F,)
    gives A·X + b as one op (a graph layer's propagation): added in place to the product's
    rows while they are in cache, no second (rows, F) array; the same bits as `A @ X + b`."""
    _need_sparse("spmm", A)
    X = _dense(X, A.dtype)
    if X.ndim not in (1, 2) or X.shape[0] != A.shape[1]:
        raise ShapeError(f"spmm: cannot multiply sparse {A.shape} by dense {X.shape}")
    if bias is None:
        return SpMM.apply(A.values, X, A._structure)
    bias = _dense(bias, A.dtype)
    if X.ndim != 2 or bias.shape != (X.shape[1],):
        raise ShapeError(f"spmm: a bias for the product {A.shape} · {X.shape} must have shape "
                         f"({X.shape[-1]},), got {bias.shape}")
    return SpMM.apply(A.values, X, A._structure, bias)


def dense_matmul(X: Any, A: SparseTensor) -> Tensor:
    """X·A = (Aᵀ·Xᵀ)ᵀ: the free transpose of A reuses its cached CSR views."""
    X = _dense(X, A.dtype)
    if X.ndim not in (1, 2) or X.shape[-1] != A.shape[0]:
        raise ShapeError(f"matmul: cannot multiply dense {X.shape} by sparse {A.shape}")
    return spmm(A.T, X.T).T if X.ndim == 2 else spmm(A.T, X)


def sddmm(A: SparseTensor, X: Any, Y: Any) -> SparseTensor:
    """The SparseTensor on A's pattern with values X[row_k]·Y[col_k] (A's values unused)."""
    _need_sparse("sddmm", A)
    X, Y = _dense(X, A.dtype), _dense(Y, A.dtype)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != A.shape[0] or Y.shape[0] != A.shape[1] \
            or X.shape[1] != Y.shape[1]:
        raise ShapeError(f"sddmm: pattern {A.shape} needs X (rows, F) and Y (cols, F), "
                         f"got {X.shape} and {Y.shape}")
    return A.with_values(Sddmm.apply(X, Y, A._structure))


def spspmm(A: SparseTensor, B: SparseTensor) -> SparseTensor:
    """A·B for two SparseTensors, canonical output, gradients to both values on their patterns."""
    if A.shape[1] != B.shape[0]:
        raise ShapeError(f"spspmm: cannot multiply sparse {A.shape} by sparse {B.shape}")
    sc = product_structure(A._structure, B._structure)
    return SparseTensor._make(sc, SpSpMM.apply(A.values, B.values, A._structure, B._structure, sc))


def matmul(A: SparseTensor, other: Any) -> Any:
    return spspmm(A, other) if isinstance(other, SparseTensor) else spmm(A, other)


def coalesce(A: SparseTensor) -> SparseTensor:
    """Sorted row-major, duplicates summed; the backward copies each gradient to its duplicates."""
    s = A._structure
    if s.canonical:
        return A
    inverse, canonical = s.coalesce_plan()
    return SparseTensor._make(canonical, ScatterAdd.apply(A.values, inverse, canonical.nnz))


def sparse_sum(A: SparseTensor, axis: int | None = None) -> Tensor:
    """Σ of all values (axis None), row sums (axis 1 → (rows,)) or column sums (axis 0 → (cols,))."""
    if axis is None:
        return A.values.sum()
    if axis not in (0, 1, -1, -2):
        raise ShapeError(f"sum: axis must be None, 0 or 1 for a sparse matrix, got {axis}")
    axis %= 2
    index = A.col if axis == 0 else A.row
    return ScatterAdd.apply(A.values, index, A.shape[1 - axis])


def to_tensor(A: SparseTensor) -> Tensor:
    """The dense (rows, cols) Tensor, differentiable w.r.t. A.values (densifies on purpose)."""
    rows, cols = A.shape
    return ScatterAdd.apply(A.values, A._structure.keys(), rows * cols).reshape(rows, cols)


def add(A: SparseTensor, B: Any) -> SparseTensor:
    """A + B on the union of the patterns: concatenate the entries, then coalesce."""
    if not isinstance(B, SparseTensor):
        raise ShapeError(f"add: a SparseTensor adds only to a SparseTensor (got {type(B).__name__}); "
                         "use A.apply(...) to shift the stored values")
    if A.shape != B.shape:
        raise ShapeError(f"add: shapes {A.shape} and {B.shape} differ")
    both = Structure(np.concatenate([A.indices, B.indices], axis=1), A.shape)
    return coalesce(SparseTensor._make(both, concatenate([A.values, B.values])))


def sub(A: SparseTensor, B: Any) -> SparseTensor:
    if not isinstance(B, SparseTensor):
        raise ShapeError(f"sub: a SparseTensor subtracts only a SparseTensor (got {type(B).__name__})")
    return add(A, -B)


def mul(A: SparseTensor, other: Any) -> SparseTensor:
    """A ⊙ other: intersection of patterns (sparse), scaled values (scalar), or dense sampled at A."""
    if isinstance(other, SparseTensor):
        return _mul_sparse(A, other)
    if isinstance(other, Number) or (isinstance(other, Tensor) and other.ndim == 0):
        return A.with_values(A.values * other)
    return _mul_dense(A, _dense(other, A.dtype))


def _mul_sparse(A: SparseTensor, B: SparseTensor) -> SparseTensor:
    """Coalesce both (a duplicated entry multiplies as its sum), keep the common entries."""
    if A.shape != B.shape:
        raise ShapeError(f"mul: shapes {A.shape} and {B.shape} differ")
    A, B = coalesce(A), coalesce(B)
    keys, ia, ib = np.intersect1d(A._structure.keys(), B._structure.keys(),
                                  assume_unique=True, return_indices=True)
    values = Gather.apply(A.values, ia) * Gather.apply(B.values, ib)
    return SparseTensor._make(from_keys(keys.astype(np.int64), A.shape), values)


def _mul_dense(A: SparseTensor, D: Tensor) -> SparseTensor:
    """values_k · D[row_k, col_k], D broadcasting against A's shape ((rows, 1) scales rows)."""
    D2 = D.reshape(1, -1) if D.ndim == 1 else D
    if D2.ndim != 2 or any(d not in (1, n) for d, n in zip(D2.shape, A.shape)):
        raise ShapeError(f"mul: dense {D.shape} does not broadcast to sparse {A.shape}")
    row = A.row if D2.shape[0] > 1 else np.zeros_like(A.row)
    col = A.col if D2.shape[1] > 1 else np.zeros_like(A.col)
    return A.with_values(A.values * Gather.apply(D2.reshape(-1), row * D2.shape[1] + col))


def sparse_dropout(A: SparseTensor, p: float, training: bool = True,
                   rng: np.random.Generator | None = None,
                   dense_stream: bool = False) -> SparseTensor:
    """Inverted dropout on the stored values only (the engine's `Tensor.dropout` on the (nnz,)
    values): the pattern and its cached views are kept, dropped entries stored as zeros,
    nothing is densified.

    `dense_stream`: draw the mask of A's dense shape instead, exactly as `Tensor.dropout` on
    the dense matrix would, and keep it at the stored entries: out_k = v_k·scale·keep[r_k, c_k].
    The generator is consumed as by the dense operand and every value equals the dense output's
    entry, so a run whose operand turned sparse mid-training (the memory budget's fallback)
    continues the dense run's curve. It costs a dense-sized mask per step, hence only there."""
    if not dense_stream:
        try:
            values = A.values.dropout(p, training, rng)
        except HyperparameterError as e:
            raise HyperparameterError(f"sparse_dropout: {e}") from None
        return A if values is A.values else A.with_values(values)
    if not 0 <= p < 1:
        raise HyperparameterError(f"sparse_dropout: dropout probability must be in [0, 1), "
                                  f"got {p}")
    if not training or p == 0:
        return A
    keep = keep_mask(A.shape, p, rng if rng is not None else np.random.default_rng())
    return A.with_values(Dropout.apply(A.values, keep[A.row, A.col], kept_scale(p)))
