"""What the CLI draws while a dataset is fetched or built and inside a sampled epoch: a status
line for each phase on a terminal, a line per verified file on a pipe, the batch count."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from rich.filesize import decimal

from mgsparse.cli import progress as cli_progress
from mgsparse.cli.live import TrainDisplay
from mgsparse.run import make_task
from mgsparse.run.results import EpochRow, EpochStats
from tests.conftest import make_config, one_line_error
from tests.run.test_progress import SMALL_SBM, sampled_config

CORA_FILES = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


@pytest.fixture
def mirrored(monkeypatch, tmp_path, planetoid_mirror):
    base, log = planetoid_mirror
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", base)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path))
    return tmp_path, log


@pytest.fixture
def stderr_of(monkeypatch):
    """stderr as a terminal (or not) of 80 columns; returns what was drawn on it."""
    def use(terminal: bool) -> io.StringIO:
        stream = io.StringIO()
        console = Console(file=stream, force_terminal=terminal, width=80)
        monkeypatch.setattr(cli_progress, "err_console", console)
        return stream
    return use


def test_a_piped_download_prints_one_line_per_verified_file(cli, mirrored):
    root, log = mirrored
    result = cli("datasets", "download", "cora")
    assert result.exit_code == 0, result.output
    raw, fetched = root / "Cora" / "raw", [path.rsplit("/", 1)[1] for path in log]
    assert sorted(fetched) == sorted(f"ind.cora.{k}" for k in CORA_FILES)
    assert result.stderr.splitlines() == [  # in the order they arrived
        f"downloaded {name} ({decimal((raw / name).stat().st_size)}, verified)"
        for name in fetched]
    assert "Cora: 8 files verified" in result.stdout
    again = cli("datasets", "download", "cora")  # a verified cache moves no bytes: no line
    assert again.exit_code == 0 and again.stderr == ""


def test_a_failed_download_prints_its_error_alone(cli, mirrored):
    """ind.pubmed.x and .tx arrive verified before allx's 404: no line of theirs stands
    before the error's one line (tests/conftest.py: one_line_error)."""
    root, _ = mirrored
    line = one_line_error(cli("datasets", "download", "pubmed"), 1, "ind.pubmed.allx")
    assert "downloaded" not in line and (root / "PubMed" / "raw" / "ind.pubmed.x").is_file()


def test_a_terminal_shows_each_phase_on_a_status_line_it_clears(stderr_of):
    stream = stderr_of(True)
    config = make_config("synthetic", dataset={**SMALL_SBM, "normalize_features": True})
    with cli_progress.download_bar() as report:
        make_task(config, report)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())  # colours, cursor moves
    for line in ("generating a stochastic block model: 400 nodes, ~2,400 edges…",
                 "normalising the feature rows of 400 nodes…", "placing the operands of 400 "):
        assert line in text, text
    assert stream.getvalue().endswith("\x1b[2K")  # transient: the last line erased


def test_a_pipe_gets_no_status_line(stderr_of):
    stream = stderr_of(False)
    with cli_progress.download_bar() as report:
        make_task(make_config("synthetic", dataset=SMALL_SBM), report)
    assert stream.getvalue() == ""


def test_bytes_after_a_phase_and_a_phase_after_bytes_share_the_terminal(stderr_of):
    """rich draws one live display at a time (a second raises LiveError): the bar and the
    status line take turns, each phase drawn at once."""
    stream = stderr_of(True)
    with cli_progress.download_bar() as report:
        report(10, 100, "a.bin")
        report.phase("normalising", "rows")
        report(50, 100, "b.bin")
        report.phase("placing", "operands")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    assert text.index("a.bin") < text.index("normalising rows…") < text.index("placing operands…")


def test_the_bar_shows_the_batches_of_a_sampled_epoch():
    config = sampled_config(epochs=3)
    display = TrainDisplay(config, {})
    display.on_epoch(0, EpochRow(1, 0.5, {"val_loss": 0.5, "train_acc": 0.5, "val_acc": 0.5,
                                          "test_acc": 0.5}, 1.0), EpochStats(1, 1.0, 1.0, None, None), [])
    for step in (1, 2, 3):
        display.on_batch(0, 2, step, 5)
    (batches,) = display.steps.tasks
    assert (batches.completed, batches.total, batches.description) == (3, 5, "epoch 2")
    assert display.progress.tasks[0].completed == pytest.approx(1.6)  # 1 epoch + 3/5
    console = Console(width=80, height=40, force_terminal=True, file=io.StringIO(),
                      record=True)
    console.print(display._render())
    assert any(line.startswith("epoch 2 ") and "3/5 batches" in line
               for line in console.export_text().splitlines())
    display.on_batch(0, 2, 1, None)  # an epoch of unknown length: nothing to count
    assert batches.completed == 3


def test_train_feeds_the_bar_every_batch_and_quiet_feeds_nothing(cli, monkeypatch):
    calls: list = []
    monkeypatch.setattr(TrainDisplay, "on_batch", lambda self, *a: calls.append(a))
    sets = [f"dataset.{k}={v}" for k, v in SMALL_SBM.items() if k != "name"]
    args = ["train", "configs/synthetic-sampled.yaml", "--epochs", "2",
            *(x for s in [*sets, "train.batch_size=16", "sampler.fanouts=[5, 5]",
                          "sampler.max_batch_nnz=null", "model.hidden=8"]
              for x in ("--set", s))]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert calls == [(0, epoch, step, 5) for epoch in (1, 2) for step in range(1, 6)]
    calls.clear()
    assert cli(*args, "-q").exit_code == 0 and calls == []
