"""Full checkpoints: everything a series of runs needs to go on as if it had never stopped.

`mgsparse train CONFIG --out DIR` keeps, beside the best parameters, one file
``DIR/checkpoint.npz`` written every `train.checkpoint_every` epochs and when a run is stopped
(Ctrl-C, SIGTERM); `mgsparse train --resume DIR` continues from it. Resuming is *bitwise*:
the next epoch reads exactly the numbers it would have read, because the checkpoint holds
every input of an epoch that is not the config or the data:

- the model's parameters and buffers (BatchNorm's running statistics), every random
  generator a module holds (dropout's, attention dropout's) and the counters its next
  forward reads (`dropout_step`, `dropout_key` of keyed masks);
- the optimizer's state (Adam's moments and step, each group's options, the learning rate
  included) and the learning-rate schedule's state;
- the run's shuffle generator (batch order, neighbour samples);
- what the run recorded so far: epoch rows, timings, alarms, the best epoch and its
  parameters (patience counts from it), and every run of the series finished before it.

The file is one ``.npz``: arrays under ``<part>/<name>`` and one JSON text (``meta``) for
the rest, with the config and its SHA-256 (`config_hash`): a checkpoint is refused for any
other config. It is written atomically (`mgsparse.data.atomic`): a crash mid-write leaves
the previous checkpoint whole. When a series ends (not stopped), the checkpoint is removed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.config import Config, config_from_dict
from mgsparse.data.atomic import atomic_write
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.nn.module import Module
from mgsparse.run.checkpoint import output_dir
from mgsparse.run.loop import RunState
from mgsparse.run.results import EpochRow, EpochStats, RunResult
from mgsparse.run.task import Scores

CHECKPOINT = "checkpoint.npz"
FORMAT = 1
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


# ---------------------------------------------------------------- a run to and from the file


def _run_meta(run: RunResult) -> dict[str, Any]:
    return {"seed": run.seed, "status": run.status, "message": run.message,
            "best_epoch": run.best_epoch, "scores": dict(run.scores),
            "rows": [{"epoch": r.epoch, "loss": r.loss, "scores": dict(r.scores),
                      "grad_norm": r.grad_norm, "lr": r.lr} for r in run.rows],
            "stats": [dataclasses.asdict(s) for s in run.stats],
            "alarms": list(run.alarms), "events": list(run.events)}


def _run_from(meta: dict[str, Any], state: dict[str, np.ndarray]) -> RunResult:
    rows = [EpochRow(r["epoch"], r["loss"], Scores(r["scores"]), r["grad_norm"], r["lr"])
            for r in meta["rows"]]
    return RunResult(seed=meta["seed"], rows=rows,
                     stats=[EpochStats(**s) for s in meta["stats"]],
                     alarms=list(meta["alarms"]), events=list(meta["events"]),
                     status=meta["status"], message=meta["message"],
                     best_epoch=meta["best_epoch"], scores=Scores(meta["scores"]), state=state)


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



class FullCheckpoints:
    """The full checkpoints of one run folder, for `mgsparse.run.loop.fit`: `save` writes one
    (an error is kept in `error`, not raised, so training goes on), `restore` loads a resumed
    run's saved state into the run the loop just built, `discard` removes the file once the
    series is over."""

    def __init__(self, out_dir: str | Path, config: Config,
                 saved: tuple[dict, dict[str, np.ndarray]] | None = None):
        self.path, self.config = Path(out_dir) / CHECKPOINT, config.to_dict()
        self.hash = config_hash(config)
        self.error: MgsparseError | None = None
        self._saved = saved
        self.runs_done: list[RunResult] = []
        if saved is not None:
            meta, arrays = saved
            self.runs_done = [_run_from(m, _prefixed(arrays, f"runs/{i}/best/"))
                              for i, m in enumerate(meta["runs_done"])]

    @property
    def epoch(self) -> int:
        """Epochs the saved run had done (0: nothing saved)."""
        return self._saved[0]["epoch"] if self._saved else 0

    def save(self, state: RunState, runs_done: list[RunResult]) -> None:
        optim_meta, arrays = _optimizer_parts(state.optimizer)
        schedule = state.schedule.state_dict() if state.schedule is not None else None
        meta = {"format": FORMAT, "config": self.config, "config_hash": self.hash,
                "run_index": state.run_index,
                "seed": state.run.seed, "epoch": state.epoch,
                "run": _run_meta(state.run), "runs_done": [_run_meta(r) for r in runs_done],
                "optimizer": optim_meta, "schedule": schedule,
                "generators": generators(state.model),
                "shuffle": state.shuffle.bit_generator.state}
        arrays.update({f"model/{k}": v for k, v in state.model.state_dict().items()})
        arrays.update({f"best/{k}": v for k, v in state.run.state.items()})
        for i, r in enumerate(runs_done):
            arrays.update({f"runs/{i}/best/{k}": v for k, v in r.state.items()})
        text = np.array(json.dumps(meta, allow_nan=True, default=_plain))
        try:
            output_dir(self.path.parent)
            atomic_write(self.path, lambda f: np.savez(f, meta=text, **arrays), "wb")
        except DataError as e:
            self.error = e
        except OSError as e:
            self.error = DataError(f"cannot write {self.path}: {e.strerror or e}")

    def restore(self, state: RunState) -> None:
        """Load the saved run into `state` if `state` is that run (once)."""
        if self._saved is None or state.run_index != self._saved[0]["run_index"]:
            return
        meta, arrays = self._saved
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
        state.run = _run_from(meta["run"], _prefixed(arrays, "best/"))
        state.epoch = meta["epoch"]

    def discard(self) -> None:
        """Remove the checkpoint: the series it belonged to is over."""
        self.path.unlink(missing_ok=True)


def read_checkpoint(out_dir: str | Path) -> tuple[Config, tuple[dict, dict[str, np.ndarray]]]:
    """The config and saved state of `out_dir`'s full checkpoint. No checkpoint is a usage
    error (exit 2); a file that does not read back whole is a damaged one (exit 1)."""
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
        config = config_from_dict(meta["config"], source=str(path))
        problem = _meta_problem(meta, config)
    except (OSError, ValueError, EOFError, KeyError, TypeError, zipfile.BadZipFile,
            MgsparseError) as e:
        raise DataError(f"{path} is damaged ({type(e).__name__}: {e})") from None
    if problem:
        raise DataError(f"{path} is damaged: {problem}")
    return config, (meta, arrays)


def _meta_problem(meta: dict, config: Config) -> str | None:
    if meta.get("format") != FORMAT:
        return f"format {meta.get('format')!r}, not {FORMAT}"
    if meta.get("config_hash") != config_hash(config):
        return "its config does not match the hash recorded with it"
    missing = [k for k in ("run_index", "epoch", "run", "runs_done", "optimizer", "generators",
                           "shuffle") if k not in meta]
    return f"no {missing[0]!r}" if missing else None


def check_same_config(config: Config, saved: Config, out_dir: str | Path) -> None:
    """A checkpoint continues only the config it was written for (same hash): a usage error
    naming the first key that differs."""
    if config_hash(config) == config_hash(saved):
        return
    mine, theirs = config.to_dict(), saved.to_dict()
    key = next(f"{s}.{k}" for s in mine for k in mine[s] if mine[s][k] != theirs[s].get(k))
    raise ConfigError(f"the checkpoint in {out_dir} was written for another config ({key}: "
                      f"{_show(theirs, key)} there, {_show(mine, key)} here); resume with "
                      "the same config, or train afresh into another --out folder")


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (a generator's key, a figure) as JSON numbers and lists."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else str(value)


def _show(d: dict, key: str) -> str:
    section, _, name = key.partition(".")
    return json.dumps(d[section].get(name))
