"""Sparse matrices in the autograd graph: SparseTensor, its ops and their hand-written backward.

Imports only numpy, scipy and the engine; knows nothing of nn, datasets, config or CLI.
"""

from mgsparse.kernels import get_num_threads, num_threads, set_num_threads
from mgsparse.sparse.dispatch import DEFAULT_SPARSITY_THRESHOLD, as_operand
from mgsparse.sparse.graph import add_self_loops, attention_softmax, gcn_norm, row_softmax
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
from mgsparse.sparse.segment import (
    Segments,
    pooling_matrix,
    segment_max,
    segment_mean,
    segment_reduce,
    segment_sum,
)
from mgsparse.sparse.tensor import SparseTensor

__all__ = [
    "DEFAULT_SPARSITY_THRESHOLD", "FALLBACK_MAX_NNZ", "ScalarFallbackWarning", "Segments",
    "SparseTensor", "add_self_loops", "as_operand", "attention_softmax", "coalesce",
    "dense_matmul", "gcn_norm",
    "get_num_threads", "num_threads", "pooling_matrix", "row_softmax", "sddmm", "segment_max",
    "segment_mean", "segment_reduce", "segment_sum", "set_num_threads", "sparse_dropout",
    "sparse_sum", "spmm", "spspmm", "to_tensor",
]
