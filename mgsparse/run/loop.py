"""The one training loop: any `Task`, epochs of steps, early stopping, runs over seeds.

Each step of an epoch: the task's forward and loss, backward, gradient clipping, optimizer
step. Then an evaluation pass in `no_grad`. The task's `metrics` declare its scores and the
column that selects: early stopping watches that column and keeps the parameters of its best
epoch (the lowest validation loss for classification), reloaded at the end of the run. Progress goes out
through `on_epoch`; a `should_stop()` callback ends a run cleanly after the current epoch
(the CLI wires it to Ctrl-C and SIGTERM). Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from mgsparse.catalog import paper_accuracy
from mgsparse.config import Config
from mgsparse.engine import Tensor
from mgsparse.nn.module import Module
from mgsparse.optim import Optimizer, clip_grad_norm_, make_schedule, step_schedule
from mgsparse.optim.schedules import Schedule
from mgsparse.run.budget import check_epoch
from mgsparse.run.build import build_optimizer
from mgsparse.run.monitor import EpochMemory, MemoryReport, finite, run_nbytes, trace_step
from mgsparse.run.task import ACCURACY_METRICS, Batch, Scores, Task, TaskMetrics, shuffle_generator

GRAD_ALARM_FACTOR = 10.0  # a pre-clip norm this many times the clip norm is worth a warning


@dataclass
class EpochRow:
    """The figures of one epoch that depend only on config and seed (bitwise reproducible):
    the training loss, the task's declared scores (also read as attributes: ``row.val_acc``)
    and the largest pre-clip gradient norm."""

    epoch: int
    loss: float
    scores: Scores
    grad_norm: float

    def as_dict(self) -> dict[str, float]:
        """epoch, loss, every score column in declared order, grad_norm: an epochs.csv line."""
        return {"epoch": self.epoch, "loss": self.loss, **self.scores, "grad_norm": self.grad_norm}

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
    status: str  # ok | interrupted | diverged | over_budget

    def as_dict(self) -> dict:
        """metrics.json's summary: runs, the score keys in declared order, then the rest."""
        d = dataclasses.asdict(self)
        scores = d.pop("scores")
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

    @property
    def failed(self) -> bool:
        return any(r.status in ("diverged", "over_budget") for r in self.runs)

    @property
    def interrupted(self) -> bool:
        return any(r.status in ("interrupted", "aborted") for r in self.runs)

    def summary(self) -> Summary:
        done = [r for r in self.runs if r.rows]
        times = [s.epoch_ms for r in done for s in r.stats]
        failure = next((r.status for r in self.runs if r.status in ("diverged", "over_budget")),
                       None)
        status = failure or ("interrupted" if self.interrupted else "ok")
        paper = ("test_acc" in self.metrics.names
                 and paper_accuracy(self.config.model.kind, self.config.dataset.name)) or None
        return Summary(
            runs=len(done), scores=summary_scores(self.metrics, done),
            best_epochs=[int(r.best_epoch) for r in done],
            epoch_time_ms_median=float(np.median(times)) if times else 0.0,
            total_time_s=float(sum(times)) / 1e3, peak_memory_mb=float(self.peak_memory_mb),
            paper_test_acc=paper, status=status)


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


# ---------------------------------------------------------------- one epoch


