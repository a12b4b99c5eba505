"""`mgsparse gradcheck`: every op's and layer's gradient against its oracles, as a table.

Exit codes: 0 when every check passes, 1 when any fails, 2 for a bad argument (an unknown
op, which the message answers with the known ones; a size other than small or medium).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich import box
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from mgsparse import checks
from mgsparse.cli.render import err_console, fail, out
from mgsparse.errors import ConfigError, MgsparseError

BAR_DELAY_S = 0.5  # the default run is over before this: no bar flickers past
PIPE_WIDTH = 120  # a file or pipe has no width: print the table whole instead of at 80


class DelayedBar:
    """`run_checks`' progress callback: a bar on a terminal's stderr, shown only once the run
    has lasted BAR_DELAY_S, and gone when it ends."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, done: int, total: int, name: str) -> None:
        waited = time.perf_counter() - self.start
        if self.progress is None and err_console.is_terminal and waited > BAR_DELAY_S:
            self.progress = Progress(TextColumn("[bold]gradcheck"), BarColumn(),
                                     MofNCompleteColumn(), TextColumn("{task.description}"),
                                     console=err_console, transient=True)
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
    return "-" if math.isnan(x) else f"{x:.1e}"  # NaN: the check raised before measuring


def results_table(rows: list[checks.CheckRow], seed: int, size: str) -> Table:
    """One row per (op, oracle); an op's name, shapes and nnz are shown on its first row."""
    table = Table(title=f"gradient checks, float64, size {size}, seed {seed}",
                  box=box.SIMPLE_HEAD)
    table.add_column("op", no_wrap=True)
    table.add_column("input shapes", overflow="fold")
    table.add_column("nnz", justify="right", no_wrap=True)
    table.add_column("max abs err", justify="right", no_wrap=True)
    table.add_column("max rel err", justify="right", no_wrap=True)
    table.add_column("oracle", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for i, r in enumerate(rows):
        first = i == 0 or rows[i - 1].op != r.op
        last = i == len(rows) - 1 or rows[i + 1].op != r.op
        style = "" if r.passed else "bold red"
        table.add_row(r.op if first else "", _shapes(r.input_shapes) if first else "",
                      "" if not first or r.nnz is None else str(r.nnz), _err(r.max_abs_err),
                      _err(r.max_rel_err), r.oracle, "PASS" if r.passed else "FAIL",
                      style=style, end_section=last)
    return table


@contextmanager
def _pipe_width() -> Iterator[None]:
    """A file or pipe has no width: widen `out` from its default 80 columns meanwhile."""
    width = out.width
    if not out.is_terminal:
        out.width = max(width, PIPE_WIDTH)
    try:
        yield
    finally:
        out.width = width


def print_results(rows: list[checks.CheckRow], seed: int, size: str, seconds: float) -> None:
    """The table, a line per failure that has an explanation, and the summary line."""
    with _pipe_width():
        out.print(results_table(rows, seed, size))
        for r in rows:
            if r.detail:
                out.print(f"[bold red]FAIL[/] {r.op} ({r.oracle}): {escape(r.detail)}",
                          highlight=False)
        out.print(_summary(rows, seconds), highlight=False)


def results_dict(rows: list[checks.CheckRow], seed: int, size: str, seconds: float) -> dict:
    failed = [r for r in rows if not r.passed]
    return {"seed": seed, "size": size, "passed": not failed, "checks": len(rows),
            "failed": len(failed), "ops": len({r.op for r in rows}),
            "seconds": round(seconds, 3), "rows": [r.to_dict() for r in rows]}


def _summary(rows: list[checks.CheckRow], seconds: float) -> str:
    failed = sorted({r.op for r in rows if not r.passed})
    measured = [r for r in rows if not math.isnan(r.max_abs_err)]
    worst = max(measured, key=lambda r: r.max_abs_err, default=None)
    where = f"; worst abs err {worst.max_abs_err:.1e} ({worst.op}, {worst.oracle})" if worst else ""
    head = (f"[bold red]{len(failed)} of {len({r.op for r in rows})} ops failed[/]: "
            f"{', '.join(failed)}" if failed else
            f"[green]all {len(rows)} checks of {len({r.op for r in rows})} ops passed[/]")
    return f"{head}{where}; {seconds:.2f} s"


def gradcheck_command(
    op: list[str] = typer.Option(
        [], "--op", metavar="NAME",
        help="Check only this op (repeatable): a full name (sparse.spmm), a bare name (spmm; "
             "relu checks engine.relu and sparse.relu) or a group (engine, sparse, nn)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs and weightings."),
    size: str = typer.Option("small", "--size", metavar="small|medium",
                             help="Input size; the scalar oracle runs at small only."),
    json_path: Path | None = typer.Option(None, "--json", metavar="PATH",
                                             help="Also write the results as JSON here."),
) -> None:
    """Check every op's gradient in float64 against finite differences, its dense
    equivalent and the scalar Value engine; exit 1 if any check fails."""
    try:
        if json_path is not None and not json_path.parent.is_dir():
            raise ConfigError(f"--json: folder {json_path.parent} does not exist")
        names = checks.select_ops(op)
        started = time.perf_counter()
        with DelayedBar() as bar:
            rows = checks.run_checks(names, seed=seed, size=size, progress=bar)
        seconds = time.perf_counter() - started
    except MgsparseError as err:
        fail(err)
    print_results(rows, seed, size, seconds)
    if json_path is not None:
        try:
            json_path.write_text(json.dumps(results_dict(rows, seed, size, seconds), indent=2))
        except OSError as err:
            fail(f"cannot write {json_path}: {err.strerror}", code=1)
    raise typer.Exit(0 if all(r.passed for r in rows) else 1)
