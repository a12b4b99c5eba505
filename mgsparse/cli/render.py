"""Consoles and the one place that turns a library error into a red line and an exit code."""

from __future__ import annotations

import typer
from rich.console import Console

from mgsparse.errors import MgsparseError

out = Console()
err_console = Console(stderr=True)


def fail(err: MgsparseError | str, code: int | None = None) -> None:
    """Print one red line on stderr and exit: 1 for runtime failures, 2 for usage errors."""
    message = str(err).splitlines()[0] if str(err) else type(err).__name__
    if code is None:
        code = err.exit_code if isinstance(err, MgsparseError) else 1
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code) from None
