"""Full checkpoints: a run stopped (cleanly or mid-epoch) and resumed is bitwise the run that
never stopped — full batch, sampled, over several runs — and a checkpoint that is missing,
damaged or another config's is refused in one line, with nothing overwritten."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgsparse.errors import ConfigError, DataError
from mgsparse.run import make_task
from mgsparse.run import resume as resume_module
from mgsparse.run.checkpoint import write_outputs
from mgsparse.run.loop import fit
from mgsparse.run.resume import CHECKPOINT, FullCheckpoints, config_hash, read_checkpoint
from tests.conftest import CONFIGS, make_config, moons_config, one_line_error

KARATE = CONFIGS / "karate.yaml"


def assert_same_series(a, b) -> None:
    """Every run's epoch rows, best epoch, best scores and best parameters, bit for bit."""
    assert [r.seed for r in a.runs] == [r.seed for r in b.runs]
    for x, y in zip(a.runs, b.runs):
        assert [r.as_dict() for r in x.rows] == [r.as_dict() for r in y.rows]
        assert (x.best_epoch, dict(x.scores), x.status) == (y.best_epoch, dict(y.scores),
                                                            y.status)
        assert x.state.keys() == y.state.keys()
        for k in x.state:
            assert np.array_equal(x.state[k], y.state[k]), k


def stop_after(total_epochs: int):
    """A should_stop that asks to stop after the `total_epochs`-th epoch of the series."""
    count = [0]

    def stop() -> bool:
        count[0] += 1
        return count[0] == total_epochs
    return stop


def resumed(folder):
    config, saved = read_checkpoint(folder)
    return fit(config, make_task(config), checkpoints=FullCheckpoints(folder, config, saved))


SERIES = {  # epochs 8, checkpoint every 3, two runs: stopped in the second run's epoch 5
    "full batch": {},
    "sampled": {"train": {"batch_size": 8}},
    "cosine schedule": {"optim": {"schedule": "cosine", "warmup": 2, "min_lr": 0.001}},
    "plateau schedule": {"optim": {"schedule": "plateau", "plateau_patience": 0},
                         "train": {"select": "acc"}},
    "batch norm, residual, jk": {"model": {"norm": "batch", "residual": True, "jk": "cat",
                                           "layers": 3}},
}


@pytest.mark.parametrize("sections", list(SERIES.values()), ids=list(SERIES))
def test_a_run_stopped_and_resumed_is_bitwise_the_run_that_never_stopped(tmp_path, sections):
    train = {"epochs": 8, "checkpoint_every": 3, "runs": 2, **sections.get("train", {})}
    config = make_config(**{**sections, "train": train})
    task = make_task(config)
    whole = fit(config, task)
    stopped = fit(config, task, should_stop=stop_after(8 + 5),
                  checkpoints=FullCheckpoints(tmp_path, config))
    assert [r.status for r in stopped.runs] == ["completed", "interrupted"]
    assert len(stopped.runs[1].rows) == 5
    assert read_checkpoint(tmp_path)[1][0]["epoch"] == 5  # the stop wrote one
    rest = resumed(tmp_path)
    assert [len(r.rows) for r in rest.runs] == [8, 8]
    assert_same_series(whole, rest)
    if "optim" in sections:  # the schedule moved the rate, and the resumed run followed it
        assert len({r.lr for r in rest.runs[1].rows}) > 1


def test_a_run_aborted_mid_epoch_resumes_from_the_last_periodic_checkpoint(tmp_path):
    config = make_config(model={"kind": "gat", "hidden": 4, "heads": 2},
                         train={"epochs": 9, "checkpoint_every": 3})
    task = make_task(config)
    whole = fit(config, task)

    def abort(run_index, row, stats, alarms):  # a second Ctrl-C: the epoch is abandoned
        if row.epoch == 8:
            raise KeyboardInterrupt
    aborted = fit(config, task, on_epoch=abort, checkpoints=FullCheckpoints(tmp_path, config))
    assert aborted.runs[0].status == "aborted"
    config_back, saved = read_checkpoint(tmp_path)
    assert saved[0]["epoch"] == 6 and config_back == config
    assert_same_series(whole, resumed(tmp_path))


def test_a_point_cloud_run_resumes_bitwise_too(tmp_path):
    config = moons_config("train.epochs=6", "train.checkpoint_every=2", "train.patience=null")
    task = make_task(config)
    whole = fit(config, task)
    fit(config, task, should_stop=stop_after(3), checkpoints=FullCheckpoints(tmp_path, config))
    assert_same_series(whole, resumed(tmp_path))


