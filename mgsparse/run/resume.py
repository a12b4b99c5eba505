"""Full checkpoints: everything a series of runs needs to go on as if it had never stopped.

`mgsparse train CONFIG --out DIR` keeps, beside the best parameters, a full checkpoint
written every `train.checkpoint_every` epochs and when a run is stopped (Ctrl-C, SIGTERM);
`mgsparse train --resume DIR` continues from it. Resuming is *bitwise*: the next epoch reads
exactly the numbers it would have read, because the checkpoint holds every input of an
epoch that is not the config or the data:

- the model's parameters and buffers (BatchNorm's running statistics), every random
  generator a module holds (dropout's, attention dropout's) and the counters its next
  forward reads (`dropout_step`, `dropout_key` of keyed masks);
- the optimizer's state (Adam's moments and step, each group's options, the learning rate
  included) and the learning-rate schedule's state;
- the run's shuffle generator (batch order, neighbour samples);
- what the run recorded so far: epoch rows, timings, alarms, the best epoch and its
  parameters (patience counts from it), and every run of the series finished before it.

It is two files (`mgsparse.run.journal`): ``DIR/checkpoint.npz``, the head, one ``.npz`` of
arrays under ``<part>/<name>`` and one JSON text (``meta``) for the rest, with the config
and its SHA-256 (`config_hash`): a checkpoint is refused for any other config; and
``DIR/checkpoint.jsonl``, the journal of what the series recorded, to which each save
appends only what is new. A finished run's best parameters are its ``params_run<i>.npz``,
written once. So a save costs what the model's state costs, whatever the epochs and runs
before it. The head is written atomically (`mgsparse.data.atomic`) after the journal: a
crash mid-save leaves the previous checkpoint whole. When a series ends (not stopped), the
checkpoint is removed.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mgsparse.config import Config, config_from_dict
from mgsparse.data.atomic import atomic_write
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.nn.module import Module
from mgsparse.run import journal
from mgsparse.run.checkpoint import RunFolder, output_dir, params_name, read_params
from mgsparse.run.loop import RunState
from mgsparse.run.results import RunResult
from mgsparse.run.task import Scores

CHECKPOINT = "checkpoint.npz"
JOURNAL = "checkpoint.jsonl"
FORMAT = 2  # 1: every epoch row in the head, re-serialised at each save
COUNTERS = ("dropout_step", "dropout_key")  # module attributes the next forward reads


def config_hash(config: Config) -> str:
    """SHA-256 of the resolved config (every section, keys sorted): what a checkpoint
    continues, and nothing else."""
    text = json.dumps(config.to_dict(), sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- the model's hidden state


def generators(model: Module) -> dict[str, Any]:
    """Every `np.random.Generator` a module holds and every counter of `COUNTERS`, keyed
    ``<module>:<attribute>`` (a generator shared by several modules appears under each)."""
    out: dict[str, Any] = {}
    for name, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, np.random.Generator):
                out[f"{name}:{attr}"] = value.bit_generator.state
            elif attr in COUNTERS:
                out[f"{name}:{attr}"] = value
    return out


def set_generators(model: Module, saved: dict[str, Any]) -> None:
    """Put back what `generators` saved; a key this model does not have is a damaged file."""
    mine = generators(model)
    if set(mine) != set(saved):
        raise DataError(f"the model's generators {sorted(mine)} are not the saved "
                        f"{sorted(saved)}")
    modules = dict(model.named_modules())
    for key, value in saved.items():
        name, _, attr = key.rpartition(":")
        current = getattr(modules[name], attr)
        if isinstance(current, np.random.Generator):
            current.bit_generator.state = value
        else:
            setattr(modules[name], attr, value)


def _prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


def _optimizer_parts(optimizer: Any) -> tuple[dict, dict[str, np.ndarray]]:
    """The optimizer's state_dict split into JSON (options, step counts) and arrays."""
    sd = optimizer.state_dict()
    arrays, scalars = {}, {}
    for index, buffers in sd["state"].items():
        for key, value in buffers.items():
            if isinstance(value, np.ndarray):
                arrays[f"optim/{index}/{key}"] = value
            else:
                scalars.setdefault(str(index), {})[key] = value
    return {"param_groups": sd["param_groups"], "scalars": scalars}, arrays


