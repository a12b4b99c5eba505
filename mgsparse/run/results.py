"""What a series of runs records: each epoch's figures, each run's result, the summary.

`EpochRow` holds what depends only on config and seed (bitwise reproducible), `EpochStats`
what depends on the machine (time, memory). The scores are whatever the task declares
(`mgsparse.run.task.TaskMetrics`); classification's are read as before (`row.val_acc`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from mgsparse.catalog import paper_accuracy
from mgsparse.config import Config
from mgsparse.run.monitor import MemoryReport
from mgsparse.run.task import ACCURACY_METRICS, Scores, TaskMetrics


@dataclass
class EpochRow:
    """The figures of one epoch that depend only on config and seed (bitwise reproducible):
    the training loss, the task's declared scores (also read as attributes: ``row.val_acc``)
    and the largest pre-clip gradient norm."""

    epoch: int
    loss: float
    scores: Scores
    grad_norm: float
    lr: float | None = None  # the epoch's learning rate, recorded when a schedule moves it

    def as_dict(self) -> dict[str, float]:
        """epoch, loss, every score column in declared order, grad_norm (and lr with a
        schedule): an epochs.csv line."""
        lr = {} if self.lr is None else {"lr": self.lr}
        return {"epoch": self.epoch, "loss": self.loss, **self.scores,
                "grad_norm": self.grad_norm, **lr}

    def __getattr__(self, column: str) -> float:
        if column.startswith("_") or column == "scores":
            raise AttributeError(column)
        return getattr(self.scores, column)


@dataclass
class EpochStats:
    """The figures of one epoch that depend on the machine: time and memory. Memory is
    measured on sampled epochs only (None otherwise): `mem_held_mb` is what the run holds
    between steps (operands and their views, parameters, gradients, optimizer state),
    `mem_peak_mb` that plus the epoch's traced peak."""

    epoch: int
    step_ms: float
    epoch_ms: float
    mem_held_mb: float | None
    mem_peak_mb: float | None
    batches: int = 1  # steps in the epoch; sampled runs: and their blocks' mean size
    block_nnz: float | None = None
    sampled_nodes: float | None = None


@dataclass
class RunResult:
    seed: int
    rows: list[EpochRow] = field(default_factory=list)
    stats: list[EpochStats] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)  # e.g. memory fallbacks: epoch, what, MB
    status: str = "completed"  # completed | early_stopped | interrupted | aborted | diverged
    #                            | over_budget
    message: str = ""
    best_epoch: int = 0
    scores: Scores = field(default_factory=Scores)  # the best parameters' (empty: none kept)
    state: dict[str, np.ndarray] = field(default_factory=dict)

    def __getattr__(self, column: str) -> float:
        """A score of the best parameters as an attribute (``run.test_acc``)."""
        if column.startswith("_") or column == "scores":
            raise AttributeError(column)
        if column not in self.scores:
            kept = "" if self.scores else " (the run kept no parameters)"
            raise AttributeError(f"no score {column!r}{kept}")
        return self.scores[column]


@dataclass(frozen=True)
class Summary:
    """A series of runs in a few numbers: the declared scores over seeds (`scores`: the
    `TaskMetrics.summary` keys, e.g. test_acc_mean, test_acc_std; also attributes), time,
    memory, status."""

    runs: int
    scores: dict[str, float]
    best_epochs: list[int]
    epoch_time_ms_median: float
    total_time_s: float
    peak_memory_mb: float
    paper_test_acc: float | None
    status: str  # ok | interrupted | diverged | over_budget | incomplete (a series under way)
    folds: dict[str, list[float]] = field(default_factory=dict)  # k-fold: column -> per fold

    def as_dict(self) -> dict:
        """metrics.json's summary: runs, the score keys in declared order, then the rest."""
        d = dataclasses.asdict(self)
        scores = d.pop("scores")
        if not d["folds"]:
            d.pop("folds")
        return {"runs": d.pop("runs"), **scores, **d}

    def __getattr__(self, key: str) -> float:
        if key.startswith("_") or key == "scores":
            raise AttributeError(key)
        try:
            return self.scores[key]
        except KeyError:
            raise AttributeError(f"no summary figure {key!r}") from None


@dataclass
class TrainResult:
    config: Config
    placement: dict[str, str]
    runs: list[RunResult] = field(default_factory=list)
    peak_memory_mb: float = 0.0
    memory_report: MemoryReport | None = None
    events: list[dict] = field(default_factory=list)  # placement before training (epoch 0)
    metrics: TaskMetrics = ACCURACY_METRICS  # the task's declaration: what the runs scored
    planned: int = 0  # the runs the series asked for (`fit` sets it; 0: not known)
    stopped: bool = False  # ended by a signal outside a run's epochs (between runs, say)

    @property
    def failed(self) -> bool:
        return any(r.status in ("diverged", "over_budget") for r in self.runs)

    @property
    def interrupted(self) -> bool:
        return self.stopped or any(r.status in ("interrupted", "aborted") for r in self.runs)

    def summary(self) -> Summary:
        done = [r for r in self.runs if r.rows]
        times = [s.epoch_ms for r in done for s in r.stats]
        failure = next((r.status for r in self.runs if r.status in ("diverged", "over_budget")),
                       None)
        # a folder written between runs says the series is not over: a process killed then
        # leaves "incomplete", never "ok"
        status = failure or ("interrupted" if self.interrupted else
                             "incomplete" if len(self.runs) < self.planned else "ok")
        paper = ("test_acc" in self.metrics.names
                 and paper_accuracy(self.config.model.kind, self.config.dataset.name)) or None
        return Summary(
            runs=len(done), scores=summary_scores(self.metrics, done),
            best_epochs=[int(r.best_epoch) for r in done],
            epoch_time_ms_median=float(np.median(times)) if times else 0.0,
            total_time_s=float(sum(times)) / 1e3, peak_memory_mb=float(self.peak_memory_mb),
            paper_test_acc=paper, status=status, folds=self._folds(done))

    def _folds(self, done: list[RunResult]) -> dict[str, list[float]]:
        """A k-fold run's summarised columns, fold by fold (run i is fold i)."""
        if not getattr(self.config.train, "folds", None):
            return {}
        return {c: [r.scores.get(c, 0.0) for r in done] for c in self.metrics.summary_columns}


def summary_scores(metrics: TaskMetrics, runs: list[RunResult]) -> dict[str, float]:
    """Each declared summary key, ``<column>_mean`` or ``_std`` over `runs`' best scores
    (population std; a run that kept no parameters counts 0.0, as it always has)."""
    reduce = {"mean": np.mean, "std": np.std}
    out = {}
    for key in metrics.summary:
        column, _, how = key.rpartition("_")
        values = np.array([r.scores.get(column, 0.0) for r in runs]) if runs else np.zeros(1)
        out[key] = float(reduce[how](values))
    return out
