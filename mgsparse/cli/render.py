"""Every formatter of the CLI, the consoles, and the one place that turns a library error into
a red line and an exit code."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mgsparse.bench import DenseVsSparseResult, Equivalence, SweepResult
from mgsparse.catalog import is_triples
from mgsparse.errors import MgsparseError
from mgsparse.run import MemoryReport, SavedRunScores, TrainResult
from mgsparse.run.monitor import MB
from mgsparse.run.task import ACCURACY_METRICS, TaskMetrics


def _width() -> int | None:
    """The terminal width rich should use: COLUMNS when it is a sane number (COLUMNS=0 or junk
    would make rich print nothing at all), else rich's own guess."""
    columns = os.environ.get("COLUMNS", "")
    return None if not columns.isdigit() or int(columns) >= 20 else 80


out = Console(width=_width())
err_console = Console(stderr=True, width=_width())


def fail(err: MgsparseError | str, code: int | None = None) -> None:
    """Print one red line on stderr and exit: 1 for runtime failures, 2 for usage errors."""
    message = str(err).splitlines()[0] if str(err) else type(err).__name__
    if code is None:
        code = err.exit_code if isinstance(err, MgsparseError) else 1
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code) from None


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


# ---------------------------------------------------------------- train, evaluate


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / MB:.2f} MB"


def run_title(config) -> str:
    """What a run trains, for every title (live table, summary, pictures): the model on the
    dataset; a link run names its auto-encoder, the encoder and the task."""
    kind, name = config.model.kind.upper(), config.dataset.name
    if is_triples(name):
        scorer = {"distmult": "DistMult", "complex": "ComplEx", "transe": "TransE",
                  "rotate": "RotatE"}[config.kg.scorer]
        encoder = "R-GCN + " if config.kg.encoder == "rgcn" else ""
        return f"{encoder}{scorer} on {name}, knowledge-graph completion"
    if config.task == "link":
        autoencoder = "VGAE" if config.link.variational else "GAE"
        return f"{autoencoder} ({kind} encoder) on {name}, link prediction"
    return f"{kind} on {name}"


def run_unit(config) -> str:
    """"fold" for a k-fold series (run i is fold i), else "run"."""
    return "fold" if config.train.folds else "run"


def summary_table(result: TrainResult) -> Table:
    """The end-of-training table: the task's summary scores (mean ± std over runs), time,
    memory, placement."""
    s = result.summary()
    cfg = result.config
    table = Table(title=f"{run_title(cfg)}: summary", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    last_seed = cfg.train.seed + max(s.runs, 1) - 1
    table.add_row(f"{run_unit(cfg)}s", f"{s.runs} (seeds {cfg.train.seed}..{last_seed})")
    for label, value in summary_rows(result.metrics, s.scores, s.runs, s.paper_test_acc):
        table.add_row(label, value)
    for column, values in s.folds.items():  # k-fold: every fold's figure
        m = result.metrics.metric(column)
        table.add_row(f"{m.label} per fold", ", ".join(m.format(v, digits=1) for v in values))
    table.add_row("best epoch", ", ".join(map(str, s.best_epochs[:10])) or "-")
    table.add_row("epoch time (median)", f"{s.epoch_time_ms_median:.2f} ms")
    table.add_row("total training time", f"{s.total_time_s:.2f} s")
    if cfg.monitor.memory:
        table.add_row("peak traced memory", f"{s.peak_memory_mb:.2f} MB")
    for operand, where in result.placement.items():
        table.add_row(operand, where)
    table.add_row("status", s.status)
    return table


def summary_rows(metrics: TaskMetrics, scores: dict[str, float], runs: int,
                 paper: float | None) -> list[tuple[str, str]]:
    """(label, "mean ± std") per summarised column; the spread only over several runs and
    when declared, the paper's figure beside test accuracy when the catalog has one."""
    rows = []
    for column in metrics.summary_columns:
        m = metrics.metric(column)
        std = scores.get(f"{column}_std")
        spread = f" ± {m.format(std)}" if std is not None and runs > 1 else ""
        quoted = f"   (paper: {paper:.1%})" if paper and column == "test_acc" else ""
        rows.append((m.label, f"{m.format(scores[f'{column}_mean'])}{spread}{quoted}"))
    return rows


def memory_table(report: MemoryReport) -> Table:
    table = Table(title="where the memory of one training step went")
    table.add_column("held by")
    table.add_column("bytes", justify="right")
    table.add_row("parameters", _mb(report.parameters))
    table.add_row("optimizer state", _mb(report.optimizer_state))
    for operand, nbytes in report.operands.items():
        table.add_row(operand, _mb(nbytes))
    for op, nbytes in report.saved_for_backward.items():
        table.add_row(f"saved for backward by {op}", _mb(nbytes))
    table.add_row("[bold]held + the step's traced peak[/]", _mb(report.traced_peak))
    table.add_row("budget estimate of that peak", _mb(report.estimate))
    return table


def evaluate_table(run_dir, rows: list[SavedRunScores]) -> Table:
    """One row per saved run: its task's per-run columns, then the others (e.g. val loss)."""
    table = Table(title=f"evaluate {run_dir}")
    metrics = rows[0].metrics if rows else ACCURACY_METRICS
    shown = [*metrics.per_run, *(c for c in metrics.names if c not in metrics.per_run)]
    unit = "fold" if rows and rows[0].fold is not None else "run"  # k-fold: run i is fold i
    for col in (unit, "seed", *(c.replace("_", " ") for c in shown)):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r.run), str(r.seed),
                      *(metrics.metric(c).format(r.scores[c]) for c in shown))
    return table


