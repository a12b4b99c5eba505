"""The live training display: a progress bar with ETA over a table refreshed every `log_every`."""

from __future__ import annotations

from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from mgsparse.cli.render import err_console, warn

COLUMNS = ("run", "epoch", "loss", "train acc", "val acc", "val loss", "grad norm",
           "adj nnz", "feat nnz", "mem MB", "peak MB", "ms")
MAX_ROWS = 20  # older rows scroll away; the summary keeps what matters


class TrainDisplay:
    """Renders `fit`'s per-epoch callback; a no-op when disabled (--quiet, --json)."""

    def __init__(self, config, problem, enabled: bool = True):
        self.enabled = enabled
        self.config = config
        self.log_every = config.monitor.log_every
        self.total = config.train.epochs * config.train.runs
        self.ratios = ("-", "-") if problem is None else (  # None: a point cloud, no graph
            f"{problem.adjacency_density:.2%}", f"{problem.feature_density:.2%}")
        self.rows: list[tuple[str, ...]] = []
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

    def _render(self) -> Group:
        table = Table(title=f"{self.config.model.kind.upper()} on {self.config.dataset.name}",
                      title_justify="left")
        for col in COLUMNS:
            table.add_column(col, justify="right")
        for row in self.rows[-MAX_ROWS:]:
            table.add_row(*row)
        return Group(table, self.progress)

    def on_epoch(self, run_index: int, row, stats, alarms: list[str]) -> None:
        if not self.enabled:
            return
        self.done += 1
        self.progress.update(self.task, completed=self.done)
        for alarm in alarms:
            warn(f"run {run_index} epoch {row.epoch}: {alarm}")
        if row.epoch == 1 or row.epoch % self.log_every == 0 or alarms:
            mem = ("-", "-") if not self.config.monitor.memory else (
                f"{stats.mem_current_mb:.1f}", f"{stats.mem_peak_mb:.1f}")
            self.rows.append((str(run_index), str(row.epoch), f"{row.loss:.4f}",
                              f"{row.train_acc:.1%}", f"{row.val_acc:.1%}", f"{row.val_loss:.4f}",
                              f"{row.grad_norm:.3f}", *self.ratios, *mem, f"{stats.epoch_ms:.2f}"))
            self.live.update(self._render())
