"""Sparse matrices in the autograd graph: SparseTensor, its ops and their hand-written backward.

Imports only numpy, scipy and the engine; knows nothing of nn, datasets, config or CLI.
"""

from mgsparse.sparse.dispatch import DEFAULT_SPARSITY_THRESHOLD, as_operand
from mgsparse.sparse.graph import add_self_loops, gcn_norm, row_softmax
from mgsparse.sparse.ops import (
    coalesce,
    dense_matmul,
    sddmm,
    sparse_dropout,
    sparse_sum,
    spmm,
    spspmm,
    to_tensor,
)
from mgsparse.sparse.reference import FALLBACK_MAX_NNZ, ScalarFallbackWarning
from mgsparse.sparse.tensor import SparseTensor

__all__ = [
    "DEFAULT_SPARSITY_THRESHOLD", "FALLBACK_MAX_NNZ", "ScalarFallbackWarning", "SparseTensor",
    "add_self_loops", "as_operand", "coalesce", "dense_matmul", "gcn_norm", "row_softmax",
    "sddmm", "sparse_dropout", "sparse_sum", "spmm", "spspmm", "to_tensor",
]