# ---------------------------------------------------------------- bench


def _mb2(num_bytes: float) -> str:
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


def comparison_table(r: DenseVsSparseResult) -> Table:
    s, d = r.sparse, r.dense
    if r.step == "whole graph":
        title = (f"GCN whole-graph training step on {r.dataset}: {r.num_nodes:,} nodes, "
                 f"Â nnz {r.adjacency_nnz:,} ({_pct(s.adjacency_stored_fraction)}), ")
    else:  # only the features change representation: the blocks are sparse either way
        title = (f"GCN training step on {r.dataset}'s {r.step} (what `mgsparse train` runs; "
                 f"its Â blocks sparse both ways): ")
    table = Table(title=title + f"X nnz {r.feature_nnz:,} ({_pct(s.feature_stored_fraction)}); "
                                f"median of {r.repeat} steps after {r.warmup} warm-up")
    for column in ("", "median\nms", "IQR\nms", "peak\nMB", "est.\nMB", "step\nMB",
                   "operands\nMB", "RSS\nMB"):
        table.add_column(column, justify="left" if not column else "right", no_wrap=True)
    for row in (s, d):
        table.add_row(row.representation, _ms(row.step_ms_median), _ms(row.step_ms_iqr),
                      _mb2(row.traced_peak_bytes), _mb2(row.estimate_bytes),
                      _mb2(row.step_transient_bytes), _mb2(row.operand_bytes),
                      _mb2(row.rss_bytes))
    table.add_row("[bold]dense/sparse[/]", f"[bold]{r.time_ratio:.1f}x[/]", "",
                  f"[bold]{r.memory_ratio:.1f}x[/]", "",
                  f"{d.step_transient_bytes / max(s.step_transient_bytes, 1):.1f}x",
                  f"{d.operand_bytes / max(s.operand_bytes, 1):.1f}x", f"{r.rss_ratio:.2f}x")
    table.caption = ("peak: traced bytes from the operands' creation to the top of one step; "
                     "est.: the run's budget estimate of it; step: what the step itself added; "
                     "RSS: whole process")
    return table


def equivalence_line(eq: Equivalence) -> str:
    status = "[green]agree[/]" if eq.passed else "[bold red]DIFFER[/]"
    return (f"equivalence (same initial weights, dropout off): loss {eq.loss_sparse:.6f} vs "
            f"{eq.loss_dense:.6f}, max relative difference over loss and "
            f"{len(eq.grad_rel_diff)} gradients {eq.max_rel_diff:.2e} "
            f"(tolerance {eq.tolerance:g}): {status}")


