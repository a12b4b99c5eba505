"""The live training display: a progress bar with ETA over a table refreshed every `log_every`."""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from mgsparse.cli.render import err_console, run_title, warn
from mgsparse.run.task import ACCURACY_METRICS, TaskMetrics

# Short headers so the table fits an 80-column terminal; the caption spells them out. The
# task's live score columns (`TaskMetrics.live`) sit between the loss and the gradient norm.
CAPTION_REST = ("‖g‖: gradient norm before clipping · Â/X nnz: stored entries of the "
                "adjacency/features over rows·cols · MB: held by the run (operands, parameters, "
                "optimizer state) · peak: MB + the epoch's traced peak · ms: epoch time")
MAX_ROWS = 20  # a log file (no height) gets the last 20 rows; a terminal as many as fit
# On a narrow terminal, columns are left out in this order (the caption names them) until
# every cell left is shown whole; run, epoch, loss and the task's scores stay.
DROP_ORDER = ("X nnz", "Â nnz", "peak", "‖g‖", "MB", "ms")


def columns(metrics: TaskMetrics, lr: bool = False) -> tuple[str, ...]:
    """The live table's headers; `lr`: a schedule moves the learning rate, shown after ‖g‖."""
    return ("run", "epoch", "loss", *(metrics.metric(c).short for c in metrics.live), "‖g‖",
            *("lr",) * lr, "Â nnz", "X nnz", "MB", "peak", "ms")


def caption(metrics: TaskMetrics, lr: bool = False) -> str:
    schedule = "lr: the epoch's learning rate" if lr else ""
    return " · ".join(part for part in (metrics.legend, schedule, CAPTION_REST) if part)


COLUMNS, CAPTION = columns(ACCURACY_METRICS), caption(ACCURACY_METRICS)  # classification's