def train_epoch(model: Module, optimizer: Optimizer, batches: Iterable[Batch],
                clip: float | None,
                reduce: Callable[[list, float], float] | None = None) -> tuple[float, float]:
    """Every step of one epoch: forward, loss, backward, clip, optimizer step.

    Returns (loss, gradient norm): the loss averaged over every target of the epoch (the one
    step's loss in full batch) and the largest pre-clip norm among the steps, the one the
    clipping alarm cares about. A non-finite step ends the epoch at once without an update
    and is returned as is (the loop calls it divergence). `reduce(params, loss)`, if given,
    runs between backward and clipping and returns the loss to report: a partitioned run
    sums gradients and loss shares over its ranks there.
    """
    model.train()
    params = model.parameters()
    total, count, largest, last, steps = 0.0, 0, 0.0, 0.0, 0
    for steps, batch in enumerate(batches, 1):
        loss, num_targets = batch()
        optimizer.zero_grad()
        loss.backward()
        last = float(loss.data) if reduce is None else reduce(params, float(loss.data))
        grad_norm = float(clip_grad_norm_(params, clip if clip else np.inf))
        if not (finite(last) and finite(grad_norm)):
            return last, grad_norm
        optimizer.step()
        total, count = total + last * num_targets, count + num_targets
        largest = max(largest, grad_norm)
    return (last if steps == 1 else total / max(count, 1)), largest  # one step: its own loss


def _alarms(config: Config, grad_norm: float) -> list[str]:
    clip = config.train.grad_clip_norm
    if clip and grad_norm > GRAD_ALARM_FACTOR * clip:
        return [f"gradient norm {grad_norm:.3g} is {grad_norm / clip:.0f}x the clip norm {clip:g}"]
    return []


# ---------------------------------------------------------------- one run


EpochCallback = Callable[[int, EpochRow, EpochStats, list[str]], None]
StopFn = Callable[[], bool]


def fit_run(config: Config, task: Task, seed: int, memory: EpochMemory,
            on_epoch: EpochCallback | None = None, run_index: int = 0,
            should_stop: StopFn | None = None) -> RunResult:
    """Train one model from `seed`; keep the parameters of the epoch whose selection column
    (`task.metrics.select`) is best."""
    model = task.build_model(np.random.default_rng(seed))
    optimizer = build_optimizer(config.optim, model)
    run = RunResult(seed=seed)
    try:
        _epochs(config, task, model, optimizer, run, memory, run_index, on_epoch, should_stop,
                _schedule(config, task, optimizer))
    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: the epoch is abandoned mid-way
        run.status, run.message = "aborted", f"run {run_index} (seed {seed}) aborted"
    _finish(run, model, task)
    return run


