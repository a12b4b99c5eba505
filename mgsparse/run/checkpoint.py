"""What a run leaves on disk: `metrics.json` and the best parameters, written atomically.

Each file is written to a temporary name in the same folder and renamed into place, so an
interrupted run never leaves a half-written file: the previous complete version stays.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy

import mgsparse
from mgsparse.errors import DataError
from mgsparse.run.loop import TrainResult

METRICS = "metrics.json"


def _atomic_write(path: Path, write: Any, mode: str = "w") -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def versions() -> dict[str, str]:
    return {"mgsparse": mgsparse.__version__, "numpy": np.__version__,
            "scipy": scipy.__version__, "python": platform.python_version()}


def metrics_dict(result: TrainResult) -> dict[str, Any]:
    """The resolved config, per-epoch rows of every run, versions and the summary."""
    runs = []
    for i, r in enumerate(result.runs):
        runs.append({
            "run": i, "seed": r.seed, "status": r.status, "message": r.message,
            "best_epoch": r.best_epoch, "train_acc": r.train_acc, "val_acc": r.val_acc,
            "test_acc": r.test_acc, "params": f"params_run{i}.npz" if r.state else None,
            "epochs": [row.__dict__ for row in r.rows],
            "timing": [s.__dict__ for s in r.stats],
            "alarms": r.alarms,
        })
    report = result.memory_report
    return {"config": result.config.to_dict(), "versions": versions(),
            "placement": result.placement, "summary": dataclasses.asdict(result.summary()),
            "runs": runs, "memory_report": dataclasses.asdict(report) if report else None}


def output_dir(out_dir: str | Path) -> Path:
    """The run folder, created if needed; called before training so a bad path fails first."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create output folder {out}: {e.strerror}") from None
    return out


def write_outputs(out_dir: str | Path, result: TrainResult) -> Path:
    """Write metrics.json and params_run<i>.npz for every run that has a best state."""
    out = output_dir(out_dir)
    for i, r in enumerate(result.runs):
        if r.state:
            _atomic_write(out / f"params_run{i}.npz", lambda f: np.savez(f, **r.state), "wb")
    text = json.dumps(metrics_dict(result), indent=1, allow_nan=True)
    _atomic_write(out / METRICS, lambda f: f.write(text))
    return out / METRICS


def read_metrics(out_dir: str | Path) -> dict[str, Any]:
    path = Path(out_dir) / METRICS
    if not path.is_file():
        raise DataError(f"{path} not found: pass the --out folder of a finished `mgsparse train`")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path} is not valid JSON ({e})") from None


def read_params(out_dir: str | Path, filename: str) -> dict[str, np.ndarray]:
    path = Path(out_dir) / filename
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read parameters {path}: {e}") from None
