"""A full checkpoint's two files: a save costs the same at epoch 10 and at epoch 120 (the
journal gets only what is new), its time counts in the summary, and an edited value in
either file is refused in one line naming the file and the key, with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgsparse.run import make_task
from mgsparse.run import resume as resume_module
from mgsparse.run.checkpoint import write_outputs
from mgsparse.run.loop import fit
from mgsparse.run.resume import CHECKPOINT, FullCheckpoints
from tests.conftest import make_config, one_line_error
from tests.run.test_resume import snapshot, stop_after

JOURNAL = "checkpoint.jsonl"  # the journal beside checkpoint.npz (docs/training-and-memory.md)


def test_a_save_costs_the_same_whatever_the_epochs_before_it(tmp_path):
    """checkpoint_every 1: every save serialised every epoch row so far (1,000 karate epochs
    10.5 s against 1.1 s). Now the head's size does not move and the journal grows by one
    row a save."""
    config = make_config(train={"epochs": 120, "checkpoint_every": 1})
    head, journal = {}, {}

    def sizes(run_index, row, stats, alarms):  # the files as the previous epoch's save left them
        if (tmp_path / CHECKPOINT).is_file():
            head[row.epoch - 1] = (tmp_path / CHECKPOINT).stat().st_size
            journal[row.epoch - 1] = (tmp_path / JOURNAL).stat().st_size
    fit(config, make_task(config), on_epoch=sizes, checkpoints=FullCheckpoints(tmp_path, config))
    assert abs(head[110] - head[10]) < 64, (head[10], head[110])
    grown = [journal[e] - journal[e - 1] for e in range(11, 119)]
    assert max(grown) < 1.5 * min(grown) and max(grown) < 2000, grown


def test_the_time_a_save_takes_counts_in_the_summary(tmp_path, monkeypatch):
    config = make_config(train={"epochs": 6, "checkpoint_every": 2})
    real = FullCheckpoints.save

    def slow_save(self, state, runs_done):
        import time
        time.sleep(0.05)
        real(self, state, runs_done)

    monkeypatch.setattr(FullCheckpoints, "save", slow_save)
    result = fit(config, make_task(config), checkpoints=FullCheckpoints(tmp_path, config))
    ms = [s.epoch_ms for s in result.runs[0].stats]
    assert min(ms[1], ms[3]) >= 50 > max(ms[0], ms[2], ms[4], ms[5])  # saves at 2 and 4
    assert result.summary().total_time_s >= 0.1


def stopped_series(folder):
    """Two runs of 6 epochs, stopped in run 1's epoch 3, as `mgsparse train --out` leaves
    them (checkpoints at run 0's epochs 2 and 4, run 1's 2 and 3)."""
    config = make_config(train={"epochs": 6, "checkpoint_every": 2, "runs": 2})
    result = fit(config, make_task(config), should_stop=stop_after(9),
                 checkpoints=FullCheckpoints(folder, config))
    write_outputs(folder, result)
    return config


def edit_head(folder, **changes):
    path = folder / CHECKPOINT
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    meta.update(changes)
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)


def edit_journal(folder, number, line):
    """Line `number` (from 1) of the journal replaced, the head's byte count kept right."""
    lines = (folder / JOURNAL).read_text().splitlines(keepends=True)
    lines[number - 1] = line + "\n"
    (folder / JOURNAL).write_text("".join(lines))
    edit_head(folder, journal_bytes=len("".join(lines).encode()))


HEAD_EDITS = {  # the key, what it is set to, what the one line says
    "epoch text": ("epoch", "abc", "'epoch' is \"abc\", not a whole number from 1 to 6"),
    "epoch -5": ("epoch", -5, "'epoch' is -5, not a whole number from 1 to 6"),
    "epoch 0": ("epoch", 0, "'epoch' is 0"),
    "epoch past the budget": ("epoch", 7, "'epoch' is 7"),
    "run mapping empty": ("run", {}, "'run.status' is null"),
    "run a list": ("run", [], "'run' is [], not a mapping"),
    "run_index 99": ("run_index", 99, "'run_index' is 99, not a run of this series (0 to 1)"),
    "run_index -1": ("run_index", -1, "'run_index' is -1"),
    "run_index text": ("run_index", "a", "'run_index' is \"a\""),
    "run_index bool": ("run_index", True, "'run_index' is true"),
    "best epoch past the epoch": ("run", {"status": "completed", "message": "",
                                          "best_epoch": 5, "scores": {}}, "'run.best_epoch'"),
    "scores not numbers": ("run", {"status": "completed", "message": "", "best_epoch": 1,
                                   "scores": {"val_acc": "x"}}, "'run.scores'"),
    "optimizer": ("optimizer", 3, "'optimizer' is 3"),
    "journal bytes": ("journal_bytes", -1, "'journal_bytes' is -1"),
}


