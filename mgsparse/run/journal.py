"""A full checkpoint's journal, and the checks every saved value passes before a run resumes.

A checkpoint is two files: ``checkpoint.npz`` (the head: what the next epoch reads, written
whole at each save and of a size set by the model, not by the epochs done) and
``checkpoint.jsonl`` (the journal: what the series recorded, appended at each save with only
what is new since the last one). The journal holds one JSON line per save and run, a
*chunk* (the run's epoch rows, timings, alarms and events recorded since the previous save),
and one *end* line per finished run (its status, best epoch and scores; its best parameters
are its ``params_run<i>.npz``). The head counts the journal's bytes it belongs to: lines after
them (a save cut short between the two files) are not part of the checkpoint, and the next
save writes over them. So a save costs the same at epoch 10 and at epoch 10,000.

Everything read back is checked value by value: an edited or damaged file is one
`DataError` line naming the file (and line) and the key, never a traceback, and a value out
of range (an epoch below 1, a run the series does not have) is refused, not trained from.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from mgsparse.config import Config
from mgsparse.errors import DataError
from mgsparse.run.results import EpochRow, EpochStats, RunResult
from mgsparse.run.task import Scores

STATUSES = ("completed", "early_stopped", "interrupted", "aborted", "diverged", "over_budget")
STATS = tuple(f.name for f in dataclasses.fields(EpochStats))


def chunk(run: int, result: RunResult, rows: int, alarms: int, events: int) -> dict[str, Any]:
    """The journal line of `result`'s records after its first `rows` rows, `alarms` alarms
    and `events` events."""
    return {"run": run,
            "rows": [[r.epoch, r.loss, dict(r.scores), r.grad_norm, r.lr]
                     for r in result.rows[rows:]],
            "stats": [dataclasses.asdict(s) for s in result.stats[rows:]],
            "alarms": list(result.alarms[alarms:]), "events": list(result.events[events:])}


def summary(result: RunResult) -> dict[str, Any]:
    """What a run's record holds besides its rows: status, message, best epoch, scores."""
    return {"seed": result.seed, "status": result.status, "message": result.message,
            "best_epoch": result.best_epoch, "scores": dict(result.scores)}


def end(run: int, result: RunResult) -> dict[str, Any]:
    return {"end": run, **summary(result), "params": bool(result.state)}


class _Damaged(Exception):
    """A value that fails its check: where, which key, what it is, what it should be."""


def _need(ok: bool, key: str, value: Any, want: str) -> None:
    if not ok:
        shown = json.dumps(value, allow_nan=True, default=str)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise _Damaged(f"{key!r} is {shown}, not {want}")


def _whole(value: Any, lo: int, hi: float = math.inf) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scores(key: str, value: Any) -> Scores:
    _need(isinstance(value, dict) and all(isinstance(k, str) and _number(v)
                                          for k, v in value.items()),
          key, value, "a mapping of score names to numbers")
    return Scores(value)


def check_head(meta: Any, config: Config, format_: int) -> None:
    """Every value of the head's meta, against the config it was written for."""
    if not isinstance(meta, dict):
        raise _Damaged("its meta is not a mapping")
    _need(meta.get("format") == format_, "format", meta.get("format"), f"{format_}")
    runs = config.train.folds or config.train.runs
    _need(_whole(meta.get("run_index"), 0, runs - 1), "run_index", meta.get("run_index"),
          f"a run of this series (0 to {runs - 1})")
    seed = config.train.seed + meta["run_index"]
    _need(meta.get("seed") == seed, "seed", meta.get("seed"), f"run {meta['run_index']}'s "
          f"seed {seed}")
    epochs = config.train.epochs
    _need(_whole(meta.get("epoch"), 1, epochs), "epoch", meta.get("epoch"),
          f"a whole number from 1 to {epochs}")
    _need(_whole(meta.get("journal_bytes"), 0), "journal_bytes", meta.get("journal_bytes"),
          "a byte count")
    run = meta.get("run")
    _need(isinstance(run, dict), "run", run, "a mapping")
    run_summary("run", run, meta["epoch"])
    optimizer = meta.get("optimizer")
    _need(isinstance(optimizer, dict) and isinstance(optimizer.get("param_groups"), list)
          and isinstance(optimizer.get("scalars"), dict), "optimizer", optimizer,
          "a mapping of param_groups and scalars")
    for key in ("generators", "shuffle"):
        _need(isinstance(meta.get(key), dict), key, meta.get(key), "a mapping")
    _need(meta.get("schedule") is None or isinstance(meta["schedule"], dict), "schedule",
          meta.get("schedule"), "a mapping or null")


