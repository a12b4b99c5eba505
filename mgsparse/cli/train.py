"""`mgsparse train` and `mgsparse evaluate`: options, one library call each, the live display."""

from __future__ import annotations

import json
import shlex
import signal
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import typer

from mgsparse.cli.live import TrainDisplay
from mgsparse.cli.outputs import PICTURES, RunFolderPaths, check_output
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import (
    err_console,
    evaluate_table,
    fail,
    memory_table,
    out,
    summary_table,
    warn,
)
from mgsparse.config import load_config
from mgsparse.distributed.comm import quiet_rank
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.kernels import keep_freed_memory
from mgsparse.run import (
    evaluate_saved,
    fit,
    make_task,
    measure_memory,
    metrics_dict,
)
from mgsparse.run.checkpoint import RunFolder
from mgsparse.run.resume import FullCheckpoints, check_same_config, read_checkpoint
from mgsparse.run.tasks.partitioned import DistributedGraphTask, PartitionedRun

EXIT_INTERRUPTED = 130  # the shell's convention for a run ended by SIGINT
EXIT_TERMINATED = 143  # ... and by SIGTERM (128 + 15)


class _Signals:
    """Ctrl-C or SIGTERM asks the run to stop after the current epoch; a second one aborts
    the epoch at once. The first is recorded whenever it comes, so a series always stops:
    one that lands while the run folder is written stops the series after the next epoch.
    The abort is one KeyboardInterrupt, raised only while an epoch may be under way: once
    the loop has been told to stop (`should_stop` said yes), once training is over or
    aborted (`finishing`) and while the run folder is written (`shield`), further signals
    only say so. Whatever their timing, what the run wrote is kept."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.finishing = False
        self.writing = False
        self.aborted = False  # the abort was raised: what fails after it is its doing

    def should_stop(self) -> bool:
        if self.received is not None:
            self.finishing = True  # the loop ends the run now: no epoch left to abort
        return self.received is not None

    def shield(self, write):
        """`write` (the run folder's writer) with signals held off while it runs."""
        def shielded(result) -> None:
            self.writing = True
            try:
                write(result)
            finally:
                self.writing = False
        return shielded

    def handler(self, signum, frame) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        first = self.received is None
        if first:
            self.received = signum
        if self.finishing or self.writing:
            then = ", then stopping" if first and not self.finishing else ""
            err_console.print(f"[yellow]{name}: writing what the run produced first{then}[/]")
            return
        if not first:
            self.finishing = self.aborted = True  # one abort only: the loop's clean-up is
            raise KeyboardInterrupt  # not cut short
        err_console.print(f"[yellow]{name}: stopping after this epoch (again to abort)[/]")


@contextmanager
def _signals_end_epoch() -> Iterator[_Signals]:
    state = _Signals()
    try:
        previous = {s: signal.signal(s, state.handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread (e.g. inside a test runner thread)
        yield state
        return
    try:
        yield state
    finally:  # an interrupted command is only exiting now: a late signal must not kill it
        for s, old in previous.items():  # with a traceback or the wrong status
            signal.signal(s, old if state.received is None else late_signal)


def late_signal(signum: int, frame: object) -> None:
    """A signal after the run was stopped changes nothing. A handler, not SIG_IGN: an ignored
    signal would stay ignored in every process this one starts (an exec keeps SIG_IGN), so a
    child started later, in a test runner that ran this command, could never be stopped. The
    entry point (`mgsparse.cli.main`) turns it into SIG_IGN as the process exits."""


def _downloads(silent: bool):
    return nullcontext(None) if silent else download_bar()


def train(
    config_path: Path | None = typer.Argument(
        None, metavar="CONFIG", help="YAML config, e.g. configs/cora.yaml (--resume: optional)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a key: --set optim.lr=0.005 (repeatable)"),
    runs: int | None = typer.Option(None, "--runs", help="Repeat with seeds seed..seed+N-1"),
    epochs: int | None = typer.Option(None, "--epochs", help="Override train.epochs"),
    folds: int | None = typer.Option(
        None, "--folds", help="Graph classification: stratified k-fold cross-validation, one "
        "model per fold, the test folds' accuracy as mean ± std (train.folds)"),
    out_dir: Path | None = typer.Option(None, "--out", help="Write metrics.json and parameters here"),
    memory_report: bool = typer.Option(False, "--memory-report", metavar="",
                                       help="End with where the memory went"),
    quiet: bool = typer.Option(False, "--quiet", "-q", metavar="",
                               help="No live display, only the summary"),
    as_json: bool = typer.Option(False, "--json", metavar="",
                                 help="Print the summary as JSON on stdout"),
    plot: Path | None = typer.Option(
        None, "--plot", help="Save the run's pictures (.png, .svg or .pdf; needs matplotlib)"),
    partitions: Path | None = typer.Option(
        None, "--partitions", help="Train over MPI on the parts `mgsparse partition` wrote: "
        "mpiexec -n K mgsparse train CONFIG --partitions DIR"),
    resume: Path | None = typer.Option(
        None, "--resume", help="Continue the stopped run in DIR from its full checkpoint "
        "(bitwise the run that never stopped)", metavar="DIR"),
) -> None:
    """Train a GNN from a YAML config, with a live table of loss, accuracy, gradient norm and memory."""
    from mgsparse.cli import plots  # matplotlib itself is imported only when a picture is drawn

    overrides = list(set_)
    overrides += [(f"train.{key}={value}", f"--{key} {value}")  # errors name the flag typed
                  for key, value in (("runs", runs), ("epochs", epochs), ("folds", folds))
                  if value is not None]
    try:
        config, checkpoints, out_dir = _config_and_checkpoints(config_path, overrides, out_dir,
                                                               resume)
        _check_outputs(out_dir, plot, config.train.runs)
        writer = _Writer(out_dir, checkpoints.folder if checkpoints is not None else None)
        keep_freed_memory()  # a step's arrays reuse freed pages: no page fault per 4 KB
        if partitions is not None:
            _refuse_for_partitions(plot, memory_report, resume)
            return _train_partitioned(config, partitions, writer, quiet or as_json, as_json)
        with _downloads(quiet or as_json) as progress:
            task = make_task(config, progress)
        for event in task.budget_events:
            warn(event.message)
        if checkpoints is not None and resume is None:
            checkpoints.discard()  # an older series' checkpoint is not this run's
        display = TrainDisplay(config, task.densities, not (quiet or as_json), task.metrics,
                               out_dir / "epochs.csv" if out_dir is not None else None)
        if checkpoints is not None and checkpoints.resumes is not None:
            _say_resuming(checkpoints, display)
        with _signals_end_epoch() as signals:
            result, aborted = _fit(config, task, display, signals, writer, checkpoints)
            _end_checkpoints(checkpoints, result, aborted)
            if memory_report and not aborted:
                result.memory_report = measure_memory(config, task)
            writer(result)
            if plot and writer.error is None and not aborted:
                saved = plots.save_training_plot(result, task, plot)
                err_console.print(f"pictures of the run: {saved}", markup=False)
            _report(result, as_json, memory_report, signals.received, writer.error, aborted,
                    _continue_hint(checkpoints, result.interrupted or aborted))
    except MgsparseError as e:
        if partitions is not None and quiet_rank(e):  # rank 0 prints it, once
            raise typer.Exit(e.exit_code) from None
        fail(e)


def _config_and_checkpoints(config_path: Path | None, overrides: list[str],
                            out_dir: Path | None, resume: Path | None):
    """(config, full checkpoints or None, run folder). A fresh run with --out checkpoints into
    it; --resume DIR continues DIR's checkpoint, with its saved config or CONFIG if given
    (which must be the same config)."""
    if resume is None:
        if config_path is None:
            raise ConfigError("missing CONFIG: mgsparse train CONFIG (or --resume DIR)")
        config = load_config(config_path, overrides)
        return config, (FullCheckpoints(out_dir, config) if out_dir else None), out_dir
    if out_dir is not None and out_dir.resolve() != resume.resolve():
        raise ConfigError(f"--resume {resume} writes into {resume}; drop --out {out_dir}")
    saved_config, saved = read_checkpoint(resume)
    if config_path is None and overrides:
        raise ConfigError("--set, --epochs and --runs would change the saved config; "
                          "--resume DIR continues it as it was")
    config = saved_config if config_path is None else load_config(config_path, overrides)
    check_same_config(config, saved_config, resume)
    return config, FullCheckpoints(resume, config, saved), resume


def _end_checkpoints(checkpoints: FullCheckpoints | None, result, aborted: bool) -> None:
    """A series that was not stopped needs no checkpoint any more; one that failed to write
    is said once."""
    if checkpoints is None:
        return
    if checkpoints.error is not None:
        warn(f"{checkpoints.error} (the run cannot be resumed from it)")
    elif not (result.interrupted or aborted):
        checkpoints.discard()


def _say_resuming(checkpoints: FullCheckpoints, display: TrainDisplay) -> None:
    """Where a resumed series goes on, in one line, and its epochs done on the bar."""
    run, epoch, done = checkpoints.resumes
    epochs = display.config.train.epochs
    err_console.print(f"resuming run {run} at epoch {epoch + 1} of {epochs} "
                      f"({done:,} of the series' {display.total:,} epochs done)",
                      markup=False, highlight=False)
    display.resume_at(done)


def _continue_hint(checkpoints: FullCheckpoints | None, stopped: bool) -> str | None:
    """For a stopped series whose checkpoint is on disk: how to continue it."""
    if checkpoints is None or checkpoints.error is not None or checkpoints.saved_at is None:
        return None
    if not stopped or not checkpoints.path.is_file():
        return None
    run, epoch = checkpoints.saved_at
    folder = shlex.quote(str(checkpoints.path.parent))
    return (f"{checkpoints.path} holds run {run} at epoch {epoch}; continue with: "
            f"mgsparse train --resume {folder}")


def _refuse_for_partitions(plot: Path | None, memory_report: bool,
                           resume: Path | None = None) -> None:
    """Options a partitioned run would otherwise drop silently."""
    if resume is not None:
        raise ConfigError("--resume continues a run of one process; a partitioned run "
                          "(--partitions) keeps no full checkpoint")
    if plot:
        raise ConfigError("--plot is not available with --partitions: its pictures need the "
                          "whole graph's embedding, which no rank holds")
    if memory_report:
        raise ConfigError("--memory-report is not available with --partitions: it measures "
                          "a single process's operands")


def _fit(config, task, display: TrainDisplay, signals: _Signals, writer: _Writer,
         checkpoints: FullCheckpoints | None = None):
    """`fit` under the signal rules: (result, aborted). An abort that lands outside an epoch
    (while a finished run is re-evaluated, between runs, inside a module being imported)
    escapes `fit`, as may whatever it broke on its way out (a half-imported module's
    ImportError); the runs the writer already has are then the result, marked stopped, and
    before any, one line says nothing was saved."""
    try:
        with display:
            result = fit(config, task, on_epoch=display.on_epoch,
                         on_run_end=signals.shield(writer), should_stop=signals.should_stop,
                         checkpoints=checkpoints,
                         on_batch=display.on_batch if display.enabled else None)
            display.stopped = result.interrupted
        aborted = False
    except KeyboardInterrupt:
        result, aborted = _after_abort(signals, writer, checkpoints), True
    except Exception:
        if not signals.aborted:
            raise
        result, aborted = _after_abort(signals, writer, checkpoints), True
    signals.finishing = True
    return result, aborted


def _after_abort(signals: _Signals, writer: _Writer, checkpoints: FullCheckpoints | None):
    """The runs written before an abort that escaped `fit`, as a stopped series."""
    signals.finishing = True
    if writer.last is None:
        hint = _continue_hint(checkpoints, True)
        fail("interrupted before a run finished: nothing to save" + (f"; {hint}" if hint
                                                                     else ""),
             EXIT_TERMINATED if signals.received == signal.SIGTERM else EXIT_INTERRUPTED)
    writer.last.stopped = True  # the series did not end: the folder must not say "ok"
    return writer.last


def _check_outputs(out_dir: Path | None, plot: Path | None, runs: int) -> None:
    """The output rule (cli/outputs.py) before any work, and matplotlib when a picture is
    asked for: a bad path fails now, not after an hour of training."""
    from mgsparse.cli import plots

    taken = RunFolderPaths(out_dir, runs) if out_dir else {}
    check_output(out_dir, "--out", folder=True)
    check_output(plot, "--plot", suffixes=PICTURES, taken=taken)
    if plot:
        plots.require_matplotlib()


def _train_partitioned(config, partitions: Path, writer, silent: bool, as_json: bool) -> None:
    """One rank of `mpiexec -n K mgsparse train CONFIG --partitions DIR`: rank 0 shows the
    live table and the summary and writes the run folder; every rank trains and leaves with
    the same exit code."""
    def report(e: BaseException) -> None:  # an error during training, on the failing rank
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)

    with PartitionedRun(config, partitions) as job:
        root = job.rank == 0
        display = TrainDisplay(config, {}, root and not silent, DistributedGraphTask.metrics)
        with display:
            result = job.fit(display.on_epoch if root else None, writer if root else None,
                             report)
    if root:
        writer(result)
        _report(result, as_json, False, job.signum, writer.error)
    elif result.failed or result.interrupted:  # the code rank 0's _report exits with
        raise typer.Exit(1 if result.failed else EXIT_TERMINATED
                         if job.signum == signal.SIGTERM else EXIT_INTERRUPTED)


class _Writer:
    """Writes the run folder after every run, only what changed (`RunFolder`); a failure (a
    full disk, a folder removed mid-run) is kept, not raised, so training goes on and the
    summary is still printed."""

    def __init__(self, out_dir: Path | None, folder: RunFolder | None = None):
        self.out_dir, self.error, self.last = out_dir, None, None
        self.folder = folder or (RunFolder(out_dir) if out_dir is not None else None)

    def __call__(self, result) -> None:
        self.last = result  # what an abort between epochs still has to report
        if self.folder is None or self.error is not None:
            return
        try:
            self.folder.write(result)
        except MgsparseError as e:
            self.error = MgsparseError(f"{e} (the summary above was not saved)")


def _report(result, as_json: bool, memory_report: bool, signum, write_error=None,
            aborted: bool = False, hint: str | None = None) -> None:
    if as_json:
        typer.echo(json.dumps(metrics_dict(result)["summary"]))
    else:
        out.print(summary_table(result))
        if memory_report and result.memory_report:
            out.print(memory_table(result.memory_report))
    for run in result.runs:
        if run.message:
            warn(run.message)
    if write_error is not None:  # the summary above is all that is left of the run
        fail(write_error)
    if result.failed:
        raise typer.Exit(1)
    if result.interrupted or aborted:
        if hint:
            err_console.print(hint, markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED)


def evaluate(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The --out folder of `mgsparse train`"),
    as_json: bool = typer.Option(False, "--json", metavar="", help="Print the accuracies as JSON"),
) -> None:
    """Reload a finished run's best parameters and report its accuracies again."""
    try:
        with _downloads(as_json) as progress:
            rows = evaluate_saved(run_dir, progress)
    except MgsparseError as e:
        fail(e)
    if as_json:
        typer.echo(json.dumps([{"run": r.run, **({} if r.fold is None else {"fold": r.fold}),
                                "seed": r.seed, **r.scores} for r in rows]))
        return
    out.print(evaluate_table(run_dir, rows))
