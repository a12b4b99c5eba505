"""The ground floor: HOW things run fast. numpy, scipy and `errors` only.

Ops and layers say what they compute and call the public functions below; every thread pool,
fixed block, column slice, row record, pooled buffer and in-place lock lives under this
package, and so does every tuned threshold (`tuning`). Each fast path gives the bits of its
plain path at any thread count, and `tiny()` / `reference()` put every one of them inside the
gradient proof, `counting()` saying which ran (`kernels.modes`).
"""

from mgsparse.kernels import tuning
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.kernels.attention import attention_rows, attention_rows_vjp
from mgsparse.kernels.blas import HELD as BLAS_HELD
from mgsparse.kernels.blas import blas_threads, limit_blas_threads
from mgsparse.kernels.blas import one_thread as one_blas_thread
from mgsparse.kernels.buffers import Buffers, output_array
from mgsparse.kernels.csr import CSRView, build_csr, index_dtype
from mgsparse.kernels.csr import matmul as csr_matmul
from mgsparse.kernels.csr import t_matmul as csr_t_matmul
from mgsparse.kernels.dense import add_rows, argmax_rows, column_sums, matmul, matmul_computed
from mgsparse.kernels.elementwise import (
    add,
    elu,
    elu_backward,
    leaky_relu,
    leaky_relu_backward,
    leaky_relu_into,
    masked_scale,
    multiply,
    relu,
    relu_dropout,
    relu_dropout_backward,
    scale_by_sign,
    sigmoid,
)
from mgsparse.kernels.inplace import freeze, is_frozen, lock, modified_in_place, own, unlock
from mgsparse.kernels.modes import counting, reference, tiny
from mgsparse.kernels.pool import (
    by_rows,
    default_num_threads,
    get_num_threads,
    nnz_blocks,
    num_threads,
    row_blocks,
    run_blocks,
    runs_as_one_call,
    set_num_threads,
)
from mgsparse.kernels.rows import (
    forget_rows,
    known_rows,
    mark_rows,
    matmul_tn,
    matmul_tn_computed,
    same_rows,
    sparse_rows,
)

__all__ = [
    "BLAS_HELD", "Buffers", "CSRView", "add_rows", "argmax_rows", "blas_threads", "build_csr",
    "by_rows", "column_sums", "counting", "csr_matmul", "csr_t_matmul", "default_num_threads",
    "forget_rows", "freeze", "get_num_threads", "index_dtype", "is_frozen", "keep_freed_memory",
    "known_rows", "limit_blas_threads", "lock", "mark_rows", "matmul", "matmul_computed",
    "matmul_tn", "matmul_tn_computed", "modified_in_place", "nnz_blocks", "num_threads",
    "one_blas_thread", "output_array", "own", "reference", "row_blocks", "run_blocks",
    "runs_as_one_call", "same_rows", "set_num_threads", "sparse_rows", "tiny", "tuning", "unlock",
]
__all__ += [  # the bodies of the elementwise ops and of GAT's edge softmax
    "add", "attention_rows", "attention_rows_vjp", "elu", "elu_backward", "leaky_relu",
    "leaky_relu_backward", "leaky_relu_into", "masked_scale", "multiply", "relu",
    "relu_dropout", "relu_dropout_backward", "scale_by_sign", "sigmoid",
]
