"""What every command that may fetch or build a dataset shows while it does: the download bar
and the status line of the phases between downloads (`mgsparse.data.progress`)."""

from __future__ import annotations

from contextlib import contextmanager

from rich.filesize import decimal
from rich.live import Live
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.spinner import Spinner

from mgsparse.cli.render import err_console


class _Reporter:
    """The library's progress callback, drawn on stderr.

    On a terminal: a transient download bar once bytes actually move (cached and built-in
    datasets stay quiet), and a transient status line naming the phase under way (generating,
    normalising, placing), one of the two at a time (rich draws one live display at once).

    Elsewhere (a pipe, a log file): no bar, no status, but one line per file fetched,
    ``downloaded ind.cora.x (1.2 MB, verified)``, printed once the command's downloads all
    landed and passed their source's checks (`finish(ok=True)`). A failed download prints
    its one-line error alone: a line for each file that arrived before it would stand
    before the error (and a transient bar stopped there would leave an empty line)."""

    def __init__(self) -> None:
        self.terminal = err_console.is_terminal
        self.bar: Progress | None = None
        self.status = None
        self.tasks: dict[str, int] = {}
        self.sizes: dict[str, int] = {}  # file -> bytes fetched (the last attempt's)

    def __call__(self, done: int, total: int | None, filename: str) -> None:
        self.sizes[filename] = done
        if not self.terminal:
            return
        if self.status is not None:
            self.status.stop()
            self.status = None
        if self.bar is None:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                TransferSpeedColumn(), console=err_console, transient=True)
            self.bar.start()
        if filename not in self.tasks:
            self.tasks[filename] = self.bar.add_task(filename, total=total)
        self.bar.update(self.tasks[filename], completed=done, total=total)

    def phase(self, name: str, detail: str) -> None:
        if not self.terminal:
            return
        self._stop_bar()
        line = Spinner("dots", f"[dim]{name}[/] {detail}…" if detail else f"[dim]{name}[/]…")
        if self.status is None:  # drawn at once: the phase may hold the interpreter a while
            self.status = Live(line, console=err_console, transient=True,
                               refresh_per_second=8)
            self.status.start(refresh=True)
        else:
            self.status.update(line, refresh=True)

    def _stop_bar(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar, self.tasks = None, {}

    def finish(self, ok: bool) -> None:
        self._stop_bar()
        if self.status is not None:
            self.status.stop()
            self.status = None
        if ok and not self.terminal:
            for filename, size in self.sizes.items():
                err_console.print(f"downloaded {filename} ({decimal(size)}, verified)",
                                  markup=False, highlight=False, soft_wrap=True)


@contextmanager
def download_bar():
    """The progress callback of the library (`_Reporter`) for the commands inside the block."""
    reporter = _Reporter()
    try:
        yield reporter
    except BaseException:
        reporter.finish(ok=False)
        raise
    reporter.finish(ok=True)
