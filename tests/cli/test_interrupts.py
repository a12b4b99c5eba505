"""Ctrl-C and SIGTERM pressed twice, in a real process: whatever the timing, the run exits
130 or 143, with no traceback, and keeps metrics.json and epochs.csv whole."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CONFIGS, one_line_error

pytestmark = [pytest.mark.skipif(not Path("/proc/self/status").is_file(),
                                 reason="needs Linux /proc"),
              pytest.mark.slow]  # real subprocesses of ~2 s each: `-m 'not slow'` skips them


def _catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has its own handler for `signum` (Linux: SigCgt in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def _training(out: Path, tmp_path: Path, runs: int) -> subprocess.Popen:
    """`python -m mgsparse train` on karate for 100,000 epochs per run, returned once its
    handlers are in place (just before the first epoch) and a second of epochs has run."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", MGSPARSE_DATA=str(tmp_path / "data"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mgsparse", "train", str(CONFIGS / "karate.yaml"),
         "--epochs", "100000", "--runs", str(runs), "--set", "train.patience=null",
         "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    deadline = time.monotonic() + 120
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "training never started"
        time.sleep(0.02)
    time.sleep(1.0)
    return proc


@pytest.mark.parametrize("gap_s", [0.0, 0.05, 0.3], ids=["at-once", "50ms", "300ms"])
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_two_signals_keep_metrics_and_epochs_whole(tmp_path, signum, code, gap_s):
    out = tmp_path / "interrupted"
    proc = _training(out, tmp_path, runs=1)
    proc.send_signal(signum)
    time.sleep(gap_s)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr + stdout and "Aborted" not in stderr
    metrics = json.loads((out / "metrics.json").read_text())
    (run0,) = metrics["runs"]
    assert run0["status"] in ("interrupted", "aborted")
    assert metrics["summary"]["status"] == "interrupted"
    with open(out / "epochs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert 0 < len(rows) == len(run0["epochs"]) < 100000
    assert [int(r["epoch"]) for r in rows] == [e["epoch"] for e in run0["epochs"]]
    assert all(float(r["loss"]) == e["loss"] for r, e in zip(rows, run0["epochs"]))
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # no leftovers


def test_only_one_abort_and_only_while_an_epoch_may_run():
    """The handler's rule, signal by signal: the first asks to stop, the second aborts (once);
    after the loop was told to stop, or while the run folder is written, none raises."""
    from mgsparse.cli.train import _Signals

    state = _Signals()
    state.handler(signal.SIGINT, None)
    assert state.received == signal.SIGINT
    with pytest.raises(KeyboardInterrupt):
        state.handler(signal.SIGINT, None)
    try:  # a third: the loop's clean-up is not cut short
        state.handler(signal.SIGINT, None)
    except KeyboardInterrupt:
        pytest.fail("a third signal aborted again")

    stopped = _Signals()
    stopped.handler(signal.SIGTERM, None)
    assert stopped.should_stop()
    stopped.handler(signal.SIGTERM, None)  # the loop is ending the run: nothing to abort

    writing, seen = _Signals(), []
    writing.handler(signal.SIGINT, None)

    def write(result):
        writing.handler(signal.SIGINT, None)  # lands while the files are being written
        seen.append(result)

    writing.shield(write)("result")
    assert seen == ["result"] and not writing.writing
    with pytest.raises(KeyboardInterrupt):  # an epoch after the write may be aborted again
        writing.handler(signal.SIGINT, None)


def test_an_abort_between_runs_reports_and_keeps_the_runs_written(cli, tmp_path, monkeypatch):
    """An abort that lands outside an epoch (e.g. while a finished run is re-evaluated) still
    ends in the summary of the runs written, exit 130; before any run: one line, nothing."""
    from mgsparse.cli import train as command

    real_fit = command.fit

    def fit_then_abort(config, task, **hooks):
        real_fit(config, task, **hooks)  # one whole run, written by on_run_end
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "fit", fit_then_abort)
    out = tmp_path / "run"
    result = cli("train", CONFIGS / "karate.yaml", "--epochs", "3", "--quiet", "--out", out)
    assert result.exit_code == 130 and "Traceback" not in result.output
    assert "test accuracy" in result.stdout
    assert len(json.loads((out / "metrics.json").read_text())["runs"][0]["epochs"]) == 3

    def abort_at_once(config, task, **hooks):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "fit", abort_at_once)
    never = tmp_path / "never"
    result = cli("train", CONFIGS / "karate.yaml", "--epochs", "3", "--quiet", "--out", never)
    one_line_error(result, 130, "interrupted before a run finished: nothing to save")
    assert not never.exists()


def test_a_stopped_run_leaves_no_signal_ignored_for_the_processes_started_later():
    """After a stopped run, late signals change nothing in this process, through a handler:
    SIG_IGN would be inherited by every process started later (a test runner's children)."""
    import signal

    from mgsparse.cli.train import _signals_end_epoch

    def earlier(signum, frame):  # what the process had before the command ran
        raise AssertionError("not called")

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for s in before:
            signal.signal(s, earlier)
        with _signals_end_epoch() as state:
            state.received = signal.SIGINT  # as the handler records a Ctrl-C
        for s in before:
            assert signal.getsignal(s) not in (signal.SIG_IGN, earlier), s
            assert callable(signal.getsignal(s))
    finally:
        for s, old in before.items():
            signal.signal(s, old)