def _optimizer_state(meta: dict, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for index, values in meta["scalars"].items():
        state.setdefault(int(index), {}).update(values)
    for key, value in _prefixed(arrays, "optim/").items():
        index, _, name = key.partition("/")
        state.setdefault(int(index), {})[name] = value
    return {"state": state, "param_groups": meta["param_groups"]}


# ---------------------------------------------------------------- the checkpoint



class Saved(NamedTuple):
    """A checkpoint read back and checked: the head's meta and arrays, and every run the
    series recorded (the finished ones with their best parameters, then the one under way
    with its rows; its best parameters are the head's ``best/`` arrays)."""

    meta: dict
    arrays: dict[str, np.ndarray]
    runs: list[RunResult]


class FullCheckpoints:
    """The full checkpoints of one run folder, for `mgsparse.run.loop.fit`: `save` writes one
    (an error is kept in `error`, not raised, so training goes on), `restore` loads a resumed
    run's saved state into the run the loop just built, `discard` removes the files once the
    series is over. `folder` writes the finished runs' parameters (the CLI's run folder
    shares it, so each is written once)."""

    def __init__(self, out_dir: str | Path, config: Config, saved: Saved | None = None,
                 folder: RunFolder | None = None):
        self.path, self.journal = Path(out_dir) / CHECKPOINT, Path(out_dir) / JOURNAL
        self.config, self.hash = config.to_dict(), config_hash(config)
        self.error: MgsparseError | None = None
        self._saved = saved
        self.runs_done: list[RunResult] = []
        self.saved_at: tuple[int, int] | None = None  # (run, epoch) of the file on disk
        self._bytes, self._ended, self._at = 0, 0, (0, 0, 0, 0)  # what the journal holds
        if saved is not None:
            index = saved.meta["run_index"]
            self.runs_done, run = saved.runs[:index], saved.runs[index]
            self._bytes, self._ended = saved.meta["journal_bytes"], index
            self._at = (index, len(run.rows), len(run.alarms), len(run.events))
            self.saved_at = (index, saved.meta["epoch"])
        self.folder = folder or RunFolder(out_dir, fresh=saved is None, written=[
            i for i, r in enumerate(self.runs_done) if r.state])

    @property
    def epoch(self) -> int:
        """Epochs the saved run had done (0: nothing saved)."""
        return self._saved.meta["epoch"] if self._saved else 0

    @property
    def resumes(self) -> tuple[int, int, int] | None:
        """(run, epoch, epochs of the series done) where a resumed series goes on; None for
        a fresh one."""
        if self._saved is None:
            return None
        index, epoch = self._saved.meta["run_index"], self._saved.meta["epoch"]
        return index, epoch, sum(len(r.rows) for r in self.runs_done) + epoch

    def save(self, state: RunState, runs_done: list[RunResult]) -> None:
        try:
            self._save(state, runs_done)
        except DataError as e:
            self.error = e
        except OSError as e:
            self.error = DataError(f"cannot write {self.path}: {e.strerror or e}")

    def _save(self, state: RunState, runs_done: list[RunResult]) -> None:
        """The journal's new lines (the runs finished since the last save, their parameters
        written first, then the run under way), then the head that counts them."""
        output_dir(self.path.parent)
        lines, at = [], self._at
        for j in range(self._ended, len(runs_done)):
            done = runs_done[j]
            self.folder.write_params(j, done.state)
            lines += [journal.chunk(j, done, *(at[1:] if at[0] == j else (0, 0, 0))),
                      journal.end(j, done)]
        run, index = state.run, state.run_index
        lines.append(journal.chunk(index, run, *(at[1:] if at[0] == index else (0, 0, 0))))
        text = "".join(json.dumps(line, allow_nan=True, default=_plain) + "\n"
                       for line in lines).encode("utf-8")
        with open(self.journal, "r+b" if self._bytes else "wb") as f:
            f.seek(self._bytes)
            f.truncate()  # what a save cut short appended after the head's count
            f.write(text)
        size = self._bytes + len(text)
        optim_meta, arrays = _optimizer_parts(state.optimizer)
        meta = {"format": FORMAT, "config": self.config, "config_hash": self.hash,
                "run_index": index, "seed": run.seed, "epoch": state.epoch,
                "journal_bytes": size, "run": journal.summary(run), "optimizer": optim_meta,
                "schedule": state.schedule.state_dict() if state.schedule is not None
                else None, "generators": generators(state.model),
                "shuffle": state.shuffle.bit_generator.state}
        arrays.update({f"model/{k}": v for k, v in state.model.state_dict().items()})
        arrays.update({f"best/{k}": v for k, v in run.state.items()})
        head = np.array(json.dumps(meta, allow_nan=True, default=_plain))
        atomic_write(self.path, lambda f: np.savez(f, meta=head, **arrays), "wb")
        self._bytes, self._ended, self.saved_at = size, len(runs_done), (index, state.epoch)
        self._at = (index, len(run.rows), len(run.alarms), len(run.events))

    def restore(self, state: RunState) -> None:
        """Load the saved run into `state` if `state` is that run (once)."""
        if self._saved is None or state.run_index != self._saved.meta["run_index"]:
            return
        meta, arrays, runs = self._saved
        self._saved = None
        try:
            state.model.load_state_dict(_prefixed(arrays, "model/"))
            state.optimizer.load_state_dict(_optimizer_state(meta["optimizer"], arrays))
            set_generators(state.model, meta["generators"])
            state.shuffle.bit_generator.state = meta["shuffle"]
            if state.schedule is not None:
                state.schedule.load_state_dict(meta["schedule"])
        except (MgsparseError, KeyError, TypeError, ValueError) as e:
            raise DataError(f"{self.path} is damaged: it does not fit this config's model "
                            f"({e})") from None
        state.run = runs[state.run_index]
        state.epoch = meta["epoch"]

    def discard(self) -> None:
        """Remove the checkpoint: the series it belonged to is over."""
        self.path.unlink(missing_ok=True)
        self.journal.unlink(missing_ok=True)


def read_checkpoint(out_dir: str | Path) -> tuple[Config, Saved]:
    """The config and saved state of `out_dir`'s full checkpoint. No checkpoint is a usage
    error (exit 2); files that do not read back whole, or hold a value out of range, are
    damaged ones (exit 1)."""
    path = Path(out_dir) / CHECKPOINT
    if not path.is_file():
        where = "" if Path(out_dir).is_dir() else " (no such folder)"
        raise ConfigError(f"{out_dir} holds no full checkpoint ({CHECKPOINT}){where}: it is "
                          "written by `mgsparse train --out` every train.checkpoint_every "
                          "epochs and when a run is stopped, and removed when the series ends")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
            raise TypeError("no config mapping in its meta")
        config = config_from_dict(meta["config"], source=str(path))
    except (OSError, ValueError, EOFError, KeyError, TypeError, zipfile.BadZipFile,
            MgsparseError) as e:
        raise DataError(f"{path} is damaged ({type(e).__name__}: {e})") from None
    if meta.get("config_hash") != config_hash(config):
        raise DataError(f"{path} is damaged: its config does not match the hash recorded "
                        "with it")
    problem = journal.head_problem(meta, config, FORMAT)
    if problem:
        raise DataError(f"{path} is damaged: {problem}")
    return config, Saved(meta, arrays, _saved_runs(Path(out_dir), meta, arrays, config))


def _saved_runs(folder: Path, meta: dict, arrays: dict[str, np.ndarray],
                config: Config) -> list[RunResult]:
    """The journal's runs, the finished ones with their parameters read back, the one under
    way with the head's status, scores and best parameters."""
    index = meta["run_index"]
    runs, params = journal.read_journal(folder / JOURNAL, meta["journal_bytes"], index,
                                        meta["epoch"], config.train.epochs)
    for i, (run, saved) in enumerate(zip(runs[:-1], params[:-1])):
        if run.seed != config.train.seed + i:
            raise DataError(f"{folder / JOURNAL} is damaged: run {i} has seed {run.seed}, "
                            f"not {config.train.seed + i}")
        run.state = read_params(folder, params_name(i)) if saved else {}
    run, head = runs[-1], meta["run"]
    run.seed, run.status, run.message = meta["seed"], head["status"], head["message"]
    run.best_epoch, run.scores = head["best_epoch"], Scores(head["scores"])
    run.state = _prefixed(arrays, "best/")
    if bool(run.state) != bool(run.best_epoch):
        raise DataError(f"{folder / CHECKPOINT} is damaged: best epoch {run.best_epoch} "
                        f"with {'' if run.state else 'no '}best parameters")
    return runs


def check_same_config(config: Config, saved: Config, out_dir: str | Path) -> None:
    """A checkpoint continues only the config it was written for (same hash): a usage error
    naming the first key that differs."""
    if config_hash(config) == config_hash(saved):
        return
    mine, theirs = _flat(config.to_dict()), _flat(saved.to_dict())
    key = next((k for k in {**theirs, **mine} if mine.get(k) != theirs.get(k)), "config")
    raise ConfigError(f"the checkpoint in {out_dir} was written for another config ({key}: "
                      f"{_show(theirs, key)} there, {_show(mine, key)} here); resume with "
                      "the same config, or train afresh into another --out folder")


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (a generator's key, a figure) as JSON numbers and lists."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else str(value)


def _flat(config: dict) -> dict[str, Any]:
    """``section.key -> value``; a top-level setting (``task``) stands as itself."""
    flat: dict[str, Any] = {}
    for name, value in config.items():
        if isinstance(value, dict):
            flat.update({f"{name}.{k}": v for k, v in value.items()})
        else:
            flat[name] = value
    return flat


def _show(d: dict, key: str) -> str:
    return json.dumps(d.get(key))
