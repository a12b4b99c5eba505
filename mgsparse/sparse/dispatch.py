"""Dense or sparse? `as_operand` keeps a matrix sparse only when that pays.

A sparse product costs a few memory accesses per stored entry, a dense (BLAS) one a fraction
of one per entry: below roughly 10% density the sparse kernel wins and memory drops; above it
the dense matrix is both faster and simpler. The threshold is the config's
`sparsity_threshold` (default 0.1), so one model code path runs on either kind of operand:
both support `A @ X`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.sparse.tensor import SparseTensor

DEFAULT_SPARSITY_THRESHOLD = 0.1


def as_operand(m: Any, sparsity_threshold: float = DEFAULT_SPARSITY_THRESHOLD,
               dtype: Any = None) -> SparseTensor | Tensor:
    """A SparseTensor when `m`'s density (nonzeros / entries) is ≤ `sparsity_threshold`,
    else a dense Tensor.

    Accepts a scipy sparse matrix, a 2-d numpy array, a SparseTensor or a Tensor. Density
    counts numerically nonzero entries (explicit zeros in a scipy matrix do not count).

    Gradients never depend on the threshold: a SparseTensor that is densified stays
    differentiable w.r.t. its stored values (and only those, as when it stays sparse); a dense
    Tensor that requires grad is returned dense (cast to `dtype` if given), since its gradient
    lives at every entry — its zeros included — which a sparse operand could not carry.
    """
    if not 0.0 <= float(sparsity_threshold) <= 1.0:
        raise HyperparameterError(f"sparsity_threshold must be in [0, 1], got {sparsity_threshold}")
    if isinstance(m, SparseTensor):
        sparse = m.density <= sparsity_threshold
        m = m if dtype is None else m.astype(dtype)
        return m if sparse else m.to_tensor()
    if sp.issparse(m):
        if _density(m.count_nonzero(), m.shape) <= sparsity_threshold:
            return SparseTensor.from_scipy(m, dtype=dtype)
        return Tensor(m.toarray(), dtype=dtype or _float_dtype(m.dtype))
    arr = m.data if isinstance(m, Tensor) else np.asarray(m)
    if arr.ndim != 2:
        raise ShapeError(f"as_operand needs a 2-d matrix, got shape {arr.shape}")
    learned = isinstance(m, Tensor) and m.requires_grad
    if not learned and _density(np.count_nonzero(arr), arr.shape) <= sparsity_threshold:
        return SparseTensor.from_dense(arr, dtype=dtype)
    if isinstance(m, Tensor):
        return m if dtype is None else m.astype(dtype)
    return Tensor(arr, dtype=dtype or _float_dtype(arr.dtype))


def _density(nonzeros: int, shape: tuple) -> float:
    size = shape[0] * shape[1]
    return nonzeros / size if size else 0.0


def _float_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)
