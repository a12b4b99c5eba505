"""`mgsparse evaluate`: a finished run folder, reloaded and scored again through its task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mgsparse.config import config_from_dict
from mgsparse.errors import DataError
from mgsparse.run.checkpoint import METRICS, read_metrics, read_params
from mgsparse.run.task import Progress, Scores, make_task


@dataclass(frozen=True)
class SavedRunScores:
    run: int
    seed: int
    scores: Scores


def evaluate_saved(out_dir: str | Path, progress: Progress | None = None) -> list[SavedRunScores]:
    """Rebuild each saved run's model from metrics.json + its parameters and evaluate it."""
    metrics = read_metrics(out_dir)
    config = config_from_dict(metrics["config"], source=str(Path(out_dir) / METRICS))
    saved = [run for run in metrics["runs"] if run.get("params")]
    if not saved:
        raise DataError(f"{out_dir}: metrics.json lists no saved parameters")
    task = make_task(config, progress)
    return [SavedRunScores(run["run"], run["seed"],
                           task.evaluate(task.restore(read_params(out_dir, run["params"]))))
            for run in saved]
