"""`mgsparse bench` in one call: the settings checked first, then the benchmark, then its files."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from mgsparse.bench.dense_vs_sparse import DenseVsSparseResult, bench_config, dense_vs_sparse
from mgsparse.bench.measure import Progress
from mgsparse.bench.sweep import SweepResult, parse_scale, scale_sweep
from mgsparse.errors import ConfigError, DataError
from mgsparse.run.placed import load_graph


def check_output(path: Path | None, what: str) -> None:
    """Refuse an output path whose folder is missing before minutes of benchmarking."""
    if path is not None and not path.parent.is_dir():
        raise DataError(f"{what} {path}: folder {path.parent} does not exist")


def run_benchmark(dense_vs_sparse_: bool, dataset: str | None, config_path: Path | None,
                  overrides: Sequence[str], scale: str | None, repeat: int, warmup: int,
                  budget_mb: float, tolerance: float, json_path: Path | None = None,
                  plot_path: Path | None = None, progress: Progress | None = None,
                  download_progress=None,
                  draw: Callable[[SweepResult, Path], object] | None = None,
                  ) -> DenseVsSparseResult | SweepResult:
    """Dense vs sparse on one graph, or (`scale`) the sweep over synthetic sizes; the
    results are written as JSON where asked, and the sweep handed to `draw` (the caller's
    picture, `mgsparse.cli.plots.plot_sweep`: bench sits below plots) with `plot_path`."""
    if not dense_vs_sparse_:
        raise ConfigError("choose a benchmark: --dense-vs-sparse")
    if plot_path is not None and scale is None:
        raise ConfigError("--plot draws the scaling sweep; add --scale")
    sizes = parse_scale(scale) if scale is not None else None
    config = bench_config(dataset, config_path, overrides)
    check_output(json_path, "--json")
    check_output(plot_path, "--plot")
    if sizes is not None:
        result = scale_sweep(config, sizes, repeat, warmup, budget_mb, tolerance, progress)
    else:
        graph = load_graph(config.dataset, download_progress)
        result = dense_vs_sparse(config, graph, repeat, warmup, tolerance, progress, budget_mb)
    if json_path is not None:
        try:
            json_path.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
        except OSError as err:
            raise DataError(f"cannot write {json_path}: {err.strerror or err}") from None
    if plot_path is not None and draw is not None:
        draw(result, plot_path)
    return result
