"""The live training display: a progress bar with ETA over a table refreshed every `log_every`."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from mgsparse.cli.render import err_console, warn
from mgsparse.run.task import ACCURACY_METRICS, TaskMetrics

# Short headers so the table fits an 80-column terminal; the caption spells them out. The
# task's live score columns (`TaskMetrics.live`) sit between the loss and the gradient norm.
CAPTION_REST = ("‖g‖: gradient norm before clipping · Â/X nnz: stored entries of the "
                "adjacency/features over rows·cols · MB: held by the run (operands, parameters, "
                "optimizer state) · peak: MB + the epoch's traced peak · ms: epoch time")
MAX_ROWS = 20  # older rows scroll away; the summary keeps what matters


def columns(metrics: TaskMetrics) -> tuple[str, ...]:
    return ("run", "epoch", "loss", *(metrics.metric(c).short for c in metrics.live), "‖g‖",
            "Â nnz", "X nnz", "MB", "peak", "ms")


def caption(metrics: TaskMetrics) -> str:
    return " · ".join(part for part in (metrics.legend, CAPTION_REST) if part)


COLUMNS, CAPTION = columns(ACCURACY_METRICS), caption(ACCURACY_METRICS)  # classification's


class TrainDisplay:
    """Renders `fit`'s per-epoch callback; a no-op when disabled (--quiet, --json)."""

    def __init__(self, config, densities: dict[str, float], enabled: bool = True,
                 metrics: TaskMetrics = ACCURACY_METRICS):
        self.enabled = enabled
        self.config = config
        self.metrics = metrics
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
        self.live = Live(self._render(), console=err_console, refresh_per_second=8,
                         transient=False)
        self.done = 0

    def __enter__(self) -> TrainDisplay:
        if self.enabled:
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.progress.update(self.task, completed=self.done, total=self.done)
            self.live.update(self._render())
            self.live.__exit__(*exc)
            if not err_console.is_terminal:
                err_console.line()  # a log file gets the bar on a line of its own

    def _render(self) -> Group:
        table = Table(title=f"{self.config.model.kind.upper()} on {self.config.dataset.name}",
                      title_justify="left",
                      box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False)
        skip = 0 if self.runs > 1 else 1  # the run column only when there are runs
        heads = columns(self.metrics)
        heads = ("fold", *heads[1:]) if self.config.train.folds else heads
        for col in heads[skip:]:
            table.add_column(col, justify="right", no_wrap=True)
        for row in self.rows[-MAX_ROWS:]:
            table.add_row(*row[skip:])
        parts = [table, Text(caption(self.metrics), style="dim")]
        if self.sampling:
            parts.append(Text(self.sampling))
        return Group(*parts, self.progress)

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
            self.rows.append((str(run_index), str(row.epoch), f"{row.loss:.4f}", *scores,
                              f"{row.grad_norm:.3f}", *self.ratios, *mem, f"{stats.epoch_ms:.1f}"))
            self.live.update(self._render())