def _epochs(config: Config, task: Task, model: Module, optimizer: Optimizer, run: RunResult,
            memory: EpochMemory, run_index: int, on_epoch: EpochCallback | None,
            should_stop: StopFn | None, schedule: Schedule | None = None) -> None:
    """The epochs of one run, recorded into `run` as they finish; `schedule` sets the next
    epoch's rate after each one."""
    shuffle, clip = shuffle_generator(run.seed), config.train.grad_clip_norm
    patience, budget = config.train.patience, task.memory_budget()
    for epoch in range(1, config.train.epochs + 1):
        t0 = time.perf_counter()
        traced = memory.begin(epoch)
        loss, grad_norm = train_epoch(model, optimizer, task.batches(model, shuffle), clip,
                                      task.reduce_gradients)
        t1 = time.perf_counter()
        scores = task.evaluate(model)
        held, peak = (memory.end(run_nbytes(task.operands().values(), model, optimizer))
                      if traced else (None, None))
        _check_columns(task, scores)
        row = EpochRow(epoch, loss, scores, grad_norm)
        stats = EpochStats(epoch, (t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3, held, peak,
                           **task.epoch_figures())
        alarms = _alarms(config, grad_norm)
        event = check_epoch(task.placed, epoch, peak, budget) if traced else None
        if event is not None:
            alarms.append(event.message)
            run.events.append(dataclasses.asdict(event))
        run.rows.append(row)
        run.stats.append(stats)
        run.alarms.extend(f"epoch {epoch}: {a}" for a in alarms)
        if not (finite(loss) and finite(grad_norm)):
            run.status, run.message = "diverged", _diverged(run_index, run.seed, row)
        else:
            _keep_if_best(run, model, task.metrics, row)  # an over-budget epoch counts too
            step_schedule(schedule, row.scores[task.metrics.select])
            if event is not None and event.operand is None:
                run.status, run.message = "over_budget", f"run {run_index}: {event.message}"
        if on_epoch is not None:
            on_epoch(run_index, row, stats, alarms)
        if run.status in ("diverged", "over_budget"):
            return
        if patience is not None and epoch - run.best_epoch >= patience:
            run.status = "early_stopped"
            return
        if should_stop is not None and should_stop():
            run.status = "interrupted"
            return


def _schedule(config: Config, task: Task, optimizer: Optimizer) -> Schedule | None:
    """`optim.schedule` over this run's optimizer (None: a constant rate). A plateau
    schedule watches the selection column in its metric's direction (an accuracy: "max")."""
    o, metrics = config.optim, task.metrics
    mode = "max" if metrics.metric(metrics.select).higher_is_better else "min"
    return make_schedule(o.schedule, optimizer, config.train.epochs, o.step_size, o.gamma,
                         o.warmup, o.min_lr, o.plateau_patience, mode)


def _keep_if_best(run: RunResult, model: Module, metrics: TaskMetrics, row: EpochRow) -> None:
    """Keep `model`'s parameters as the run's best if `row`'s selection column beats the best
    epoch's so far (in the direction its metric declares); patience counts from that epoch."""
    best = run.rows[run.best_epoch - 1].scores[metrics.select] if run.best_epoch else None
    if metrics.better(row.scores[metrics.select], best):
        run.best_epoch, run.state = row.epoch, model.state_dict()


def _check_columns(task: Task, scores: Scores) -> None:
    if tuple(scores) != task.metrics.names:
        raise ValueError(f"{type(task).__name__}.evaluate returned {list(scores)}, not its "
                         f"declared metrics {list(task.metrics.names)}")


def _diverged(run_index: int, seed: int, row: EpochRow) -> str:
    return (f"run {run_index} (seed {seed}) diverged at epoch {row.epoch}: loss {row.loss:.4g}, "
            f"gradient norm {row.grad_norm:.4g}; try a lower optim.lr or a train.grad_clip_norm")


def _finish(run: RunResult, model: Module, task: Task) -> None:
    """Reload the best epoch's parameters and take their scores as the run's result."""
    if not run.state:
        return
    model.load_state_dict(run.state)
    run.scores = task.evaluate(model)


# ---------------------------------------------------------------- all runs


def fit(config: Config, task: Task, on_epoch: EpochCallback | None = None,
        on_run_end: Callable[[TrainResult], None] | None = None,
        should_stop: StopFn | None = None) -> TrainResult:
    """`config.train.runs` runs with seeds seed, seed+1, …; an interrupted, diverged or
    over-budget run ends the series."""
    result = TrainResult(config=config, placement=task.placement,
                         events=[dataclasses.asdict(e) for e in task.budget_events],
                         metrics=task.metrics)
    memory = EpochMemory(config.monitor.memory, config.monitor.log_every)
    # Overflow is detected and reported as divergence; numpy's own warnings would only repeat it.
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(config.train.runs):
            run = fit_run(config, task, config.train.seed + i, memory, on_epoch, i, should_stop)
            result.runs.append(run)
            result.peak_memory_mb = memory.peak_mb
            if on_run_end is not None:
                on_run_end(result)
            if run.status in ("interrupted", "aborted", "diverged", "over_budget"):
                break
    return result


def measure_memory(config: Config, task: Task) -> MemoryReport:
    """Where one training step's memory goes, next to tracemalloc's peak of that step."""
    seed = config.train.seed
    model = task.build_model(np.random.default_rng(seed))
    optimizer = build_optimizer(config.optim, model)
    return trace_step(model, optimizer, lambda: task.first_loss(model, seed), task.operands(),
                      task.estimate_bytes)


def first_step_loss(config: Config, task: Task) -> Tensor:
    """The loss of run 0's first step through a fresh model, graph kept (to draw it)."""
    model = task.build_model(np.random.default_rng(config.train.seed))
    return task.first_loss(model, config.train.seed)


