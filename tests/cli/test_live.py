"""The live table fits the terminal it is drawn on: at 80 columns every cell it shows is
whole (columns are left out by priority and named in the caption), and in 24 rows the
progress bar stays visible (the oldest rows give way)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mgsparse.cli.live import MAX_ROWS, TrainDisplay, columns
from mgsparse.run.results import EpochRow, EpochStats
from mgsparse.run.task import ACCURACY_METRICS
from tests.conftest import make_config

GIVE_WAY = {"X nnz", "Â nnz", "peak", "‖g‖", "MB", "ms"}  # never run, epoch, loss or a score
SCORES = {"val_loss": 12.3456, "train_acc": 1.0, "val_acc": 0.5, "test_acc": 0.5}


def long_run(runs: int = 12) -> TrainDisplay:
    """A display fed wide figures: 5-digit epochs, 6-digit ms and MB, 2-digit run numbers."""
    config = make_config(train={"runs": runs, "epochs": 30000}, monitor={"log_every": 1})
    display = TrainDisplay(config, {"adjacency": 0.0018, "features": 0.0127}, True)
    for run in range(runs):
        for epoch in (1, 2, 10000, 29999):
            display.on_epoch(run, EpochRow(epoch, 1.23456, SCORES, 1234.567),
                             EpochStats(epoch, 12345.6, 123456.7, 12345.6, 123456.7), [])
    return display


def screen(display: TrainDisplay, width: int, height: int) -> list[str]:
    console = Console(width=width, height=height, force_terminal=True, file=io.StringIO(),
                      record=True)
    console.print(display._render())
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [80, 100, 60])
def test_every_cell_shown_is_whole_at_the_terminal_width(width):
    display = long_run()
    lines = screen(display, width, 24)
    header = next(line for line in lines if " epoch " in line).split()
    assert "…" not in "".join(lines) and max(map(len, lines)) <= width
    every = columns(ACCURACY_METRICS)
    hidden = [c for c in every if c not in " ".join(header) and c != "Â nnz" and c != "X nnz"]
    assert set(hidden) <= GIVE_WAY
    for row in display.rows[-3:]:
        shown = [cell for col, cell in zip(every, row) if col.split()[0] in header]
        line = next(line for line in lines if line.split()[:2] == [row[0], row[1]]
                    and line.split() == shown)
        assert line  # the row's shown cells, each whole and in order
    caption = " ".join(" ".join(lines).split())
    if "Â" not in header:  # the constant densities move into the caption
        assert "not shown at this width: " in caption
        assert "(Â nnz 0.18%, X nnz 1.27%)" in caption


def test_a_wide_terminal_shows_every_column():
    header = next(line for line in screen(long_run(), 140, 60) if " epoch " in line).split()
    assert header == ["run", "epoch", "loss", "train", "val", "v.loss", "‖g‖", "Â", "nnz",
                      "X", "nnz", "MB", "peak", "ms"]


def test_in_24_rows_the_progress_bar_stays_visible():
    lines = screen(long_run(), 80, 24)
    assert len(lines) <= 23 and lines[-1].startswith("training")
    assert "48/360000 epochs" in lines[-1] and "..." not in lines
    assert any(line.split()[:2] == ["11", "29999"] for line in lines)  # the newest row


def test_a_tiny_terminal_keeps_the_progress_bar_and_a_file_keeps_every_row():
    lines = screen(long_run(), 80, 8)
    assert len(lines) <= 7 and lines[-1].startswith("training")
    console = Console(width=80, height=24, file=io.StringIO(), record=True)  # a log file
    console.print(long_run()._render())
    rows = [line for line in console.export_text().splitlines()
            if line.split()[:1] and line.split()[0].isdigit()]
    assert len(rows) == MAX_ROWS


def test_a_tall_terminal_shows_more_than_20_rows_and_marks_the_rest():
    """48 rows on a 40-line terminal: more than the 20 a log gets, as many as fit with the
    caption and the bar, and a line above the table counting the rows left out and naming
    the file that keeps them all."""
    display = long_run()
    display.epochs_file = "runs/karate/epochs.csv"
    lines = screen(display, 100, 40)
    rows = [line for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert MAX_ROWS < len(rows) < 48 and len(lines) == 39
    assert lines[0].strip() == (f"↑ {48 - len(rows)} earlier rows not shown; all are in "
                                f"runs/karate/epochs.csv")
    assert rows[-1].split()[:2] == ["11", "29999"] and lines[-1].startswith("training")


def test_every_row_that_fits_is_shown_without_a_marker():
    """Three runs of 50 epochs logged every 5: 33 rows on a 50-line terminal, all shown
    (at most 20 were, so run 0's first epoch vanished)."""
    config = make_config(train={"runs": 3, "epochs": 50}, monitor={"log_every": 5})
    display = TrainDisplay(config, {"adjacency": 0.1, "features": 0.1}, True)
    logged = (1, *range(5, 51, 5))
    for run in range(3):
        for epoch in range(1, 51):
            display.on_epoch(run, EpochRow(epoch, 1.0, SCORES, 1.0),
                             EpochStats(epoch, 1.0, 1.0, None, None), [])
    lines = screen(display, 100, 50)
    rows = [line.split()[:2] for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert rows == [[str(r), str(e)] for r in range(3) for e in logged]
    assert not any("earlier row" in line for line in lines)


def test_a_log_file_marks_the_rows_it_leaves_out():
    console = Console(width=80, file=io.StringIO(), record=True)  # a log file
    console.print(long_run()._render())
    text = console.export_text()
    assert (f"↑ {48 - MAX_ROWS} earlier rows not shown; --out DIR keeps them all in "
            f"DIR/epochs.csv") in text