class TrainDisplay:
    """Renders `fit`'s per-epoch callback; a no-op when disabled (--quiet, --json)."""

    def __init__(self, config, densities: dict[str, float], enabled: bool = True,
                 metrics: TaskMetrics = ACCURACY_METRICS, epochs_file=None):
        self.enabled = enabled
        self.epochs_file = epochs_file  # where every epoch is kept (--out), named by the marker
        self.config = config
        self.metrics = metrics
        self.lr = config.optim.schedule != "none"  # a column only when a schedule moves it
        self.log_every = config.monitor.log_every
        self.runs = config.train.folds or config.train.runs  # k-fold: one run per fold
        self.total = config.train.epochs * self.runs
        self.ratios = tuple(f"{densities[k]:.2%}" if k in densities else "-"
                            for k in ("adjacency", "features"))
        self.rows: list[tuple[str, ...]] = []
        self.sampling = ""  # sampled runs: batches, mean block nnz and nodes of the last epoch
        self.progress = Progress(TextColumn("[bold]training"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("epochs"), TimeRemainingColumn(), console=err_console)
        self.task = self.progress.add_task("train", total=self.total)
        # a sampled epoch's batches, "k of n" under the epoch bar, once an epoch has several
        self.steps = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TextColumn("batches"), TimeRemainingColumn(), console=err_console)
        self.step_task = self.steps.add_task("", total=None)
        self.stepping = False
        self.live = Live(self._render(), console=err_console, refresh_per_second=8,
                         transient=False)
        self.done = 0
        self.stopped = False  # a stopped series' bar keeps its budget: 603/1,000, not 603/603

    def resume_at(self, done: int) -> None:
        """A resumed series: `done` of its epochs were trained before it stopped."""
        self.done = done
        self.progress.update(self.task, completed=done)

    def __enter__(self) -> TrainDisplay:
        if self.enabled:
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:  # early stopping ends a finished series under its budget: full bar
            finished = not self.stopped and exc[0] is None
            self.progress.update(self.task, completed=self.done,
                                 total=self.done if finished else self.total)
            self.stepping = False  # the last frame keeps the epochs, not a batch count
            self.live.update(self._render())
            self.live.__exit__(*exc)
            if not err_console.is_terminal:
                err_console.line()  # a log file gets the bar on a line of its own

    def _render(self) -> _Frame:
        return _Frame(self)

    def group(self, shown: tuple[str, ...], rows: int, with_caption: bool) -> Group:
        """The table of the last `rows` rows in the columns `shown`, its caption (naming the
        columns the width left out), the sampling line and the progress bar."""
        parts: list = [self.table(shown, rows)]
        if rows < len(self.rows):
            parts.insert(0, Text(self.earlier_note(len(self.rows) - rows), style="dim"))
        if with_caption:
            hidden = [c for c in columns(self.metrics, self.lr) if c not in shown and c != "run"]
            ratios = (f" (Â nnz {self.ratios[0]}, X nnz {self.ratios[1]})"
                      if {"Â nnz", "X nnz"} & set(hidden) else "")
            note = f" · not shown at this width: {', '.join(hidden)}{ratios}" if hidden else ""
            parts.append(Text(caption(self.metrics, self.lr) + note, style="dim"))
        if self.sampling:
            parts.append(Text(self.sampling))
        return Group(*parts, self.progress, *(self.steps,) * self.stepping)

    def earlier_note(self, left_out: int) -> str:
        """The marker above a table that left out its oldest rows: how many, and where every
        epoch is kept."""
        kept = (f"all are in {self.epochs_file}" if self.epochs_file is not None
                else "--out DIR keeps them all in DIR/epochs.csv")
        return f"↑ {left_out} earlier row{'s' * (left_out != 1)} not shown; {kept}"

    def table(self, shown: tuple[str, ...], rows: int) -> Table:
        table = Table(title=run_title(self.config),
                      title_justify="left",
                      box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False)
        every = columns(self.metrics, self.lr)
        keep = [every.index(col) for col in shown]
        for col in shown:  # k-fold: run i is fold i
            col = "fold" if col == "run" and self.config.train.folds else col
            table.add_column(col, justify="right", no_wrap=True)
        for row in self.rows[len(self.rows) - rows:] if rows else ():
            table.add_row(*(row[i] for i in keep))
        return table

    def shown_columns(self, console: Console, options: ConsoleOptions,
                      most: int = MAX_ROWS) -> tuple[str, ...]:
        """The columns whose cells all fit the width whole (over the last `most` rows, all
        that can be shown): the run column only when there are runs, then columns left out
        in `DROP_ORDER` until the table's widest row fits."""
        shown = [c for c in columns(self.metrics, self.lr)
                 if c != "run" or self.runs > 1]
        rows, unbounded = min(most, len(self.rows)), options.update_width(10**6)
        for dropped in (None, *DROP_ORDER):
            if dropped in shown:
                shown.remove(dropped)
            natural = Measurement.get(console, unbounded, self.table(tuple(shown), rows))
            if natural.maximum <= options.max_width:
                break
        return tuple(shown)

    def on_batch(self, run_index: int, epoch: int, step: int, steps: int | None) -> None:
        """`fit`'s per-step callback: inside an epoch of several steps whose number is known
        (a sampled epoch), the batch count under the epoch bar and the epoch bar's fraction,
        so neither stands still for the seconds a large graph's epoch takes. Two cheap
        updates; rich redraws on its own clock."""
        if not self.enabled or steps is None or steps < 2:
            return
        if step == 1:
            where = f"run {run_index} epoch {epoch}" if self.runs > 1 else f"epoch {epoch}"
            self.steps.reset(self.step_task, total=steps, description=where)
            if not self.stepping:
                self.stepping = True
                self.live.update(self._render())
        self.steps.update(self.step_task, completed=step)
        self.progress.update(self.task, completed=self.done + step / steps)

    def on_epoch(self, run_index: int, row, stats, alarms: list[str]) -> None:
        if not self.enabled:
            return
        self.done += 1
        self.progress.update(self.task, completed=self.done)
        for alarm in alarms:
            warn(f"run {run_index} epoch {row.epoch}: {alarm}")
        traced = stats.mem_peak_mb is not None
        if row.epoch == 1 or row.epoch % self.log_every == 0 or alarms or traced:
            mem = tuple("-" if v is None else f"{v:.1f}"
                        for v in (stats.mem_held_mb, stats.mem_peak_mb))
            if stats.block_nnz is not None:
                self.sampling = (f"epoch {row.epoch}: {stats.batches} batches, mean block nnz "
                                 f"{stats.block_nnz:,.0f}, mean sampled nodes "
                                 f"{stats.sampled_nodes:,.0f}")
            scores = (self.metrics.metric(c).format(row.scores[c], digits=1)
                      for c in self.metrics.live)
            lr = (f"{row.lr:.3g}",) if self.lr else ()
            self.rows.append((str(run_index), str(row.epoch), f"{row.loss:.4f}", *scores,
                              f"{row.grad_norm:.3f}", *lr, *self.ratios, *mem,
                              f"{stats.epoch_ms:.1f}"))
            self.live.update(self._render())


class _Frame:
    """The display laid out for the console it is drawn on, asked again at every refresh (a
    resized terminal gets a new layout): columns left out by `TrainDisplay.shown_columns` so
    that no cell is cut, and on a terminal as many of the newest rows as its height holds
    with the caption and the progress bar (then the caption left out too), where rich would
    otherwise hide the bottom, the progress bar, behind "...". Rows left out are counted by
    a marker line above the table that names where every epoch is kept."""

    def __init__(self, display: TrainDisplay):
        self.display = display

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.display
        if not options.is_terminal:  # a log file has no height: the last MAX_ROWS rows
            most = min(MAX_ROWS, len(d.rows))
            yield d.group(d.shown_columns(console, options, most), most, True)
            return
        room = options.size.height - 1  # a line for the cursor
        shown = d.shown_columns(console, options, room)
        fixed = len(console.render_lines(d.group(shown, 0, True), options, pad=False))
        most = min(len(d.rows), max(room - fixed, 0) + 1)  # a row is a line (cells never wrap)
        tries = [(n, True) for n in range(most, 0, -1)] + [(n, False) for n in range(most, -1, -1)]
        for rows, with_caption in tries:
            frame = d.group(shown, rows, with_caption)
            if len(console.render_lines(frame, options, pad=False)) <= room:
                break
        yield frame
