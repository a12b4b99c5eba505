"""spmm forward+backward through the engine vs the same work through raw scipy.

Work per repeat, on a random 100,000-node matrix with 1,000,000 nonzeros and X of 64
columns (float32):
  engine: Y = spmm(A, X); Y.backward(dY)  — dX and dvalues
  scipy:  Y = A @ X; dX = Aᵀ @ dY (transpose pre-built); dv = einsum(dY[row], X[col])
The ratio is taken against the scipy side with its SDDMM in the same blocks of ~1M gathered
entries as the engine (so it measures the engine's overhead, not a better kernel); the
one-shot einsum over all nonzeros, which gathers two nnz×F arrays, is printed as well.
All timings are medians over the same number of interleaved repeats in one run; the
engine's CSR views are built by a warm-up call, as they are cached across epochs.

    python benchmarks/spmm.py [--nodes N] [--nnz K] [--cols F] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.sparse import SparseTensor, spmm


def make_inputs(nodes: int, nnz: int, cols: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, nodes, size=(2, nnz))
    m = sp.csr_matrix((rng.random(nnz, dtype=np.float32), (idx[0], idx[1])), shape=(nodes, nodes))
    m.sum_duplicates()
    X = rng.standard_normal((nodes, cols), dtype=np.float32)
    dY = rng.standard_normal((nodes, cols), dtype=np.float32)
    return m, X, dY


def engine_step(A: SparseTensor, X: np.ndarray, dY: np.ndarray) -> float:
    A.values.zero_grad()
    Xt = Tensor(X, requires_grad=True)
    start = time.perf_counter()
    spmm(A, Xt).backward(dY)
    return time.perf_counter() - start


def scipy_step(m: sp.csr_matrix, mT: sp.csr_matrix, row: np.ndarray, X: np.ndarray,
               dY: np.ndarray, block: int | None) -> float:
    """Raw scipy/numpy; `block` nonzeros per SDDMM block (None: all at once)."""
    col = m.indices
    start = time.perf_counter()
    m @ X
    mT @ dY
    if block is None:
        np.einsum("ij,ij->i", dY[row], X[col])
    else:
        dv = np.empty(len(row), dtype=X.dtype)
        for s in range(0, len(row), block):
            np.einsum("ij,ij->i", dY[row[s:s + block]], X[col[s:s + block]], out=dv[s:s + block])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--nnz", type=int, default=1_000_000)
    parser.add_argument("--cols", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()

    m, X, dY = make_inputs(args.nodes, args.nnz, args.cols)
    mT = m.T.tocsr()
    row = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    A = SparseTensor.from_scipy(m)
    A.values.requires_grad = True
    block = max((1 << 20) // args.cols, 1)  # the engine's SDDMM block
    engine_step(A, X, dY)  # warm-up: builds the cached CSR and CSRᵀ views once
    scipy_step(m, mT, row, X, dY, block)

    engine, raw, naive = [], [], []
    for _ in range(args.repeats):
        engine.append(engine_step(A, X, dY))
        raw.append(scipy_step(m, mT, row, X, dY, block))
        naive.append(scipy_step(m, mT, row, X, dY, None))
    t_engine, t_raw, t_naive = (statistics.median(t) for t in (engine, raw, naive))
    print(f"spmm forward+backward, {args.nodes:,} nodes, {m.nnz:,} nnz, {args.cols} columns, "
          f"float32, median of {args.repeats}")
    print(f"  engine                   : {t_engine * 1e3:8.1f} ms")
    print(f"  scipy, blocked SDDMM     : {t_raw * 1e3:8.1f} ms")
    print(f"  scipy, one-shot SDDMM    : {t_naive * 1e3:8.1f} ms")
    print(f"  ratio engine / scipy     : {t_engine / t_raw:8.2f}x  (target < 1.3x)")
    print(f"  ratio engine / one-shot  : {t_engine / t_naive:8.2f}x")


if __name__ == "__main__":
    main()
