"""Consoles and the one place that turns a library error into a red line and an exit code."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mgsparse.errors import MgsparseError

out = Console()
err_console = Console(stderr=True)


def fail(err: MgsparseError | str, code: int | None = None) -> None:
    """Print one red line on stderr and exit: 1 for runtime failures, 2 for usage errors."""
    message = str(err).splitlines()[0] if str(err) else type(err).__name__
    if code is None:
        code = err.exit_code if isinstance(err, MgsparseError) else 1
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code) from None


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / 2**20:.2f} MB"


def summary_table(result) -> Table:
    """The end-of-training table: accuracies (mean ± std over runs), time, memory, placement."""
    s = result.summary()
    cfg = result.config
    table = Table(title=f"{cfg.model.kind.upper()} on {cfg.dataset.name}: summary", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    runs = s["runs"]
    spread = f" ± {s['test_acc_std']:.2%}" if runs > 1 else ""
    paper = f"   (paper: {s['paper_test_acc']:.1%})" if s["paper_test_acc"] else ""
    table.add_row("runs", f"{runs} (seeds {cfg.train.seed}..{cfg.train.seed + max(runs, 1) - 1})")
    table.add_row("test accuracy", f"{s['test_acc_mean']:.2%}{spread}{paper}")
    table.add_row("val accuracy", f"{s['val_acc_mean']:.2%}")
    table.add_row("best epoch", ", ".join(map(str, s["best_epochs"][:10])) or "-")
    table.add_row("epoch time (median)", f"{s['epoch_time_ms_median']:.2f} ms")
    total = sum(st.epoch_ms for r in result.runs for st in r.stats) / 1e3
    table.add_row("total training time", f"{total:.2f} s")
    if cfg.monitor.memory:
        table.add_row("peak traced memory", f"{s['peak_memory_mb']:.2f} MB")
    for operand, where in result.placement.items():
        table.add_row(operand, where)
    table.add_row("status", s["status"])
    return table


def memory_table(report: dict) -> Table:
    table = Table(title="where the memory of one training step went")
    table.add_column("held by")
    table.add_column("bytes", justify="right")
    for key in ("parameters", "optimizer_state", "adjacency", "features"):
        table.add_row(key.replace("_", " "), _mb(report[key]))
    for op, nbytes in report["saved_for_backward"].items():
        table.add_row(f"saved for backward by {op}", _mb(nbytes))
    table.add_row("[bold]tracemalloc peak of the step[/]", _mb(report["traced_peak"]))
    return table
