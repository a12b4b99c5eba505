"""Benchmarks the CLI runs: the same GCN step on dense vs sparse operands, and its scaling.

`dense_vs_sparse` times and traces one step both ways and proves they compute the same
numbers; `sweep` repeats it over synthetic graphs of growing size; `measure` holds the timing
and memory helpers both use.
"""

from mgsparse.bench.dense_vs_sparse import (
    DenseVsSparseResult,
    Equivalence,
    RepresentationResult,
    bench_config,
)
from mgsparse.bench.sweep import SweepPoint, SweepResult, parse_scale, scale_sweep

# The comparison itself is `mgsparse.bench.dense_vs_sparse.dense_vs_sparse`: re-exported here
# it would hide the module of the same name.
__all__ = ["DenseVsSparseResult", "Equivalence", "RepresentationResult", "SweepPoint",
           "SweepResult", "bench_config", "parse_scale", "scale_sweep"]
