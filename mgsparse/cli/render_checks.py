"""The gradient checks as the CLI prints them: the table, its summary lines, the fast-path
sweep's lines and the delayed progress bar."""

from __future__ import annotations

import math
import time

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from mgsparse.checks import CheckReport, SweepReport
from mgsparse.cli.render import err_console

BAR_DELAY_S = 0.5  # the default run is over before this: no bar flickers past


class DelayedBar:
    """`run_checks`' progress callback: a bar on a terminal's stderr, shown only once the run
    has lasted BAR_DELAY_S, and gone when it ends."""

    def __init__(self, console: Console | None = None, delay_s: float | None = None) -> None:
        self.console = console or err_console
        self.delay_s = BAR_DELAY_S if delay_s is None else delay_s
        self.start = time.perf_counter()
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, done: int, total: int, name: str) -> None:
        waited = time.perf_counter() - self.start
        if self.progress is None and self.console.is_terminal and waited > self.delay_s:
            self.progress = Progress(TextColumn("[bold]gradcheck"), BarColumn(),
                                     MofNCompleteColumn(), TextColumn("{task.description}"),
                                     console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(name, total=total, completed=done)
        if self.progress is not None:
            self.progress.update(self.task, completed=done, description=name)

    def __enter__(self) -> DelayedBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


def _shapes(shapes: tuple) -> str:
    return ", ".join("×".join(map(str, s)) if s else "()" for s in shapes)


def _err(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1e}"  # NaN: nothing measured (raised, or no entries)


# the oracles' names as the table prints them, short enough for 80 columns; its caption
# spells them out (the report, its JSON and the summary line keep the full names)
ORACLE_SHORT = {"finite differences": "finite diff", "dense equivalent": "dense"}
GRADCHECK_CAPTION = ("abs/rel err: the largest error of the gradient against the oracle · "
                     "finite diff: central finite differences · dense: the same op on dense "
                     "arrays · scalar: micrograd's Value engine")


def gradcheck_table(report: CheckReport) -> Table:
    """One row per (op, oracle); an op's name and nnz are shown on its first row, its input
    shapes on the line under the name (wrapped at commas in the name's width). Every other
    cell is kept whole, so the table fits 80 columns: 28 for the longest op name, 48 for
    the rest."""
    what = ("fast paths: kernels.tiny() at " + " and ".join(map(str, report.threads))
            + " threads" if isinstance(report, SweepReport) else "gradient checks")
    table = Table(title=f"{what}, float64, size {report.size}, seed {report.seed}",
                  caption=GRADCHECK_CAPTION, caption_justify="left", box=box.SIMPLE_HEAD)
    for name in ("op (input shapes)", "nnz", "abs err", "rel err", "oracle", "result"):
        table.add_column(name, no_wrap=name != "op (input shapes)",
                         justify="right" if name in ("nnz", "abs err", "rel err") else "left")
    rows = report.rows
    for i, r in enumerate(rows):
        first = i == 0 or rows[i - 1].op != r.op
        last = i == len(rows) - 1 or rows[i + 1].op != r.op
        op = f"{escape(r.op)}\n[dim]{escape(_shapes(r.input_shapes))}[/]" if first else ""
        table.add_row(op, "" if not first or r.nnz is None else str(r.nnz), _err(r.max_abs_err),
                      _err(r.max_rel_err), ORACLE_SHORT.get(r.oracle, r.oracle), r.verdict,
                      style="" if r.passed else "bold red", end_section=last)
    return table


def gradcheck_lines(report: CheckReport) -> list[str]:
    """A line per failure that has an explanation, then the summary line."""
    lines = [f"[bold red]FAIL[/] {r.op} ({r.oracle}): {escape(r.detail)}"
             for r in report.rows if r.detail]
    worst = report.worst
    where = (f"; worst abs err {worst.max_abs_err:.1e} ({worst.op}, {worst.oracle})"
             if worst else "")
    empty = len(report.rows) - report.gradient_checks
    shapes = f" (+{empty} shapes only: no entries)" if empty else ""
    failed = report.failed_ops
    checks, ops = report.gradient_checks, len(report.ops)
    head = (f"[bold red]{len(failed)} of {_count(ops, 'op')} failed[/]: {', '.join(failed)}"
            if failed else
            f"[green]{'all ' if checks > 1 else ''}{_count(checks, 'check')} of "
            f"{_count(ops, 'op')} passed[/]{shapes}")
    return [*lines, f"{head}{where}; {report.seconds:.2f} s"]


def _count(n: int, noun: str) -> str:
    """``1 op``, ``3 ops``: a count with its noun in the number it takes."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def fast_paths_lines(report: SweepReport) -> list[str]:
    """A line per failure that has an explanation, the paths taken, then the summary: cases ×
    thread counts, the worst error against finite differences and against the reference."""
    lines = [f"[bold red]FAIL[/] {r.op} ({r.oracle}): {escape(r.detail)}"
             for r in report.rows if r.detail]
    seen = report.seen
    lines.append("paths taken: " + ", ".join(f"{k} {n:,}" for k, n in seen.items()))
    if report.missing:
        lines.append(f"[bold red]no case took[/]: {', '.join(report.missing)}")
    worst = []
    for label, pick in (("finite differences", lambda o: o.endswith("finite differences")),
                        ("reference", lambda o: "reference" in o)):
        rows = [r for r in report.rows if pick(r.oracle) and math.isfinite(r.max_abs_err)]
        if rows:
            w = max(rows, key=lambda r: r.max_abs_err)
            worst.append(f"worst abs err against {label} {w.max_abs_err:.1e} ({w.op})")
    failed = report.failed_ops
    cases = f"{len(report.ops)} cases × {len(report.threads)} thread counts"
    head = (f"[bold red]{len(failed)} of {cases} failed[/]: {', '.join(failed)}" if failed
            else f"[bold red]{cases}: a fast path was never taken[/]" if report.missing
            else f"[green]{cases}: all {report.gradient_checks} checks passed[/]")
    return [*lines, "; ".join([head, *worst, f"{report.seconds:.2f} s"])]
