"""The download progress bar every command that may fetch a dataset shows."""

from __future__ import annotations

from contextlib import contextmanager

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from mgsparse.cli.render import err_console


@contextmanager
def download_bar():
    """A rich progress bar on stderr, fed by the library's ``progress(done, total, name)``;
    it appears only once bytes actually move (cached and built-in datasets stay quiet), and
    only on a terminal: a transient bar stopped on a pipe or a log file leaves an empty line
    behind, which then stood before the error of a failed download."""
    if not err_console.is_terminal:
        yield lambda done, total, filename: None
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                   TransferSpeedColumn(), console=err_console, transient=True)
    tasks: dict[str, int] = {}

    def report(done: int, total: int | None, filename: str) -> None:
        if not tasks:
            bar.start()
        if filename not in tasks:
            tasks[filename] = bar.add_task(filename, total=total)
        bar.update(tasks[filename], completed=done, total=total)

    try:
        yield report
    finally:
        if tasks:
            bar.stop()
