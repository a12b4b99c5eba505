"""A `--runs` series with `--out` stops on the first Ctrl-C or SIGTERM whenever it lands, the
run folder written between runs included, and a folder left by an abort never says `ok`."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import CONFIGS

KARATE = CONFIGS / "karate.yaml"

# Runs `mgsparse train ...` with the run folder's writer hooked: when it is handed the
# series' AT-th finished run, the process signals itself and the handler runs there, inside
# the write (Python runs a handler at the next bytecode of the main thread) — the moment the
# signal used to be dropped, whatever the timing.
HOOK = textwrap.dedent("""
    import os, sys
    from mgsparse.cli import train
    signum, at = int(sys.argv[1]), int(sys.argv[2])
    real = train._Writer.__call__

    def call(self, result):
        if len(result.runs) == at and not getattr(call, "sent", False):
            call.sent = True
            os.kill(os.getpid(), signum)
            assert train.signal.getsignal(signum) is not None  # the handler has run here
        return real(self, result)

    train._Writer.__call__ = call
    sys.argv = ["mgsparse", *sys.argv[3:]]
    from mgsparse._entry import main
    main()
""")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_a_signal_while_the_folder_is_written_stops_the_series(tmp_path, signum, code):
    script, out = tmp_path / "hooked.py", tmp_path / "series"
    script.write_text(HOOK)
    env = dict(os.environ, MGSPARSE_DATA=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, str(script), str(int(signum)), "2", "train", str(KARATE), "--quiet",
         "--runs", "40", "--epochs", "2", "--set", "train.patience=null", "--out", str(out)],
        check=False, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert f"{name}: writing what the run produced first, then stopping" in proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    # runs 0 and 1 finished; run 2 trained one epoch, then stopped and saved its checkpoint
    assert [r["status"] for r in metrics["runs"]] == ["completed", "completed", "interrupted"]
    assert [len(r["epochs"]) for r in metrics["runs"]] == [2, 2, 1]
    assert metrics["summary"]["status"] == "interrupted"
    with open(out / "epochs.csv", newline="") as f:
        rows = [(int(r["run"]), int(r["epoch"]), float(r["loss"])) for r in csv.DictReader(f)]
    assert rows == [(r["run"], e["epoch"], e["loss"]) for r in metrics["runs"]
                    for e in r["epochs"]]
    assert sorted(p.name for p in out.glob("params_run*.npz")) == [
        "params_run0.npz", "params_run1.npz", "params_run2.npz"]
    assert f"continue with: mgsparse train --resume {out}" in proc.stderr


def test_a_first_signal_during_the_write_is_recorded_and_stops_the_loop():
    """The handler's rule: a first signal that lands while the folder is written asks the
    loop to stop (it was dropped); a second one there still does not abort the write."""
    from mgsparse.cli.train import _Signals

    state, seen = _Signals(), []

    def write(result):
        state.handler(signal.SIGTERM, None)
        state.handler(signal.SIGTERM, None)  # no KeyboardInterrupt inside the write
        seen.append(result)

    state.shield(write)("result")
    assert seen == ["result"] and state.received == signal.SIGTERM
    assert state.should_stop()


def test_an_error_after_an_abort_is_the_abort_and_the_folder_says_interrupted(
        cli, tmp_path, monkeypatch):
    """A second Ctrl-C that lands inside a module being imported leaves it half imported; the
    ImportError that follows is the abort's doing: exit 130, no traceback, and metrics.json
    (written after run 0 said the series was fine) now says `interrupted`."""
    from mgsparse.cli import train as command

    real_fit = command.fit

    def fit_then_abort_in_an_import(config, task, **hooks):
        result = real_fit(config, task, **hooks)  # every run, written by on_run_end
        os.kill(os.getpid(), signal.SIGINT)  # first: stop after this epoch
        try:
            os.kill(os.getpid(), signal.SIGINT)  # second: abort, here inside an "import"
        except KeyboardInterrupt:
            raise ImportError("cannot import name 'x' from partially initialized module")
        return result

    monkeypatch.setattr(command, "fit", fit_then_abort_in_an_import)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    out = tmp_path / "run"
    try:
        result = cli("train", KARATE, "--epochs", "3", "--quiet", "--out", out)
    finally:
        for s, old in before.items():
            signal.signal(s, old)
    assert result.exit_code == 130, result.output
    assert "Traceback" not in result.output and "ImportError" not in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["summary"]["status"] == "interrupted"
    assert len(metrics["runs"][0]["epochs"]) == 3


def test_a_folder_written_between_runs_says_incomplete_not_ok(tmp_path):
    """A process killed between two runs leaves the folder of the runs so far: it must not
    read as a finished series."""
    from mgsparse.run import make_task
    from mgsparse.run.checkpoint import write_outputs
    from mgsparse.run.loop import fit
    from tests.conftest import make_config

    config = make_config(train={"epochs": 2, "runs": 3})
    statuses = []

    def on_run_end(result):
        write_outputs(tmp_path, result)
        statuses.append(json.loads((tmp_path / "metrics.json").read_text())["summary"]
                        ["status"])

    fit(config, make_task(config), on_run_end=on_run_end)
    assert statuses == ["incomplete", "incomplete", "ok"]


def test_a_stopped_run_says_how_to_continue_and_the_resumed_run_where(cli, tmp_path,
                                                                      monkeypatch):
    """The stop names the checkpoint and the command that continues it; the resumed run
    says at which run and epoch it goes on."""
    from mgsparse.cli import train as command

    real_fit = command.fit

    def abort_in_run_0(config, task, **hooks):
        calls = []

        def stop():  # a second Ctrl-C after the checkpoint of epoch 2: epoch 3 is lost
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
            return False
        return real_fit(config, task, **{**hooks, "should_stop": stop})

    monkeypatch.setattr(command, "fit", abort_in_run_0)
    out = tmp_path / "run"
    result = cli("train", KARATE, "--epochs", "9", "--quiet", "--out", out,
                 "--set", "train.checkpoint_every=2")
    assert result.exit_code == 130, result.output
    assert (f"{out / 'checkpoint.npz'} holds run 0 at epoch 2; continue with: mgsparse train "
            f"--resume {out}") in result.stderr
    monkeypatch.setattr(command, "fit", real_fit)
    result = cli("train", "--resume", out, "--quiet")
    assert result.exit_code == 0, result.output
    assert "resuming run 0 at epoch 3 of 9 (2 of the series' 9 epochs done)" in result.stderr
    assert "continue with" not in result.stderr


def test_a_stopped_bar_shows_the_budget_and_a_resumed_one_starts_where_it_stopped():
    from mgsparse.cli.live import TrainDisplay
    from tests.conftest import make_config

    config = make_config(train={"epochs": 1000})
    display = TrainDisplay(config, {})
    with display:
        for epoch in range(1, 604):
            display.on_epoch(0, _Row(epoch), _Stats(), [])
        display.stopped = True
    (task,) = display.progress.tasks
    assert (task.completed, task.total) == (603, 1000)  # not 603/603
    finished = TrainDisplay(config, {})
    with finished:  # early stopping: a finished series' bar is full
        finished.on_epoch(0, _Row(1), _Stats(), [])
    assert finished.progress.tasks[0].total == 1
    resumed = TrainDisplay(config, {})
    resumed.resume_at(603)
    assert resumed.progress.tasks[0].completed == 603


class _Row:
    def __init__(self, epoch):
        self.epoch, self.loss, self.grad_norm, self.lr = epoch, 0.5, 1.0, None
        self.scores = {"train_acc": 0.5, "val_acc": 0.5, "test_acc": 0.5, "val_loss": 0.5}


class _Stats:
    mem_held_mb = mem_peak_mb = block_nnz = None
    epoch_ms, batches = 1.0, 1


def test_stale_files_of_an_earlier_series_are_removed(cli, tmp_path):
    """3 runs then 1 run into one folder: the folder holds the second series only."""
    out = tmp_path / "run"
    assert cli("train", KARATE, "--epochs", "2", "--runs", "3", "--quiet",
               "--out", out).exit_code == 0
    assert len(list(out.glob("params_run*.npz"))) == 3
    (out / "params_run7.npz").write_bytes(b"older still")
    (out / "notes.txt").write_text("the user's own file stays")
    result = cli("train", KARATE, "--epochs", "2", "--runs", "1", "--quiet", "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["epochs.csv", "metrics.json", "notes.txt",
                                                     "params_run0.npz"]
    assert len(json.loads((out / "metrics.json").read_text())["runs"]) == 1


def test_a_series_writes_each_runs_parameters_once_and_appends_its_rows(tmp_path):
    """After run 1, the writer leaves run 0's parameters and epochs.csv's lines in place
    (same file: the rows are appended), and writes run 1's."""
    from mgsparse.cli.train import _Writer
    from mgsparse.run import make_task
    from mgsparse.run.loop import fit
    from tests.conftest import make_config

    config = make_config(train={"epochs": 2, "runs": 3})
    writer, seen = _Writer(tmp_path), []

    def on_run_end(result):
        writer(result)
        seen.append({p.name: p.stat().st_ino for p in tmp_path.iterdir()})

    fit(config, make_task(config), on_run_end=on_run_end)
    assert seen[1]["params_run0.npz"] == seen[0]["params_run0.npz"]
    assert seen[2]["params_run1.npz"] == seen[1]["params_run1.npz"]
    assert seen[2]["epochs.csv"] == seen[0]["epochs.csv"]
    lines = (tmp_path / "epochs.csv").read_text().splitlines()
    assert len(lines) == 1 + 3 * 2 and lines[0].startswith("run,seed,epoch,loss")


