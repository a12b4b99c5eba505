"""The `mgsparse` command line: the only package that imports typer and rich.

Each command module declares its options and makes one library call; this module composes
them into one app. Errors raised by the library (`MgsparseError`) are rendered once, as one
red line and an exit code (`mgsparse.cli.render.fail`).
"""

from __future__ import annotations

import errno
import os
import signal
import sys

import typer

import mgsparse
from mgsparse.cli import bench, datasets, explain, gradcheck, graph, partition, predict, train
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


app.command()(train.train)
app.command()(train.evaluate)
app.command()(predict.predict)
app.command()(explain.explain)
app.command("gradcheck")(gradcheck.gradcheck_command)
app.command()(bench.bench)
app.command()(graph.graph)
app.command()(partition.partition)
app.add_typer(datasets.datasets_app, name="datasets")


def _closed_streams() -> None:
    """Started with stdout or stderr closed (``mgsparse datasets list >&-``), Python has no
    stream object for it (None): say so on whichever is open, before any work, and exit 1,
    as for an output that refuses its bytes (`_unwritable_output`)."""
    if sys.stdout is not None and sys.stderr is not None:
        return
    closed = "standard output" if sys.stdout is None else "standard error"
    if sys.stderr is not None:
        sys.stderr.write(f"error: cannot write the output: {closed} is closed\n")
        sys.stderr.flush()
    elif sys.stdout is not None:
        sys.stdout.write(f"error: {closed} is closed\n")
        sys.stdout.flush()
    raise SystemExit(1)


def _tolerant_streams() -> None:
    """A terminal or pipe that cannot encode a glyph (PYTHONIOENCODING=ascii, LANG=C) gets a
    '?' for it, not a UnicodeEncodeError halfway through a table."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def _unwritable_output(err: OSError) -> None:
    """stdout or stderr refused the bytes (a full disk, a closed pipe): say so once where we
    still can, silence the stream so the interpreter's last flush stays quiet, exit 1."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.write(f"error: cannot write the output: {err.strerror or err}\n")
        sys.stderr.flush()
    except OSError:
        pass
    raise SystemExit(141 if err.errno == errno.EPIPE else 1)


def _click_error(err: Exception) -> None:
    """Click's own errors (typer runs on click, or on a copy of it: matched by class name):
    a mistyped command, option or value is one line, as every other error, exit 2, the help
    named in the line; Ctrl-C outside a command's own handling exits 130."""
    kinds = {c.__name__ for c in type(err).__mro__}
    if "Abort" in kinds:
        raise SystemExit(130) from None
    if "ClickException" not in kinds:
        raise err
    ctx = getattr(err, "ctx", None)
    where = f" (see {ctx.command_path} --help)" if "UsageError" in kinds and ctx else ""
    sys.stderr.write(f"error: {err.format_message()}{where}\n")
    raise SystemExit(err.exit_code) from None


def main() -> None:
    """Console-script entry point: run the app, turn library errors into exit codes.

    Click runs without its standalone mode so that a usage mistake is one `error:` line
    (its own rendering is a framed box of usage and hints); a command's `typer.Exit` comes
    back as its code."""
    _closed_streams()
    _tolerant_streams()
    try:
        _run(app)
    finally:
        _late_signals_ignored()


def _late_signals_ignored() -> None:
    """A command that was stopped leaves a do-nothing handler for late signals; this process
    is exiting now, and the interpreter's shutdown restores the default action, which a late
    Ctrl-C would turn into a kill: ignore them (SIG_IGN) for the rest of its life."""
    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is train.late_signal:
            signal.signal(s, signal.SIG_IGN)


def _run(app: typer.Typer) -> None:
    try:
        code = app(standalone_mode=False)
        sys.stdout.flush()
    except MgsparseError as err:  # raised outside a command body (e.g. while parsing)
        try:
            fail(err)
        except typer.Exit as done:  # outside typer, its Exit is ours to turn into a status
            raise SystemExit(done.exit_code) from None
    except OSError as err:
        _unwritable_output(err)
    except Exception as err:  # noqa: BLE001 -- click's errors; anything else is re-raised
        _click_error(err)
    else:
        if isinstance(code, int) and code:  # typer.Exit(code) inside a command
            raise SystemExit(code)
