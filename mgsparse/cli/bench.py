"""`mgsparse bench --dense-vs-sparse`: the same GCN step with sparse and dense operands.

The whole-graph step first; then, when the config trains on receptive fields (Cora's
default), the receptive-field step `mgsparse train` runs, each table titled with its step.

Exit codes: 0 when the two representations agree, 1 when their loss or gradients differ
beyond the tolerance (or the plot cannot be drawn: matplotlib missing), 2 for usage errors.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mgsparse.bench import SweepResult
from mgsparse.bench.run import run_benchmark
from mgsparse.cli.outputs import PICTURES, check_output, write_json
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import (
    comparison_table,
    equivalence_line,
    err_console,
    fail,
    out,
    sweep_lines,
    sweep_table,
)
from mgsparse.errors import ConfigError, MgsparseError


def _status(message: str) -> None:
    err_console.print(f"[dim]{message}[/]", highlight=False)


def _check_outputs(json_path: Path | None, plot_path: Path | None) -> None:
    """The output rule (cli/outputs.py), and matplotlib for a picture: before a sweep of
    minutes, not after it."""
    from mgsparse.cli import plots

    taken: dict[Path, str] = {}
    check_output(json_path, "--json", taken=taken)
    check_output(plot_path, "--plot", suffixes=PICTURES, taken=taken)
    if plot_path is not None:
        plots.require_matplotlib()


def bench(
    dense_vs_sparse: bool = typer.Option(False, "--dense-vs-sparse", metavar="",
                                         help="Time and trace the GCN whole-graph step, "
                                         "sparse vs dense (and the receptive-field step when "
                                         "the config trains on one)."),
    dataset: str | None = typer.Option(None, "--dataset", help="A graph dataset (default: "
                                          "the first in `mgsparse datasets list`)"),
    config_path: Path | None = typer.Option(None, "--config", help="YAML config (model, "
                                               "optimizer, dataset settings)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a key: --set model.hidden=64"),
    repeat: int = typer.Option(20, "--repeat", help="Timed steps per representation"),
    warmup: int = typer.Option(3, "--warmup", help="Untimed steps before timing"),
    scale: str | None = typer.Option(None, "--scale", help="Sweep node counts, e.g. "
                                        "1000,10000,100000,1000000 (needs --dataset synthetic)"),
    budget_mb: float = typer.Option(2048.0, "--memory-budget-mb", help="Refuse dense when "
                                    "its estimated memory exceeds this (skipped in a sweep)"),
    tolerance: float = typer.Option(1e-4, "--tolerance", help="Max relative difference "
                                    "allowed between the two representations"),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results "
                                             "as JSON to this file (its folders are created)"),
    plot_path: Path | None = typer.Option(None, "--plot", help="PNG of the sweep (needs "
                                             "matplotlib: pip install matplotlib; "
                                             "exit 1 without it)"),
) -> None:
    """Benchmark the sparse engine against dense operands on the same GCN training step."""
    from mgsparse.cli import plots  # matplotlib itself only when a picture is drawn

    try:
        if plot_path is not None and scale is None:
            raise ConfigError("--plot draws the scaling sweep; add --scale")
        _check_outputs(json_path, plot_path)
        with download_bar() as downloads:
            result = run_benchmark(dense_vs_sparse, dataset, config_path, set_, scale, repeat,
                                   warmup, budget_mb, tolerance, progress=_status,
                                   download_progress=downloads)
        if json_path is not None:
            write_json(json_path, result.to_dict())
        if plot_path is not None:
            plots.plot_sweep(result, plot_path)
    except MgsparseError as e:
        fail(e)
    if isinstance(result, SweepResult):
        out.print(sweep_table(result))
        for line in sweep_lines(result):
            out.print(line, highlight=False)
        passed = result.passed
    else:
        for compared in filter(None, (result, result.receptive_field)):
            out.print(comparison_table(compared))
            out.print(equivalence_line(compared.equivalence), highlight=False)
            out.print(f"[bold]verdict:[/] {compared.verdict()}", highlight=False)
        passed = result.passed
    for what, path in (("JSON", json_path), ("plot", plot_path)):
        if path is not None:
            out.print(f"{what} written to {path}", highlight=False)
    if not passed:
        raise typer.Exit(1)
