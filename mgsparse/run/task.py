"""What one kind of run is: a `Task` gives the loop its model, each epoch's steps and its scores.

The loop (`mgsparse.run.loop`) knows nothing of graphs or point clouds. It asks a task for

- ``build_model(rng)``: a fresh model for one run (its outputs sized to the task's classes);
- ``batches(model, shuffle)``: one epoch of training steps, each a `Batch`: a call that runs
  the forward and returns the loss to differentiate and how many targets it averages over
  (one batch per epoch for full-batch graph training, one per mini-batch otherwise; a
  `Steps` when their number is known first, so each step's progress reads "k of n");
- ``evaluate(model)``: the scores its ``metrics`` declare (`Scores`: column -> value);
- ``restore(state)``: the model of a finished run, from its saved parameters;
- ``placed``: the data it holds (`mgsparse.run.placed.PlacedGraph`), whose operands, placement
  and densities the run reports and whose dense -> sparse switch the memory budget pulls.

A task declares what it scores in ``metrics`` (a `TaskMetrics` of `Metric` columns named
``<split>_<metric>``: val_loss, test_acc, val_auc, ...) and which column picks the best
epoch. The loop, ``epochs.csv``, ``metrics.json``, the live table, the summary and the plots
render whatever it declares, so a task with other scores touches no file but its own. The
default, `ACCURACY_METRICS`, is classification's: validation loss picks the best epoch,
accuracy on each split is the result.

`mgsparse.run.kinds.make_task(config)` is the one place that decides which kind of run a
config asks for. A new kind of run is a new Task in `mgsparse.run.tasks`, never a new loop.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.nn.module import Module
from mgsparse.run.replay import Replay

Batch = Callable[[], tuple[Tensor, int]]  # -> (loss, number of targets it averages over)
Progress = Callable[..., Any]  # bytes and phases of building the data (`mgsparse.data.progress`)


class Steps:
    """An epoch's batches whose number is known before the first runs (a sampled epoch's
    plan), so the loop can report each step as "k of n" (`loop.train_epoch`'s `on_step`);
    a task whose epoch is a plain iterator reports its steps with no total."""

    def __init__(self, batches: Iterable[Batch], count: int):
        self.batches, self.count = batches, count

    def __iter__(self) -> Iterator[Batch]:
        return iter(self.batches)

    def __len__(self) -> int:
        return self.count


SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Metric:
    """One score an evaluation pass computes, one column of epochs.csv.

    `column` is ``<split>_<metric>`` (split: train, val or test), e.g. ``val_loss``,
    ``test_auc``; `higher_is_better` says which way is better when it selects the best epoch.
    `percent` prints it as a percentage (accuracy) rather than with 4 decimals (a loss, AUC);
    `short` heads its live-table column and `label` names it in the summary and the plots
    (defaults: the column, and the column with spaces, which also heads evaluate's table).
    """

    column: str
    higher_is_better: bool
    percent: bool = False
    short: str = ""
    label: str = ""

    def __post_init__(self) -> None:
        split, _, name = self.column.partition("_")
        if split not in SPLITS or not name.isidentifier():
            raise ValueError(f"metric column {self.column!r} is not <split>_<metric> with "
                             f"split one of {', '.join(SPLITS)}")
        object.__setattr__(self, "short", self.short or self.column)
        object.__setattr__(self, "label", self.label or self.column.replace("_", " "))

    @property
    def split(self) -> str:
        return self.column.partition("_")[0]

    @property
    def name(self) -> str:
        return self.column.partition("_")[2]

    def format(self, value: float, digits: int = 2) -> str:
        """`value` as the tables print it: a percentage with `digits` decimals, or 4 decimals."""
        return f"{value:.{digits}%}" if self.percent else f"{value:.4f}"


class Scores(Mapping):
    """What one evaluation pass measured: column -> value, in the task's declared order.
    Columns read as attributes too (``scores.val_acc``); build one with `TaskMetrics.scores`,
    which checks the columns against the declaration."""

    def __init__(self, values: Mapping[str, float] | None = None) -> None:
        self._values = {k: float(v) for k, v in (values or {}).items()}

    def __getitem__(self, column: str) -> float:
        return self._values[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, column: str) -> float:
        if column.startswith("_") or column not in self.__dict__.get("_values", {}):
            raise AttributeError(f"no score {column!r}")
        return self._values[column]

    def __repr__(self) -> str:
        return f"Scores({self._values!r})"


@dataclass(frozen=True)
class TaskMetrics:
    """What a task scores and how its runs are judged and shown.

    - `columns`: every score `Task.evaluate` returns, in the order of epochs.csv;
    - `select`: the column whose best value (its metric's direction) picks the best epoch,
      whose parameters are kept; early stopping's patience counts epochs without a better one;
    - `summary`: metrics.json's summary keys over the runs, each ``<column>_mean`` or
      ``<column>_std`` (default: mean and std of each test column, then each val column);
    - `per_run`: the best epoch's columns metrics.json gives each run (default: all);
    - `live`: the live table's score columns, in order (default: those not on the test split);
    - `legend`: what the live caption says of them (default: "short: label" for each);
    - `tie_break`: a column that decides between epochs equal on `select` (a validation
      accuracy of a few dozen graphs ties often; the lower validation loss then wins).
    """

    columns: tuple[Metric, ...]
    select: str
    summary: tuple[str, ...] = ()
    per_run: tuple[str, ...] = ()
    live: tuple[str, ...] = ()
    legend: str = ""
    tie_break: str = ""
    _by_name: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = tuple(m.column for m in self.columns)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"metric columns must be distinct and not empty: {names}")
        self._by_name.update((m.column, m) for m in self.columns)
        split_first = [m.column for s in ("test", "val") for m in self.columns if m.split == s]
        defaults = {"summary": tuple(f"{c}_{k}" for c in split_first for k in ("mean", "std")),
                    "per_run": names,
                    "live": tuple(m.column for m in self.columns if m.split != "test")}
        for key, value in defaults.items():
            object.__setattr__(self, key, getattr(self, key) or value)
        unknown = [c for c in (self.select, *self.per_run, *self.live, *self.summary_columns,
                               *filter(None, [self.tie_break])) if c not in self._by_name]
        if unknown or not all(k.endswith(("_mean", "_std")) for k in self.summary):
            raise ValueError(f"metric declaration names {unknown or self.summary} outside its "
                             f"columns {names} (summary keys end in _mean or _std)")
        object.__setattr__(self, "legend", self.legend or " · ".join(
            f"{m.short}: {m.label}" for m in map(self.metric, self.live) if m.short != m.column))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    @property
    def summary_columns(self) -> tuple[str, ...]:
        """The columns the summary keys are about, in the order they first appear."""
        return tuple(dict.fromkeys(k.rpartition("_")[0] for k in self.summary))

    def metric(self, column: str) -> Metric:
        return self._by_name[column]

    def scores(self, **values: float) -> Scores:
        """An evaluation's `Scores`, exactly the declared columns, in their order."""
        if set(values) != set(self.names):
            raise ValueError(f"scores {sorted(values)} are not the declared columns "
                             f"{list(self.names)}")
        return Scores({c: values[c] for c in self.names})

    def better(self, value: float, best: float | None) -> bool:
        """Whether `value` of the selection column beats `best` (None: nothing yet). A NaN
        or infinite value never does."""
        if not math.isfinite(value):
            return False
        if best is None:
            return True
        return value > best if self.metric(self.select).higher_is_better else value < best

    def beats(self, scores: Mapping[str, float], best: Mapping[str, float] | None,
              min_delta: float = 0.0) -> bool:
        """Whether an epoch's `scores` beat the best epoch's: on `select` by more than
        `min_delta`, and on `tie_break` when the two are equal there (min_delta 0)."""
        if best is None:
            return self.better(scores[self.select], None)
        target = best[self.select]
        if min_delta:
            target += min_delta if self.metric(self.select).higher_is_better else -min_delta
        if not self.tie_break or min_delta or scores[self.select] != target:
            return self.better(scores[self.select], target)
        tie = self.metric(self.tie_break)
        value, other = scores[tie.column], best[tie.column]
        return math.isfinite(value) and (value > other if tie.higher_is_better else value < other)


def selecting(metrics: TaskMetrics, select: str | None) -> TaskMetrics:
    """`metrics` with the validation column `select` picking the best epoch (`train.select`):
    a metric's name (loss, acc, auc: its ``val_`` column) or a column; None keeps the task's."""
    if select is None:
        return metrics
    column = select if select in metrics.names else f"val_{select}"
    if column not in metrics.names or metrics.metric(column).split != "val":
        names = [m.name for m in metrics.columns if m.split == "val"]
        raise ConfigError(f"train.select {select!r} is not a validation metric of this run; "
                          f"choose one of {', '.join(names)} (train.metrics adds f1 and auc "
                          "to node classification)")
    return dataclasses.replace(metrics, select=column)


ACCURACY_METRICS = TaskMetrics(
    columns=(Metric("val_loss", False, short="v.loss", label="val loss"),
             Metric("train_acc", True, percent=True, short="train", label="train accuracy"),
             Metric("val_acc", True, percent=True, short="val", label="val accuracy"),
             Metric("test_acc", True, percent=True, short="test", label="test accuracy")),
    select="val_loss",
    summary=("test_acc_mean", "test_acc_std", "val_acc_mean"),
    per_run=("train_acc", "val_acc", "test_acc"),
    live=("train_acc", "val_acc", "val_loss"),
    legend="train/val: accuracy · v.loss: validation loss")


class Task(ABC):
    """One kind of run on one dataset, loaded and placed once for all its runs."""

    config: Config
    placed: Any  # the data as the run holds it: a `mgsparse.run.placed.PlacedGraph`
    budget: int | None = None  # bytes, computed once per run by `make_task`
    estimate_bytes: int = 0  # a training step's estimated peak, set by the budget placement
    budget_events: tuple = ()  # what the placement changed to fit the budget (BudgetEvents)
    metrics: TaskMetrics = ACCURACY_METRICS  # what `evaluate` returns; which column selects

    @abstractmethod
    def build_model(self, rng: np.random.Generator) -> Module:
        """A fresh model for one run, initialised from `rng`."""

    @abstractmethod
    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        """One epoch of training steps; `shuffle` is the run's own generator for orderings."""

    @abstractmethod
    def evaluate(self, model: Module) -> Scores:
        """Scores of `model` on the task's splits, without building a graph: exactly the
        columns of `metrics`, built with ``self.metrics.scores(column=value, ...)``."""

    @property
    def placement(self) -> dict[str, str]:
        """Operand -> how it is stored and why (the placed data's)."""
        return self.placed.placement

    @property
    def densities(self) -> dict[str, float]:
        """Operand -> stored entries / (rows·cols), 1.0 when dense."""
        return self.placed.densities

    def operands(self) -> dict[str, Any]:
        """The data every step reads, by name (features, adjacency): what the run holds."""
        return self.placed.operands()

    def replay(self, model: Module, training: bool) -> Replay | None:
        """The `Replay` of `model`'s training step (`training`) or of its scores, where the
        task runs the same ops every epoch; None (the default): both stay eager."""
        return None

    # A task may collect across processes (a partitioned run) or bound its own memory: the
    # loop asks these two, whose defaults are a single process under the config's budget.
    reduce_gradients: Callable[[list, float], float] | None = None

    def epoch_figures(self) -> dict[str, float]:
        """What the last epoch's batches were like (sampled runs: batches, mean block nnz and
        sampled nodes), for the live table and epochs.csv; nothing for other tasks."""
        return {}

    def memory_budget(self) -> int | None:
        """Bytes the 80% rule of `mgsparse.run.budget` holds each traced epoch to: the budget
        the operands were placed under (`make_task` computes it once; None: no limit)."""
        return self.budget

    def num_runs(self) -> int:
        """How many runs the loop trains: `train.runs` (seeds seed, seed+1, ...), or a
        task's own count (graph classification: one per fold)."""
        return self.config.train.runs

    def begin_run(self, index: int) -> None:
        """Run `index` is about to start (or its saved model to be scored again): a task
        whose runs differ in their data (a fold) switches to that run's here."""

    def restore(self, state: dict[str, np.ndarray]) -> Module:
        """The model of a finished run, from its saved parameters, in eval mode."""
        model = self.build_model(np.random.default_rng(0))
        model.load_state_dict(state)
        return model.eval()

    def first_loss(self, model: Module, seed: int) -> Tensor:
        """The loss of a run's first training step, graph kept (to draw it or trace it)."""
        model.train()
        batch = next(iter(self.batches(model, shuffle_generator(seed))))
        return batch()[0]


def shuffle_generator(seed: int) -> np.random.Generator:
    """A run's orderings come from their own stream, so shuffling never shifts the init."""
    return np.random.default_rng([seed, 1])