@pytest.mark.parametrize("key, value, says", list(HEAD_EDITS.values()), ids=list(HEAD_EDITS))
def test_an_edited_head_is_refused_in_one_line(cli, tmp_path, key, value, says):
    stopped_series(tmp_path)
    edit_head(tmp_path, **{key: value})
    before = snapshot(tmp_path)
    one_line_error(cli("train", "--resume", tmp_path, "--quiet"), 1,
                   f"{tmp_path / CHECKPOINT} is damaged: ", says)
    assert snapshot(tmp_path) == before


EMPTY_ROW = '{"run": 0, "rows": [{}], "stats": [{}], "alarms": [], "events": []}'
AHEAD = '{"run": 5, "rows": [], "stats": [], "alarms": [], "events": []}'
JOURNAL_EDITS = {  # line number, the line put there, what the one line says; the lines:
    # run 0's rows 1-2, 3-4, 5-6, run 0's end, run 1's rows 1-2, 3
    "an empty mapping": (1, "{}", "line 1 is damaged: 'run' is null, not run 0"),
    "a finished run emptied": (4, '{"end": 0}', "line 4 is damaged: 'end.status' is null"),
    "not json": (2, "{not json", "line 2 is damaged: "),
    "a row without its epoch": (2, EMPTY_ROW, "line 2 is damaged: 'rows' is {}, not [3, loss"),
    "a run out of order": (5, AHEAD, "line 5 is damaged: 'run' is 5, not run 1"),
}


@pytest.mark.parametrize("number, line, says", list(JOURNAL_EDITS.values()),
                         ids=list(JOURNAL_EDITS))
def test_an_edited_journal_is_refused_in_one_line(cli, tmp_path, number, line, says):
    stopped_series(tmp_path)
    edit_journal(tmp_path, number, line)
    before = snapshot(tmp_path)
    one_line_error(cli("train", "--resume", tmp_path, "--quiet"), 1, str(tmp_path / JOURNAL),
                   says)
    assert snapshot(tmp_path) == before


def test_a_journal_cut_short_or_missing_is_refused(cli, tmp_path):
    stopped_series(tmp_path)
    data = (tmp_path / JOURNAL).read_bytes()
    (tmp_path / JOURNAL).write_bytes(data[:-10])
    one_line_error(cli("train", "--resume", tmp_path), 1, f"{tmp_path / JOURNAL} is damaged",
                   f"not the {len(data)} its checkpoint counts")
    (tmp_path / JOURNAL).unlink()
    one_line_error(cli("train", "--resume", tmp_path), 1, f"{tmp_path / JOURNAL} not found")


def test_lines_after_the_heads_count_are_not_the_checkpoints(tmp_path):
    """A save cut short between the journal and the head: the next resume reads the journal
    only as far as the head counts, and its first save writes over the rest."""
    from tests.run.test_resume import assert_same_series, resumed

    config = stopped_series(tmp_path)
    whole = fit(config, make_task(config))
    with open(tmp_path / JOURNAL, "a") as f:
        f.write('{"run": 1, "rows": [[4, 0.1, {}, 0.1, null]], "half a line')
    assert_same_series(whole, resumed(tmp_path))


def test_a_finished_runs_parameters_are_read_from_its_params_file(cli, tmp_path, monkeypatch):
    stopped_series(tmp_path)
    (tmp_path / "params_run0.npz").write_bytes(b"PK\x03\x04 truncated")
    one_line_error(cli("train", "--resume", tmp_path), 1, "params_run0.npz is damaged")
    assert resume_module.FORMAT == 2
