"""The one training loop: any `Task`, epochs of steps, early stopping, runs over seeds.

Each step of an epoch: the task's forward and loss, backward, gradient clipping, optimizer
step. Then an evaluation pass in `no_grad`. Early stopping watches the validation loss and
keeps the best-validation parameters, reloaded at the end of the run. Progress goes out
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
from mgsparse.optim import Optimizer, clip_grad_norm_
from mgsparse.run.budget import check_epoch
from mgsparse.run.build import build_optimizer
from mgsparse.run.monitor import EpochMemory, MemoryReport, finite, run_nbytes, trace_step
from mgsparse.run.task import Batch, Task, shuffle_generator

GRAD_ALARM_FACTOR = 10.0  # a pre-clip norm this many times the clip norm is worth a warning


@dataclass
class EpochRow:
    """The figures of one epoch that depend only on config and seed (bitwise reproducible)."""

    epoch: int
    loss: float
    val_loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    grad_norm: float


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
    train_acc: float = 0.0
    val_acc: float = 0.0
    test_acc: float = 0.0
    state: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    """A series of runs in a few numbers: accuracies over seeds, time, memory, status."""

    runs: int
    test_acc_mean: float
    test_acc_std: float
    val_acc_mean: float
    best_epochs: list[int]
    epoch_time_ms_median: float
    total_time_s: float
    peak_memory_mb: float
    paper_test_acc: float | None
    status: str  # ok | interrupted | diverged | over_budget


@dataclass
class TrainResult:
    config: Config
    placement: dict[str, str]
    runs: list[RunResult] = field(default_factory=list)
    peak_memory_mb: float = 0.0
    memory_report: MemoryReport | None = None
    events: list[dict] = field(default_factory=list)  # placement before training (epoch 0)

    @property
    def failed(self) -> bool:
        return any(r.status in ("diverged", "over_budget") for r in self.runs)

    @property
    def interrupted(self) -> bool:
        return any(r.status in ("interrupted", "aborted") for r in self.runs)

    def summary(self) -> Summary:
        done = [r for r in self.runs if r.rows]
        test = np.array([r.test_acc for r in done]) if done else np.zeros(1)
        val = np.array([r.val_acc for r in done]) if done else np.zeros(1)
        times = [s.epoch_ms for r in done for s in r.stats]
        failure = next((r.status for r in self.runs if r.status in ("diverged", "over_budget")),
                       None)
        status = failure or ("interrupted" if self.interrupted else "ok")
        return Summary(
            runs=len(done), test_acc_mean=float(test.mean()), test_acc_std=float(test.std()),
            val_acc_mean=float(val.mean()), best_epochs=[int(r.best_epoch) for r in done],
            epoch_time_ms_median=float(np.median(times)) if times else 0.0,
            total_time_s=float(sum(times)) / 1e3, peak_memory_mb=float(self.peak_memory_mb),
            paper_test_acc=paper_accuracy(self.config.model.kind, self.config.dataset.name),
            status=status)


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
    """Train one model from `seed`; keep the parameters of the lowest validation loss."""
    model = task.build_model(np.random.default_rng(seed))
    optimizer = build_optimizer(config.optim, model)
    run = RunResult(seed=seed)
    try:
        _epochs(config, task, model, optimizer, run, memory, run_index, on_epoch, should_stop)
    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: the epoch is abandoned mid-way
        run.status, run.message = "aborted", f"run {run_index} (seed {seed}) aborted"
    _finish(run, model, task)
    return run


def _epochs(config: Config, task: Task, model: Module, optimizer: Optimizer, run: RunResult,
            memory: EpochMemory, run_index: int, on_epoch: EpochCallback | None,
            should_stop: StopFn | None) -> None:
    """The epochs of one run, recorded into `run` as they finish."""
    shuffle, clip = shuffle_generator(run.seed), config.train.grad_clip_norm
    best_loss, since_best, patience = np.inf, 0, config.train.patience
    budget = task.memory_budget()
    for epoch in range(1, config.train.epochs + 1):
        t0 = time.perf_counter()
        traced = memory.begin(epoch)
        loss, grad_norm = train_epoch(model, optimizer, task.batches(model, shuffle), clip,
                                      task.reduce_gradients)
        t1 = time.perf_counter()
        scores = task.evaluate(model)
        held, peak = (memory.end(run_nbytes(task.operands().values(), model, optimizer))
                      if traced else (None, None))
        row = EpochRow(epoch, loss, scores.val_loss, scores.train_acc, scores.val_acc,
                       scores.test_acc, grad_norm)
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
        if event is not None and event.operand is None:
            run.status, run.message = "over_budget", f"run {run_index}: {event.message}"
        elif not (finite(loss) and finite(grad_norm)):
            run.status, run.message = "diverged", _diverged(run_index, run.seed, row)
        elif scores.val_loss < best_loss:
            best_loss, since_best = scores.val_loss, 0
            run.best_epoch, run.state = epoch, model.state_dict()
        else:
            since_best += 1
        if on_epoch is not None:
            on_epoch(run_index, row, stats, alarms)
        if run.status in ("diverged", "over_budget"):
            return
        if patience is not None and since_best >= patience:
            run.status = "early_stopped"
            return
        if should_stop is not None and should_stop():
            run.status = "interrupted"
            return


def _diverged(run_index: int, seed: int, row: EpochRow) -> str:
    return (f"run {run_index} (seed {seed}) diverged at epoch {row.epoch}: loss {row.loss:.4g}, "
            f"gradient norm {row.grad_norm:.4g}; try a lower optim.lr or a train.grad_clip_norm")


def _finish(run: RunResult, model: Module, task: Task) -> None:
    """Reload the best-validation parameters and take their accuracies as the run's result."""
    if not run.state:
        return
    model.load_state_dict(run.state)
    final = task.evaluate(model)
    run.train_acc, run.val_acc, run.test_acc = final.train_acc, final.val_acc, final.test_acc


# ---------------------------------------------------------------- all runs


def fit(config: Config, task: Task, on_epoch: EpochCallback | None = None,
        on_run_end: Callable[[TrainResult], None] | None = None,
        should_stop: StopFn | None = None) -> TrainResult:
    """`config.train.runs` runs with seeds seed, seed+1, …; an interrupted, diverged or
    over-budget run ends the series."""
    result = TrainResult(config=config, placement=task.placement,
                         events=[dataclasses.asdict(e) for e in task.budget_events])
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