def run_summary(key: str, record: dict, epochs: int) -> Scores:
    """A run record's status, message, best epoch (at most `epochs`) and scores."""
    _need(record.get("status") in STATUSES, f"{key}.status", record.get("status"),
          "one of " + ", ".join(STATUSES))
    _need(isinstance(record.get("message"), str), f"{key}.message", record.get("message"),
          "a text")
    _need(_whole(record.get("best_epoch"), 0, epochs), f"{key}.best_epoch",
          record.get("best_epoch"), f"an epoch from 0 to {epochs}")
    return _scores(f"{key}.scores", record.get("scores"))


def _rows(record: dict, first: int) -> tuple[list[EpochRow], list[EpochStats]]:
    rows, stats = record.get("rows"), record.get("stats")
    _need(isinstance(rows, list) and isinstance(stats, list) and len(rows) == len(stats),
          "rows", rows, "a list as long as 'stats'")
    out, timing = [], []
    for n, (row, stat) in enumerate(zip(rows, stats), first):
        _need(isinstance(row, list) and len(row) == 5 and row[0] == n and _number(row[1])
              and _number(row[3]) and (row[4] is None or _number(row[4])),
              "rows", row, f"[{n}, loss, scores, grad_norm, lr]")
        out.append(EpochRow(n, row[1], _scores("rows.scores", row[2]), row[3], row[4]))
        _need(isinstance(stat, dict) and tuple(stat) == STATS and stat["epoch"] == n
              and all(v is None or _number(v) for v in stat.values()),
              "stats", stat, f"epoch {n}'s timing")
        timing.append(EpochStats(**stat))
    for key in ("alarms", "events"):
        _need(isinstance(record.get(key), list), key, record.get(key), "a list")
    return out, timing


def read_journal(path: Path, size: int, run_index: int, epoch: int,
                 epochs: int) -> tuple[list[RunResult], list[bool]]:
    """The runs `path`'s first `size` bytes record: runs 0..run_index-1 ended, with
    whether each saved parameters, then the run in progress with `epoch` rows (its status,
    best epoch and scores are the head's)."""
    try:
        with open(path, "rb") as f:
            data = f.read(size)
    except FileNotFoundError:
        raise DataError(f"{path} not found: the checkpoint's epoch rows are missing") from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    if len(data) < size:
        raise DataError(f"{path} is damaged: {len(data)} bytes, not the {size} its "
                        "checkpoint counts")
    runs = [RunResult(seed=0) for _ in range(run_index + 1)]
    params = [False] * (run_index + 1)
    ended = 0
    for number, line in enumerate(data.split(b"\n")[:-1] if data else [], 1):
        try:
            record = json.loads(line.decode("utf-8"))
            _need(isinstance(record, dict), "line", record, "a mapping")
            if "end" in record:
                _need(record["end"] == ended < run_index, "end", record["end"],
                      f"run {ended}, the next to end")
                run = runs[ended]
                run.scores = run_summary("end", record, len(run.rows))
                run.seed, run.status, run.message = (record["seed"], record["status"],
                                                     record["message"])
                run.best_epoch = record["best_epoch"]
                _need(isinstance(record.get("params"), bool), "params", record.get("params"),
                      "true or false")
                params[ended], ended = record["params"], ended + 1
                continue
            _need(record.get("run") == ended, "run", record.get("run"),
                  f"run {ended}, the run under way")
            run = runs[ended]
            rows, stats = _rows(record, len(run.rows) + 1)
            run.rows += rows
            run.stats += stats
            run.alarms += [str(a) for a in record["alarms"]]
            run.events += [e for e in record["events"] if isinstance(e, dict)]
        except (UnicodeDecodeError, json.JSONDecodeError, _Damaged) as e:
            raise DataError(f"{path} line {number} is damaged: {e}") from None
    if ended != run_index or len(runs[-1].rows) != epoch:
        raise DataError(f"{path} is damaged: it records {ended} finished runs and "
                        f"{len(runs[-1].rows)} epochs of the next, where its checkpoint "
                        f"says run {run_index} at epoch {epoch}")
    for i, run in enumerate(runs[:-1]):
        if run.best_epoch > len(run.rows) or len(run.rows) > epochs:
            raise DataError(f"{path} is damaged: run {i} records {len(run.rows)} epochs "
                            f"and best epoch {run.best_epoch}")
    return runs, params


def head_problem(meta: Any, config: Config, format_: int) -> str | None:
    """`check_head`'s finding as a text (None: every value is in range)."""
    try:
        check_head(meta, config, format_)
    except _Damaged as e:
        return str(e)
    return None
