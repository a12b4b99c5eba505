"""`mgsparse bench` in one call: the settings checked first, then the benchmark, then its files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mgsparse.bench.dense_vs_sparse import DenseVsSparseResult, bench_config, dense_vs_sparse
from mgsparse.bench.measure import Progress
from mgsparse.bench.sweep import SweepResult, parse_scale, scale_sweep
from mgsparse.errors import ConfigError
from mgsparse.run.placed import load_graph


def run_benchmark(dense_vs_sparse_: bool, dataset: str | None, config_path: Path | None,
                  overrides: Sequence[str], scale: str | None, repeat: int, warmup: int,
                  budget_mb: float, tolerance: float, progress: Progress | None = None,
                  download_progress=None) -> DenseVsSparseResult | SweepResult:
    """Dense vs sparse on one graph, or (`scale`) the sweep over synthetic sizes. Writing
    the results (JSON, the sweep's picture) is the caller's: the CLI checks and writes
    every output path by one rule (`mgsparse.cli.outputs`)."""
    if not dense_vs_sparse_:
        raise ConfigError("choose a benchmark: --dense-vs-sparse")
    sizes = parse_scale(scale) if scale is not None else None
    config = bench_config(dataset, config_path, overrides)
    if sizes is not None:
        result = scale_sweep(config, sizes, repeat, warmup, budget_mb, tolerance, progress)
    else:
        graph = load_graph(config.dataset, download_progress)
        result = dense_vs_sparse(config, graph, repeat, warmup, tolerance, progress, budget_mb)
    return result
