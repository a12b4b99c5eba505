"""`mgsparse evaluate`: a finished run folder, reloaded and scored again through its task."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mgsparse.errors import DataError, MgsparseError
from mgsparse.run.checkpoint import METRICS, read_params, saved_runs
from mgsparse.run.kinds import make_task
from mgsparse.run.task import ACCURACY_METRICS, Progress, Scores, TaskMetrics


@dataclass(frozen=True)
class SavedRunScores:
    """One saved run scored again; `metrics` is its task's declaration (to show the scores);
    `fold`: the fold it is in a k-fold series (run i is fold i), None otherwise."""

    run: int
    seed: int
    scores: Scores
    metrics: TaskMetrics = field(default=ACCURACY_METRICS, compare=False)
    fold: int | None = None


def evaluate_saved(out_dir: str | Path, progress: Progress | None = None) -> list[SavedRunScores]:
    """Rebuild each saved run's model from metrics.json + its parameters and evaluate it."""
    config, saved = saved_runs(out_dir)
    task = make_task(config, progress)
    rows = []
    for run in saved:
        state = read_params(out_dir, run["params"])
        task.begin_run(run["run"])  # its own fold's splits
        try:
            model = task.restore(state)
        except MgsparseError as e:  # keys or shapes that are not this config's model
            raise DataError(f"{Path(out_dir) / run['params']} does not fit the model of "
                            f"{Path(out_dir) / METRICS}: {e}") from None
        fold = run["run"] if config.train.folds else None
        rows.append(SavedRunScores(run["run"], run["seed"], task.evaluate(model), task.metrics,
                                   fold))
    return rows