def test_without_the_generators_state_the_resumed_run_differs(tmp_path, monkeypatch):
    """The negative control: dropout's generator is part of what makes resuming bitwise."""
    config = make_config(train={"epochs": 6, "checkpoint_every": 2})
    whole = fit(config, make_task(config))
    fit(config, make_task(config), should_stop=stop_after(3),
        checkpoints=FullCheckpoints(tmp_path, config))
    monkeypatch.setattr(resume_module, "set_generators", lambda model, saved: None)
    rest = resumed(tmp_path)
    assert [r.loss for r in rest.runs[0].rows[:3]] == [r.loss for r in whole.runs[0].rows[:3]]
    assert rest.runs[0].rows[3].loss != whole.runs[0].rows[3].loss


def test_the_checkpoint_holds_the_generators_optimizer_and_config_hash(tmp_path):
    config = make_config(train={"epochs": 4, "checkpoint_every": 2},
                         model={"keyed_dropout": True})  # whose masks count the forwards
    fit(config, make_task(config), should_stop=stop_after(3),
        checkpoints=FullCheckpoints(tmp_path, config))
    _, (meta, arrays, runs) = read_checkpoint(tmp_path)
    assert meta["config_hash"] == config_hash(config) and meta["epoch"] == 3
    assert meta["run_index"] == 0 and meta["seed"] == 0
    assert ":rng" in meta["generators"] and meta["generators"][":dropout_step"] == 3
    assert meta["shuffle"]["bit_generator"] == "PCG64"
    assert {k for k in arrays if k.startswith("optim/")} >= {"optim/0/exp_avg",
                                                              "optim/0/exp_avg_sq"}
    assert meta["optimizer"]["scalars"]["0"]["step"] == 3
    assert [r.epoch for r in runs[0].rows] == [1, 2, 3] and "rows" not in meta["run"]


# ---------------------------------------------------------------- refused, in one line


def test_reading_no_checkpoint_a_damaged_one_or_another_configs(tmp_path):
    with pytest.raises(ConfigError, match="holds no full checkpoint"):
        read_checkpoint(tmp_path)
    (tmp_path / CHECKPOINT).write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(DataError, match="is damaged"):
        read_checkpoint(tmp_path)


def checkpointed_folder(folder, **train):
    """A run folder as a stopped `mgsparse train --out` leaves it."""
    config = make_config(train={"epochs": 6, "checkpoint_every": 2, **train})
    result = fit(config, make_task(config), should_stop=stop_after(3),
                 checkpoints=FullCheckpoints(folder, config))
    write_outputs(folder, result)
    return config, result


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_cli_resume_continues_the_folder_and_removes_the_checkpoint(cli, tmp_path):
    stopped, fresh = tmp_path / "stopped", tmp_path / "fresh"
    config, _ = checkpointed_folder(stopped)
    yaml = tmp_path / "karate.yaml"
    yaml.write_text(json.dumps(config.to_dict()))  # JSON is YAML
    assert cli("train", yaml, "--out", fresh, "--quiet").exit_code == 0
    result = cli("train", "--resume", stopped, "--quiet")
    assert result.exit_code == 0, result.output
    assert not (stopped / CHECKPOINT).exists()

    def epochs(folder):
        return [r["epochs"] for r in json.loads((folder / "metrics.json").read_text())["runs"]]
    assert epochs(stopped) == epochs(fresh) and len(epochs(stopped)[0]) == 6
    assert (stopped / "params_run0.npz").read_bytes() != b""
    with np.load(stopped / "params_run0.npz") as a, np.load(fresh / "params_run0.npz") as b:
        assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_cli_resume_refuses_bad_folders_in_one_line_and_writes_nothing(cli, tmp_path):
    one_line_error(cli("train", "--resume", tmp_path), 2, "holds no full checkpoint")
    checkpointed_folder(tmp_path)
    before = snapshot(tmp_path)
    other = tmp_path.parent / "other.yaml"
    other.write_text("dataset:\n  name: karate\ntrain:\n  epochs: 7\n")
    one_line_error(cli("train", other, "--resume", tmp_path), 2, "another config",
                   "train.epochs")
    one_line_error(cli("train", "--resume", tmp_path, "--epochs", "9"), 2,
                   "would change the saved config")
    one_line_error(cli("train", "--resume", tmp_path, "--partitions", tmp_path), 2,
                   "keeps no full checkpoint")
    one_line_error(cli("train", "--resume", tmp_path, "--out", tmp_path.parent), 2,
                   "drop --out")
    assert snapshot(tmp_path) == before
    data = bytearray((tmp_path / CHECKPOINT).read_bytes())
    data[len(data) // 2:] = b"\0" * (len(data) - len(data) // 2)
    (tmp_path / CHECKPOINT).write_bytes(bytes(data))
    before = snapshot(tmp_path)
    one_line_error(cli("train", "--resume", tmp_path), 1, CHECKPOINT, "is damaged")
    assert snapshot(tmp_path) == before
