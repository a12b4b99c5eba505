"""What a run leaves on disk: `metrics.json`, `epochs.csv` and the best parameters.

Each file is written to a temporary name in the same folder and renamed into place, so an
interrupted run never leaves a half-written file: the previous complete version stays. Files
get the mode `open()` would give them (the umask decides), so a shared run folder stays
readable to the team. Reading a run folder back trusts nothing: a truncated, emptied or
edited file is named in one `DataError` line, never a traceback.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import platform
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import scipy

import mgsparse
from mgsparse.config import Config, config_from_dict
from mgsparse.data.atomic import atomic_write
from mgsparse.errors import ConfigError, DataError, InputFileError
from mgsparse.run.results import EpochStats, TrainResult
from mgsparse.run.task import ACCURACY_METRICS, TaskMetrics

METRICS = "metrics.json"
EPOCHS_CSV = "epochs.csv"


def epoch_columns(metrics: TaskMetrics, lr: bool = False) -> tuple[str, ...]:
    """epochs.csv's header: run, seed, epoch, loss, the task's score columns in declared
    order, grad_norm, the learning rate (`lr`: with a schedule), then the machine's figures
    (step_ms, epoch_ms, memory, batches)."""
    return ("run", "seed", "epoch", "loss", *metrics.names, "grad_norm", *("lr",) * lr,
            *(f.name for f in dataclasses.fields(EpochStats) if f.name != "epoch"))


EPOCH_COLUMNS = epoch_columns(ACCURACY_METRICS)  # classification's header


def _write(path: Path, write: Any, mode: str = "w") -> None:
    """`mgsparse.data.atomic.atomic_write`, its OSError named in one line."""
    try:
        atomic_write(path, write, mode)
    except OSError as e:
        raise DataError(f"cannot write {path}: {e.strerror or e}") from None


def versions() -> dict[str, str]:
    return {"mgsparse": mgsparse.__version__, "numpy": np.__version__,
            "scipy": scipy.__version__, "python": platform.python_version()}


def metrics_dict(result: TrainResult) -> dict[str, Any]:
    """The resolved config, per-epoch rows of every run, versions and the summary. Each run
    gives its best epoch's `per_run` scores (0.0 when it kept no parameters)."""
    runs = []
    for i, r in enumerate(result.runs):
        runs.append({
            "run": i, **({"fold": i} if result.config.train.folds else {}),
            "seed": r.seed, "status": r.status, "message": r.message,
            "best_epoch": r.best_epoch,
            **{c: r.scores.get(c, 0.0) for c in result.metrics.per_run},
            "params": f"params_run{i}.npz" if r.state else None,
            "epochs": [row.as_dict() for row in r.rows],
            "timing": [dataclasses.asdict(s) for s in r.stats],
            "alarms": r.alarms, "events": list(r.events),
        })
    report = result.memory_report
    return {"config": result.config.to_dict(), "versions": versions(),
            "placement": result.placement, "events": result.events,
            "summary": result.summary().as_dict(),
            "runs": runs, "memory_report": dataclasses.asdict(report) if report else None}


def epochs_csv(result: TrainResult, first_run: int = 0, header: bool = True) -> str:
    """One line per epoch of every run (from `first_run` on), the live table's figures, for
    tools that read CSV; `header`: the column names first."""
    buffer = io.StringIO()
    scheduled = result.config.optim.schedule != "none"
    writer = csv.DictWriter(buffer, fieldnames=epoch_columns(result.metrics, scheduled),
                            lineterminator="\n")
    if header:
        writer.writeheader()
    for i, r in enumerate(result.runs[first_run:], first_run):
        for row, stats in zip(r.rows, r.stats):
            writer.writerow({"run": i, "seed": r.seed, **row.as_dict(),
                             **{k: v for k, v in dataclasses.asdict(stats).items()
                                if k != "epoch"}})
    return buffer.getvalue()


