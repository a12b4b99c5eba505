"""The `mgsparse` command line: the only package that imports typer and rich.

Each command module declares options and makes one library call; errors raised by the
library (`MgsparseError`) are rendered here once, as one red line and an exit code.
"""

from __future__ import annotations

import typer

import mgsparse
from mgsparse.cli.render import fail
from mgsparse.errors import MgsparseError

app = typer.Typer(
    name="mgsparse",
    help="Train graph neural networks on a small autograd engine with sparse backward passes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mgsparse {mgsparse.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """mgsparse: sparse autograd for graph neural networks, on numpy and scipy."""


def _register_commands() -> None:
    # Imported here so that each module can import `app` from this package.
    from mgsparse.cli import commands  # noqa: F401


def main() -> None:
    """Console-script entry point: run the app, turn library errors into exit codes."""
    _register_commands()
    try:
        app(standalone_mode=True)
    except MgsparseError as err:  # raised outside a command body (e.g. while parsing)
        fail(err)