def test_checking_the_run_folder_names_of_a_billion_runs_is_instant(tmp_path):
    """`--runs 1000000000 --out DIR --plot P`: the collision check matches names by pattern
    (it built a billion paths: 9.7 GB after 10 s). In a child with 2 GB of address space."""
    code = textwrap.dedent(f"""
        import resource, time
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from mgsparse.cli.train import _check_outputs
        t0 = time.perf_counter()
        _check_outputs(Path({str(tmp_path / 'out')!r}), None, 10**9)
        print(time.perf_counter() - t0)
    """)
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert float(proc.stdout) < 0.5


def test_the_run_folder_names_are_matched_by_pattern(tmp_path):
    from mgsparse.cli.outputs import RunFolderPaths, check_output

    taken = RunFolderPaths(tmp_path, 10**9)
    folder = tmp_path.resolve()
    assert folder in taken and folder / "params_run999999999.npz" in taken
    assert folder / "params_run1000000000.npz" not in taken
    assert folder / "params_run01.npz" not in taken and folder / "checkpoint.npz" in taken
    assert taken[folder / "metrics.json"] == "--out" and Path("elsewhere") not in taken
    check_output(tmp_path / "k.png", "--plot", suffixes=(".png",), taken=taken)
    assert (tmp_path / "k.png").resolve() in taken