def output_dir(out_dir: str | Path) -> Path:
    """The run folder, created if needed."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create output folder {out}: {e.strerror or e}") from None
    return out


def params_name(run: int) -> str:
    return f"params_run{run}.npz"


PARAMS_NAME = re.compile(r"params_run(\d+)\.npz")  # what `params_name` writes, by pattern


class RunFolder:
    """The run folder of one series, written after each run with only what changed: the
    parameters of runs not written yet (each run's once), their epoch rows appended to
    epochs.csv, and metrics.json whole (it is small beside the parameters). A series' first
    write replaces what an earlier series left in the folder: epochs.csv is written whole,
    and every ``params_run<i>.npz`` this series did not write is removed once the new
    metrics.json is in place, so the folder never lists runs it does not hold, nor holds
    files its metrics.json does not list. `fresh=False` continues a resumed series: the
    runs in `written` keep their parameters on disk."""

    def __init__(self, out_dir: str | Path, fresh: bool = True, written: Iterable[int] = ()):
        self.out, self.fresh = Path(out_dir), fresh
        self.params: set[int] = set(written)  # runs whose params_run<i>.npz is this series'
        self.csv_rows: list[int] | None = None  # epochs.csv's rows per run (None: not yet)

    def write_params(self, run: int, state: dict[str, np.ndarray]) -> None:
        """params_run<run>.npz, unless this series wrote it already (a run's best parameters
        do not change once it has ended)."""
        if run in self.params or not state:
            return
        _write(output_dir(self.out) / params_name(run), lambda f: np.savez(f, **state), "wb")
        self.params.add(run)

    def write(self, result: TrainResult) -> Path:
        """Bring the folder up to `result`: new runs' parameters, new epoch rows, metrics.json."""
        out = output_dir(self.out)
        for i, r in enumerate(result.runs):
            self.write_params(i, r.state)
        self._write_epochs(out, result)
        text = json.dumps(metrics_dict(result), indent=1, allow_nan=True)
        _write(out / METRICS, lambda f: f.write(text))
        if self.fresh:
            self._remove_stale(out)
            self.fresh = False
        return out / METRICS

    def _write_epochs(self, out: Path, result: TrainResult) -> None:
        """Append the rows of runs epochs.csv does not hold yet; anything else (the first
        write, a result that is not the one on disk plus runs) rewrites it whole."""
        counts, known = [len(r.rows) for r in result.runs], self.csv_rows
        path = out / EPOCHS_CSV
        if known is not None and counts[:len(known)] == known and path.is_file():
            text = epochs_csv(result, first_run=len(known), header=False)
            try:
                with open(path, "a", encoding="utf-8", newline="") as f:
                    f.write(text)
            except OSError as e:
                raise DataError(f"cannot write {path}: {e.strerror or e}") from None
        else:
            _write(path, lambda f: f.write(epochs_csv(result)))
        self.csv_rows = counts

    def _remove_stale(self, out: Path) -> None:
        for path in out.glob("params_run*.npz"):
            match = PARAMS_NAME.fullmatch(path.name)
            if match and int(match.group(1)) not in self.params:
                try:
                    path.unlink(missing_ok=True)
                except OSError as e:
                    raise DataError(f"cannot remove {path}, left by an earlier series: "
                                    f"{e.strerror or e}") from None


def write_outputs(out_dir: str | Path, result: TrainResult) -> Path:
    """Write params_run<i>.npz for every run with a best state, epochs.csv, metrics.json,
    replacing whatever an earlier series left there (`RunFolder`'s first write)."""
    return RunFolder(out_dir).write(result)


# ---------------------------------------------------------------- reading a run folder back


def read_metrics(out_dir: str | Path) -> dict[str, Any]:
    """metrics.json of a run folder, checked for the parts `evaluate` reads."""
    path = Path(out_dir) / METRICS
    if not path.is_file():
        # a folder that was never a run folder is a usage mistake (exit 2); a run folder
        # whose files are damaged stays a runtime failure (exit 1, below)
        raise InputFileError(f"{path} not found: {out_dir} is not a run folder; pass the "
                             "--out folder of a finished `mgsparse train`")
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path} is damaged: not valid JSON ({e}); train again with --out") from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    problem = _metrics_problem(metrics)
    if problem:
        raise DataError(f"{path} is damaged: {problem}; train again with --out")
    return metrics


def _metrics_problem(metrics: Any) -> str | None:
    if not isinstance(metrics, dict):
        return "the top level is not a mapping"
    if not isinstance(metrics.get("config"), dict):
        return "no 'config' mapping"
    runs = metrics.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        return "no 'runs' list"
    for r in runs:
        if not (isinstance(r.get("run"), int) and isinstance(r.get("seed"), int)):
            return "a run without an integer 'run' and 'seed'"
        params = r.get("params")
        if params is not None and (not isinstance(params, str) or Path(params).name != params):
            return f"run {r['run']} names parameters {params!r} outside the run folder"
    return None


def read_params(out_dir: str | Path, filename: str) -> dict[str, np.ndarray]:
    """A run's saved parameters; a missing, truncated or foreign file is named, not raised."""
    path = Path(out_dir) / filename
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise DataError(f"{path} not found: the run folder is incomplete") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError) as e:
        raise DataError(f"{path} is damaged ({type(e).__name__}: {e}); train again "
                        "with --out") from None


def saved_runs(out_dir: str | Path) -> tuple[Config, list[dict]]:
    """The config a run folder was trained with and metrics.json's entries of the runs that
    kept parameters (what `evaluate` and `predict` restore). A folder that does not read back
    whole is a damaged one (exit 1)."""
    path = Path(out_dir) / METRICS
    metrics = read_metrics(out_dir)
    try:
        config = config_from_dict(metrics["config"], source=str(path))
    except ConfigError as e:  # an edited file, not a usage error
        raise DataError(f"{path} is damaged: {e}") from None
    saved = [run for run in metrics["runs"] if run.get("params")]
    if not saved:
        raise DataError(f"{path} lists no saved parameters")
    return config, saved
