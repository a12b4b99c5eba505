"""`mgsparse bench --dense-vs-sparse`: the same GCN step with sparse and dense operands.

Exit codes: 0 when the two representations agree, 1 when their loss or gradients differ
beyond the tolerance (or the plot cannot be drawn: matplotlib missing), 2 for usage errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich import box
from rich.table import Table

from mgsparse import bench as lib
from mgsparse import sweep
from mgsparse.cli import app
from mgsparse.cli.datasets import download_bar
from mgsparse.cli.render import err_console, fail, out
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.plot import require_matplotlib
from mgsparse.problem import load_graph

MB = lib.MB


def _mb(num_bytes: float) -> str:
    return f"{num_bytes / MB:,.2f}"


def _mb1(num_bytes: float) -> str:
    mb = num_bytes / MB
    return f"{mb:.2f}" if mb < 10 else (f"{mb:.1f}" if mb < 100 else f"{mb:,.0f}")


def _count(n: int) -> str:
    """1000 -> 1k, 1100000 -> 1.1M: short enough for a ten-column table."""
    for unit, size in (("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else (f"{value:.1f}" if value < 100 else f"{value:,.0f}")


def _pct(fraction: float) -> str:
    return "100%" if fraction >= 1 else f"{fraction:.3%}"


def comparison_table(r: lib.DenseVsSparseResult) -> Table:
    s, d = r.sparse, r.dense
    table = Table(title=f"GCN training step on {r.dataset}: {r.num_nodes:,} nodes, "
                        f"Â nnz {r.adjacency_nnz:,} ({_pct(s.adjacency_stored_fraction)}), "
                        f"X nnz {r.feature_nnz:,} ({_pct(s.feature_stored_fraction)}); "
                        f"median of {r.repeat} steps after {r.warmup} warm-up")
    for column in ("", "median ms", "IQR ms", "peak MB", "step MB", "operands MB", "RSS MB"):
        table.add_column(column, justify="left" if not column else "right")
    for row in (s, d):
        table.add_row(row.representation, _ms(row.step_ms_median), _ms(row.step_ms_iqr),
                      _mb(row.traced_peak_bytes), _mb(row.step_transient_bytes),
                      _mb(row.operand_bytes), _mb(row.rss_bytes))
    table.add_row("[bold]dense/sparse[/]", f"[bold]{r.time_ratio:.1f}x[/]", "",
                  f"[bold]{r.memory_ratio:.1f}x[/]",
                  f"{d.step_transient_bytes / max(s.step_transient_bytes, 1):.1f}x",
                  f"{d.operand_bytes / max(s.operand_bytes, 1):.1f}x", f"{r.rss_ratio:.2f}x")
    table.caption = ("peak: traced bytes from the operands' creation to the top of one step; "
                     "step: what the step itself added; RSS: whole process")
    return table


def equivalence_line(eq: lib.Equivalence) -> str:
    status = "[green]agree[/]" if eq.passed else "[bold red]DIFFER[/]"
    return (f"equivalence (same initial weights, dropout off): loss {eq.loss_sparse:.6f} vs "
            f"{eq.loss_dense:.6f}, max relative difference over loss and "
            f"{len(eq.grad_rel_diff)} gradients {eq.max_rel_diff:.2e} "
            f"(tolerance {eq.tolerance:g}): {status}")


def sweep_table(s: sweep.SweepResult) -> Table:
    table = Table(title=f"scaling sweep: GCN step on synthetic SBM graphs, median of "
                        f"{s.repeat} steps (dense budget {s.memory_budget_mb:,.0f} MB)",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in ("nodes", "Â nnz", "sparse\nms", "IQR\nms", "scipy\nÂ·H ms",
                   "sparse\npeak MB", "dense\nms", "dense\npeak MB", "time\nd/s", "mem\nd/s"):
        table.add_column(column, justify="right", no_wrap=True)
    for p in s.points:
        sp_, d = p.sparse, p.dense
        dense_cells = ([_ms(d.step_ms_median), _mb1(d.traced_peak_bytes),
                        f"{d.step_ms_median / sp_.step_ms_median:.0f}x",
                        f"{d.traced_peak_bytes / max(sp_.traced_peak_bytes, 1):.0f}x"]
                       if d else ["skipped", "", "", ""])
        table.add_row(_count(p.num_nodes), _count(p.adjacency_nnz), _ms(sp_.step_ms_median),
                      _ms(sp_.step_ms_iqr), _ms(p.kernel_ms), _mb1(sp_.traced_peak_bytes),
                      *dense_cells)
    return table


def _exp(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "n/a (fewer than two sizes)"


def sweep_lines(s: sweep.SweepResult) -> list[str]:
    sizes = [p.num_nodes for p in s.points]
    local = ", ".join(f"{a:,}→{b:,}: {k:.2f}" for a, b, k in
                      zip(sizes, sizes[1:], s.local_time_exponents))
    fitted = f"Â nnz {min(s.fit_nnz):,}..{max(s.fit_nnz):,}"
    kernel = s.kernel_time_exponent_large
    why = (": the excess over 1 is the memory hierarchy (cache misses), not the engine"
           if kernel is not None and kernel > 1.05 else "")
    lines = [(f"sparse step time ∝ nnz^{_exp(s.time_exponent_all)} over all sizes; "
              f"∝ nnz^{_exp(s.time_exponent_large)} over {fitted} (fixed overhead left out)"),
             f"between consecutive sizes: {local or 'n/a'}",
             f"scipy's bare Â·H over {fitted} ∝ nnz^{_exp(kernel)}{why}",
             (f"sparse traced peak ∝ nnz^{_exp(s.memory_exponent_large)} "
              f"(all sizes: {_exp(s.memory_exponent_all)})")]
    if s.dense_time_exponent_nodes is not None:
        lines.append(f"dense step time ∝ nodes^{s.dense_time_exponent_nodes:.2f}")
    lines += [f"n={p.num_nodes:,}: {p.dense_skipped}" for p in s.points if p.dense_skipped]
    checked = [p for p in s.points if p.equivalence]
    if checked:
        worst = max(p.equivalence.max_rel_diff for p in checked)
        status = "[green]agree[/]" if s.passed else "[bold red]DIFFER[/]"
        lines.append(f"equivalence at {len(checked)} size(s) where dense ran: max relative "
                     f"difference {worst:.2e}: {status}")
    return lines


def _write_json(path: Path, data: dict) -> None:
    try:
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError as err:
        raise MgsparseError(f"cannot write {path}: {err.strerror or err}") from None


def _status(message: str) -> None:
    err_console.print(f"[dim]{message}[/]", highlight=False)


@app.command()
def bench(
    dense_vs_sparse: bool = typer.Option(False, "--dense-vs-sparse",
                                         help="Time and trace one GCN step, sparse vs dense."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="cora (default), citeseer, "
                                          "pubmed, karate or synthetic"),
    config_path: Optional[Path] = typer.Option(None, "--config", help="YAML config (model, "
                                               "optimizer, dataset settings)"),
    set_: list[str] = typer.Option([], "--set", help="Override a key: --set model.hidden=64"),
    repeat: int = typer.Option(20, "--repeat", help="Timed steps per representation"),
    warmup: int = typer.Option(3, "--warmup", help="Untimed steps before timing"),
    scale: Optional[str] = typer.Option(None, "--scale", help="Sweep node counts, e.g. "
                                        "1000,10000,100000,1000000 (needs --dataset synthetic)"),
    budget_mb: float = typer.Option(2048.0, "--memory-budget-mb", help="Refuse dense when "
                                    "its estimated memory exceeds this (skipped in a sweep)"),
    tolerance: float = typer.Option(1e-4, "--tolerance", help="Max relative difference "
                                    "allowed between the two representations"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results "
                                             "as JSON to this file"),
    plot_path: Optional[Path] = typer.Option(None, "--plot", help="PNG of the sweep (needs "
                                             "matplotlib: pip install 'mgsparse\\[plot]'; "
                                             "exit 1 without it)"),
) -> None:
    """Benchmark the sparse engine against dense operands on the same GCN training step."""
    try:
        if not dense_vs_sparse:
            raise ConfigError("choose a benchmark: --dense-vs-sparse")
        if plot_path is not None and scale is None:
            raise ConfigError("--plot draws the scaling sweep; add --scale")
        sizes = sweep.parse_scale(scale) if scale is not None else None
        config = lib.bench_config(dataset, config_path, set_)
        if plot_path is not None:
            require_matplotlib()  # fail before a sweep of minutes, not after it
        if sizes is not None:
            result = sweep.scale_sweep(config, sizes, repeat, warmup, budget_mb, tolerance,
                                       progress=_status)
        else:
            with download_bar() as progress:
                graph = load_graph(config.dataset, progress)
            result = lib.dense_vs_sparse(config, graph, repeat, warmup, tolerance, _status,
                                         budget_mb)
        if json_path is not None:
            _write_json(json_path, result.to_dict())
        if plot_path is not None:
            sweep.plot_sweep(result, plot_path)
    except MgsparseError as e:
        fail(e)
    _report(result, json_path, plot_path)


def _report(result, json_path: Optional[Path], plot_path: Optional[Path]) -> None:
    if isinstance(result, sweep.SweepResult):
        out.print(sweep_table(result))
        for line in sweep_lines(result):
            out.print(line, highlight=False)
        passed = result.passed
    else:
        out.print(comparison_table(result))
        out.print(equivalence_line(result.equivalence), highlight=False)
        out.print(f"[bold]verdict:[/] {result.verdict()}", highlight=False)
        passed = result.equivalence.passed
    for what, path in (("JSON", json_path), ("plot", plot_path)):
        if path is not None:
            out.print(f"{what} written to {path}", highlight=False)
    if not passed:
        raise typer.Exit(1)
