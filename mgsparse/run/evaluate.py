"""`mgsparse evaluate`: a finished run folder, reloaded and scored again through its task."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mgsparse.config import config_from_dict
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.run.checkpoint import METRICS, read_metrics, read_params
from mgsparse.run.kinds import make_task
from mgsparse.run.task import ACCURACY_METRICS, Progress, Scores, TaskMetrics


@dataclass(frozen=True)
class SavedRunScores:
    """One saved run scored again; `metrics` is its task's declaration (to show the scores)."""

    run: int
    seed: int
    scores: Scores
    metrics: TaskMetrics = field(default=ACCURACY_METRICS, compare=False)


def evaluate_saved(out_dir: str | Path, progress: Progress | None = None) -> list[SavedRunScores]:
    """Rebuild each saved run's model from metrics.json + its parameters and evaluate it."""
    metrics_path = Path(out_dir) / METRICS
    metrics = read_metrics(out_dir)
    try:
        config = config_from_dict(metrics["config"], source=str(metrics_path))
    except ConfigError as e:  # an edited file, not a usage error
        raise DataError(f"{metrics_path} is damaged: {e}") from None
    saved = [run for run in metrics["runs"] if run.get("params")]
    if not saved:
        raise DataError(f"{metrics_path} lists no saved parameters")
    task = make_task(config, progress)
    rows = []
    for run in saved:
        state = read_params(out_dir, run["params"])
        task.begin_run(run["run"])  # its own fold's splits
        try:
            model = task.restore(state)
        except MgsparseError as e:  # keys or shapes that are not this config's model
            raise DataError(f"{Path(out_dir) / run['params']} does not fit the model of "
                            f"{metrics_path}: {e}") from None
        rows.append(SavedRunScores(run["run"], run["seed"], task.evaluate(model), task.metrics))
    return rows
