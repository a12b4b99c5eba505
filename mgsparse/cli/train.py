"""`mgsparse train` and `mgsparse evaluate`: options, one library call, and the live display."""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator, Optional

import typer

from mgsparse.cli import app
from mgsparse.cli.datasets import download_bar
from mgsparse.cli.live import TrainDisplay
from mgsparse.cli.render import err_console, fail, memory_table, out, summary_table, warn
from mgsparse.config import POINT_CLOUD_DATASETS, load_config
from mgsparse.errors import MgsparseError
from mgsparse.outputs import evaluate_saved, metrics_dict, output_dir, write_outputs
from mgsparse.plot import check_plot_target, save_training_plot
from mgsparse.problem import load_graph, prepare
from mgsparse.train import fit, measure_memory
from mgsparse.train_points import fit_points, measure_points_memory

EXIT_INTERRUPTED = 130  # the shell's convention for a run ended by SIGINT


@contextmanager
def _ctrl_c_ends_epoch() -> Iterator[list[bool]]:
    """The first Ctrl-C asks the run to stop after the current epoch; a second one aborts."""
    requested = [False]

    def handler(signum, frame):
        if requested[0]:
            raise KeyboardInterrupt
        requested[0] = True
        err_console.print("[yellow]Ctrl-C: stopping after this epoch (again to abort)[/]")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (e.g. inside a test runner thread)
        yield requested
        return
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)


def _downloads(silent: bool):
    return nullcontext(None) if silent else download_bar()


@app.command()
def train(
    config_path: Path = typer.Argument(..., metavar="CONFIG", help="YAML config, e.g. configs/cora.yaml"),
    set_: list[str] = typer.Option([], "--set", help="Override a key: --set optim.lr=0.005 (repeatable)"),
    runs: Optional[int] = typer.Option(None, "--runs", help="Repeat with seeds seed..seed+N-1"),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Override train.epochs"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write metrics.json and parameters here"),
    memory_report: bool = typer.Option(False, "--memory-report", help="End with where the memory went"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live display, only the summary"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout"),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Point clouds: save the decision boundary and loss curve (.png)"),
) -> None:
    """Train a GNN from a YAML config, with a live table of loss, accuracy, gradient norm and memory."""
    overrides = list(set_)
    overrides += [f"train.runs={runs}"] if runs is not None else []
    overrides += [f"train.epochs={epochs}"] if epochs is not None else []
    try:
        config = load_config(config_path, overrides)
        if plot:
            check_plot_target(plot, config.dataset.name)
        if out_dir:
            output_dir(out_dir)
        problem = _load_problem(config, quiet or as_json)
        display = TrainDisplay(config, problem, enabled=not (quiet or as_json))
        write = (lambda result: write_outputs(out_dir, result)) if out_dir else None
        with _ctrl_c_ends_epoch() as stop, display:
            result = _fit(config, problem, on_epoch=display.on_epoch, on_run_end=write,
                          should_stop=lambda: stop[0])
        if memory_report:
            report = (measure_points_memory(config) if problem is None
                      else measure_memory(config, problem))
            result.memory_report = report.to_dict()
        if out_dir:
            write_outputs(out_dir, result)
        if plot:
            saved = save_training_plot(result, plot)
            err_console.print(f"decision boundary and loss curve: {saved}", markup=False)
    except MgsparseError as e:
        fail(e)
    _report(result, as_json, memory_report)


def _load_problem(config, silent: bool):
    """The prepared graph, or None for a point cloud (moons, circles, blobs): no graph to load."""
    if config.dataset.name in POINT_CLOUD_DATASETS:
        return None
    with _downloads(silent) as progress:
        graph = load_graph(config.dataset, progress)
    return prepare(config, graph)


def _fit(config, problem, **callbacks):
    return fit_points(config, **callbacks) if problem is None else fit(config, problem, **callbacks)


def _report(result, as_json: bool, memory_report: bool) -> None:
    if as_json:
        out.print_json(json.dumps(metrics_dict(result)["summary"]))
    else:
        out.print(summary_table(result))
        if memory_report and result.memory_report:
            out.print(memory_table(result.memory_report))
    for run in result.runs:
        if run.message:
            warn(run.message)
    if result.failed:
        raise typer.Exit(1)
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)


@app.command()
def evaluate(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The --out folder of `mgsparse train`"),
    as_json: bool = typer.Option(False, "--json", help="Print the accuracies as JSON"),
) -> None:
    """Reload a finished run's best parameters and report its accuracies again."""
    try:
        with _downloads(as_json) as progress:
            rows = evaluate_saved(run_dir, progress)
    except MgsparseError as e:
        fail(e)
    if as_json:
        out.print_json(json.dumps(rows))
        return
    from rich.table import Table

    table = Table(title=f"evaluate {run_dir}")
    for col in ("run", "seed", "train acc", "val acc", "test acc", "val loss"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["run"]), str(r["seed"]), f"{r['train_acc']:.2%}",
                      f"{r['val_acc']:.2%}", f"{r['test_acc']:.2%}", f"{r['val_loss']:.4f}")
    out.print(table)
