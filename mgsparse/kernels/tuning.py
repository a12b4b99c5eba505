"""Every tuned threshold of the kernels, in one table, each with the benchmark that sets it.

A threshold only chooses *how* a result is computed (one call or row blocks, the CSR kernel or
column slices, a whole pass or the recorded rows), never *what*: every path gives the bits of
the one-call path at any thread count. The kernels read these names at call time
(`tuning.MIN_BLOCK_ROWS`, never a copy taken at import), so `kernels.tiny()` can lower them all
at once and run every fast path at gradient-check sizes (`kernels.modes`).
"""

from __future__ import annotations

# ---------------------------------------------------------------- the pool (kernels.pool)

# rows below which a row block costs more in hand-off than it saves; also the size from which
# a gradient's nonzero rows are looked for (`kernels.rows`). python benchmarks/threads.py
MIN_BLOCK_ROWS = 4096
MAX_BLOCKS = 64  # row blocks one call is cut into at the most
# multiply-adds under which a dense product runs as one BLAS call. python benchmarks/threads.py
MIN_PARALLEL_WORK = 1 << 20
# elements under which elementwise work runs as one call. python benchmarks/threads.py
MIN_PARALLEL_ELEMENTS = 1 << 20

# ---------------------------------------------------------------- dense bodies (kernels.dense)

# rows from which `add_rows` tiles a bias (below, one plain call); elements numpy's inner loop
# gets per step once it is tiled. python benchmarks/ab_speed.py bias
TILED_ROWS = 1024
TILED_WIDTH = 512
CACHE_ROWS = 1024  # rows of a computed operand made at once (~0.5 MB at 128 floats)

# ---------------------------------------------------------------- row records (kernels.rows)

SPARSE_ROWS_MAX = 1 / 4  # share of nonzero rows up to which a gradient is taken row-sparse
COUNT_BLOCKS = 16  # row blocks a gradient's nonzero rows are counted in, stopping at the limit

# ---------------------------------------------------------------- column slices (kernels.slices)

# columns of X from which, at two threads, slices beat the CSR kernel's row blocks;
# output bytes a slice is cut to. python benchmarks/slice_size.py
MIN_WIDTH = 2
SLICE_BYTES = 4 << 20

# ---------------------------------------------------------------- sparse ops (sparse.ops, .graph)

SCATTER_CHUNKS = 4  # fixed chunks of entries a large scatter-add sums separately
SDDMM_CHUNK = 1 << 20  # gathered entries per SDDMM block: bounds its temporaries (~4-8 MB)
# entries per row block of GAT's attention softmax: a GAT step at 2 threads against the
# one-pass op, 0.82-0.91x at 2^17. python benchmarks/ab_speed.py attention --threads 2
ENTRIES_PER_BLOCK = 1 << 17

# ---------------------------------------------------------------- pooled buffers

GROWTH = 1.25  # a pooled buffer replaced for being too small grows by at least this factor

# the values `kernels.tiny()` sets: each fast path then runs on gradcheck's small inputs
# (a few rows, a few entries), while every result stays the one-call path's bits
TINY = {
    "MIN_BLOCK_ROWS": 2,
    "MAX_BLOCKS": 64,
    "MIN_PARALLEL_WORK": 1,
    "MIN_PARALLEL_ELEMENTS": 1,
    "TILED_ROWS": 2,
    "TILED_WIDTH": 4,
    "CACHE_ROWS": 2,
    "SPARSE_ROWS_MAX": 1 / 2,
    "COUNT_BLOCKS": 3,
    "MIN_WIDTH": 2,
    "SLICE_BYTES": 128,  # a vector's Aᵀ·x at 1 thread one CSC call, wider outputs in slices
    "SCATTER_CHUNKS": 3,
    "SDDMM_CHUNK": 5,
    "ENTRIES_PER_BLOCK": 4,
}

# `kernels.tiny(regroup=False)`: the paths whose floats may differ from the one call's by
# design take it. aᵀ·g adds row-block partials (or sums over g's nonzero rows only), a long
# scatter-add adds chunks' sums; and a dense product's row blocks are BLAS calls of other
# shapes, which at gradcheck sizes BLAS computes with other kernels (3 × 4 by 4 × 3 in blocks
# of 2 and 1 rows: 1.8e-15 off; at 9,700-100,000 rows in 4-26 blocks: the same bits)
ONE_CALL_SUMS = {"MIN_PARALLEL_WORK": 1 << 62, "CACHE_ROWS": 1 << 62, "SCATTER_CHUNKS": 1}

# the values `kernels.reference()` sets: no size reaches a fast path (with `modes.State`)
_NEVER = 1 << 62
REFERENCE = {
    "MIN_BLOCK_ROWS": _NEVER,
    "MAX_BLOCKS": 1,
    "MIN_PARALLEL_WORK": _NEVER,
    "MIN_PARALLEL_ELEMENTS": _NEVER,
    "TILED_ROWS": _NEVER,
    "CACHE_ROWS": _NEVER,
    "SPARSE_ROWS_MAX": 0,
    "COUNT_BLOCKS": 1,
    "SLICE_BYTES": _NEVER,
    "SCATTER_CHUNKS": 1,
    "SDDMM_CHUNK": _NEVER,
    "ENTRIES_PER_BLOCK": _NEVER,
}
