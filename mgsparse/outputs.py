"""What a run leaves on disk: `metrics.json` and the best parameters, written atomically.

Each file is written to a temporary name in the same folder and renamed into place, so an
interrupted run never leaves a half-written file: the previous complete version stays.
"""

from __future__ import annotations

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
from mgsparse.train import TrainResult

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
    return {"config": result.config.to_dict(), "versions": versions(),
            "placement": result.placement, "summary": result.summary(), "runs": runs,
            "memory_report": result.memory_report}


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


def evaluate_saved(out_dir: str | Path, progress: Any = None) -> list[dict[str, float]]:
    """Rebuild each saved run's model from metrics.json + params and evaluate it again."""
    from mgsparse.config import POINT_CLOUD_DATASETS, config_from_dict

    metrics = read_metrics(out_dir)
    config = config_from_dict(metrics["config"], source=str(Path(out_dir) / METRICS))
    saved = [run for run in metrics["runs"] if run.get("params")]
    if not saved:
        raise DataError(f"{out_dir}: metrics.json lists no saved parameters")
    if config.dataset.name in POINT_CLOUD_DATASETS:
        evaluate_run = _point_evaluator(config)
    else:
        evaluate_run = _graph_evaluator(config, progress)
    return [{"run": run["run"], "seed": run["seed"],
             **evaluate_run(run["seed"], read_params(out_dir, run["params"]))} for run in saved]


def _graph_evaluator(config, progress):
    from mgsparse.problem import build_model, load_graph, prepare
    from mgsparse.train import evaluate

    problem = prepare(config, load_graph(config.dataset, progress))

    def evaluate_run(seed: int, state: dict) -> dict[str, float]:
        model = build_model(config.model, problem, np.random.default_rng(seed))
        model.load_state_dict(state)
        return evaluate(model, problem)

    return evaluate_run


def _point_evaluator(config):
    from mgsparse.train_points import evaluate_points, load_points, restore_point_model

    data = load_points(config.dataset)

    def evaluate_run(seed: int, state: dict) -> dict[str, float]:
        model, head = restore_point_model(config, state)
        return evaluate_points(model, head, data)

    return evaluate_run