def sweep_table(s: SweepResult) -> Table:
    table = Table(title=f"scaling sweep: GCN whole-graph step on synthetic SBM graphs, median of "
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


def sweep_lines(s: SweepResult) -> list[str]:
    sizes = [p.num_nodes for p in s.points]
    local = ", ".join(f"{a:,}→{b:,}: {k:.2f}" for a, b, k in
                      zip(sizes, sizes[1:], s.local_time_exponents))
    fitted = f"Â nnz {min(s.fit_nnz):,}..{max(s.fit_nnz):,}"
    kernel = s.kernel_time_exponent_large
    why = (": the excess over 1 is the memory hierarchy (cache misses), not the engine"
           if kernel is not None and kernel > 1.05 else "")
    lines = [(f"sparse whole-graph step time ∝ nnz^{_exp(s.time_exponent_all)} over all sizes; "
              f"∝ nnz^{_exp(s.time_exponent_large)} over {fitted} (fixed overhead left out)"),
             f"between consecutive sizes: {local or 'n/a'}",
             (f"reference, scipy's bare Â·H (the product under each layer, no engine) over "
              f"{fitted} ∝ nnz^{_exp(kernel)}{why}"),
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


# ---------------------------------------------------------------- datasets


def _size(num_bytes: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if num_bytes < 1024 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    return ""


def datasets_table(rows: list[dict]) -> Table:
    table = Table(title="datasets")
    for column in ("name", "description", "cached", "size"):
        table.add_column(column)
    for row in rows:
        cached = {True: "yes", False: "no"}.get(
            row["cached"], "your files" if row.get("source") == "files" else "built in")
        size = _size(row["size_bytes"]) if row["cached"] is not None else "-"
        table.add_row(row["name"], row["description"], cached, size)
    return table


def info_table(info: dict) -> Table:
    table = Table(title=f"{info['name']}", show_header=False)
    table.add_column("property", style="bold")
    table.add_column("value", justify="right")
    # counts with thousands separators, densities as percentages (as the live table and the
    # summary print them), a class and its count kept on one line ("3:818": a line may break between pairs only)
    labels = "  ".join(f"{c}:{n:,}" for c, n in enumerate(info["label_counts"]))
    rows = [
        ("nodes", f"{info['nodes']:,}"),
        ("edges (directed)", f"{info['edges']:,}"),
        ("features", f"{info['features']:,}"),
        ("feature storage", info["feature_storage"]),
        ("classes", f"{info['classes']:,}"),
        ("adjacency density", f"{info['adjacency_nnz_ratio']:.2%}"),
        ("feature density", f"{info['feature_nnz_ratio']:.2%}"),
        ("split train/val/test", f"{info['train']:,}/{info['val']:,}/{info['test']:,}"),
        ("unlabeled nodes", f"{info['unlabeled']:,}"),
        ("label counts", labels),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


PIPE_WIDTH = 120  # a file or pipe has no width: print a table whole instead of at 80


@contextmanager
def pipe_width(console: Console = out) -> Iterator[None]:
    """A file or pipe has no width: widen `console` from its default 80 columns meanwhile."""
    width = console.width
    if not console.is_terminal:
        console.width = max(width, PIPE_WIDTH)
    try:
        yield
    finally:
        console.width = width


# ---------------------------------------------------------------- partition


def partition_table(manifest: dict, out_dir) -> Table:
    table = Table(title=f"{manifest['num_parts']} parts in {out_dir} "
                        f"({manifest.get('method', 'metis')})")
    for column in ("part", "nodes", "halo rows"):
        table.add_column(column, justify="right")
    for i, (n, h) in enumerate(zip(manifest["nodes_per_part"], manifest["halo_per_part"])):
        table.add_row(str(i), f"{n:,}", f"{h:,}")
    table.caption = (f"edge cut: {manifest['cut_entries']:,} entries of Â; each epoch exchanges "
                     f"{manifest['bytes_per_epoch'] / MB:,.2f} MB in all")
    return table
