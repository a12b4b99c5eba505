"""The one training loop: any `Task`, epochs of steps, early stopping, runs over seeds.

Each step of an epoch: the task's forward and loss, backward, gradient clipping, optimizer
step. Then an evaluation pass in `no_grad`. The task's `metrics` declare its scores and the
column that selects: early stopping watches that column and keeps the parameters of its best
epoch (the lowest validation loss for classification), reloaded at the end of the run. Progress goes out
through `on_epoch`, and inside an epoch through `on_step` (one cheap call per step: a sampled
epoch of seconds shows its batches move); a `should_stop()` callback ends a run cleanly after the current epoch
(the CLI wires it to Ctrl-C and SIGTERM). Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mgsparse.config import Config, ModelConfig
from mgsparse.engine import Tensor
from mgsparse.nn.module import Module
from mgsparse.optim import Optimizer, clip_grad_norm_, step_schedule
from mgsparse.run.budget import check_epoch
from mgsparse.run.build import build_optimizer, build_schedule
from mgsparse.run.monitor import EpochMemory, MemoryReport, finite, run_nbytes, trace_step
from mgsparse.run.replay import Replay
from mgsparse.run.results import (
    EpochRow,
    EpochStats,
    RunResult,
    TrainResult,
)
from mgsparse.run.task import Batch, Scores, Task, TaskMetrics, shuffle_generator

StepCallback = Callable[[int, "int | None"], None]  # steps done, steps of the epoch (or None)
GRAD_ALARM_FACTOR = 10.0  # a pre-clip norm this many times the clip norm is worth a warning


@dataclass
class RunState:
    """What a run's next epoch depends on besides the config and the data: the model (its
    parameters, buffers and generators), the optimizer, the learning-rate schedule, the run's
    shuffle generator and what the run recorded so far, after `epoch` epochs. A full
    checkpoint saves it (`mgsparse.run.resume`); resuming loads it before the next epoch."""

    run_index: int
    run: RunResult
    model: Module
    optimizer: Optimizer
    shuffle: np.random.Generator
    schedule: Any = None
    epoch: int = 0


class Checkpoints(Protocol):
    """Where full checkpoints go and come from (`mgsparse.run.resume.FullCheckpoints`)."""

    runs_done: list[RunResult]  # a resumed series' finished runs (empty: a fresh one)

    def restore(self, state: RunState) -> None:
        """Load the saved state into a run just built, if it is the saved run."""

    def save(self, state: RunState, runs_done: list[RunResult]) -> None:
        """Write a full checkpoint of `state` and the runs finished before it."""


# ---------------------------------------------------------------- one epoch


def train_epoch(model: Module, optimizer: Optimizer, batches: Iterable[Batch],
                clip: float | None, reduce: Callable[[list, float], float] | None = None,
                replay: Replay | None = None,
                on_step: StepCallback | None = None) -> tuple[float, float]:
    """Every step of one epoch: forward, loss, backward, clip, optimizer step.

    Returns (loss, gradient norm): the loss averaged over every target of the epoch (the one
    step's loss in full batch) and the largest pre-clip norm among the steps, the one the
    clipping alarm cares about. A non-finite step ends the epoch at once without an update
    and is returned as is (the loop calls it divergence). `reduce(params, loss)`, if given,
    runs between backward and clipping and returns the loss to report: a partitioned run
    sums gradients and loss shares over its ranks there. `replay` (the task's, for an epoch
    of one fixed step) runs the step, from its tape once it may (`run.replay`).
    `on_step(steps_done, steps_or_None)` follows each optimizer step (the total is known when
    `batches` is `Sized`, a sampled epoch's `Steps`).
    """
    if replay is None:
        model.train()
    params = model.parameters() if replay is None else replay.params
    total, count, largest, last, steps = 0.0, 0, 0.0, 0.0, 0
    planned = len(batches) if on_step is not None and isinstance(batches, Sized) else None
    for steps, batch in enumerate(batches, 1):
        optimizer.zero_grad()  # before the forward: no step reads a gradient
        if replay is None:
            loss, num_targets = batch()
            loss.backward()
        else:
            loss, num_targets = replay.step(batch)
        last = float(loss.data) if reduce is None else reduce(params, float(loss.data))
        grad_norm = float(clip_grad_norm_(params, clip if clip else np.inf))
        if not (finite(last) and finite(grad_norm)):
            return last, grad_norm
        optimizer.step()
        total, count = total + last * num_targets, count + num_targets
        largest = max(largest, grad_norm)
        if on_step is not None:
            on_step(steps, planned)
    return (last if steps == 1 else total / max(count, 1)), largest  # one step: its own loss


def _alarms(config: Config, grad_norm: float) -> list[str]:
    clip = config.train.grad_clip_norm
    if clip and grad_norm > GRAD_ALARM_FACTOR * clip:
        return [f"gradient norm {grad_norm:.3g} is {grad_norm / clip:.0f}x the clip norm {clip:g}"]
    return []


# ---------------------------------------------------------------- one run


EpochCallback = Callable[[int, EpochRow, EpochStats, list[str]], None]
BatchCallback = Callable[[int, int, int, "int | None"], None]  # run, epoch, step, steps
StopFn = Callable[[], bool]


def fit_run(config: Config, task: Task, seed: int, memory: EpochMemory,
            on_epoch: EpochCallback | None = None, run_index: int = 0,
            should_stop: StopFn | None = None, checkpoints: Checkpoints | None = None,
            save: Callable[[RunState], None] | None = None,
            on_batch: BatchCallback | None = None) -> RunResult:
    """Train one model from `seed`; keep the parameters of the epoch whose selection column
    (`task.metrics.select`) is best. With `checkpoints`, a resumed run starts from its saved
    state and `save` writes a full checkpoint when one is due. `on_batch(run, epoch, step,
    steps_or_None)` follows every step of every epoch."""
    model = task.build_model(np.random.default_rng(seed))
    optimizer = build_optimizer(config.optim, model)
    selected = task.metrics.metric(task.metrics.select)  # what a plateau schedule watches
    schedule = build_schedule(config.optim, optimizer, config.train.epochs,
                              selected.higher_is_better)
    state = RunState(run_index, RunResult(seed=seed), model, optimizer, shuffle_generator(seed),
                     schedule)
    if checkpoints is not None:
        checkpoints.restore(state)
    run = state.run
    try:
        _epochs(config, task, state, memory, on_epoch, should_stop, save, on_batch)
    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: the epoch is abandoned mid-way
        run.status, run.message = "aborted", f"run {run_index} (seed {seed}) aborted"
    _finish(run, model, task)
    return run


def _epochs(config: Config, task: Task, state: RunState, memory: EpochMemory,
            on_epoch: EpochCallback | None, should_stop: StopFn | None,
            save: Callable[[RunState], None] | None = None,
            on_batch: BatchCallback | None = None) -> None:
    """The epochs of one run after `state.epoch`, recorded into `state.run` as they finish."""
    model, optimizer, run, run_index = state.model, state.optimizer, state.run, state.run_index
    shuffle, clip = state.shuffle, config.train.grad_clip_norm
    patience, budget = config.train.patience, task.memory_budget()
    for epoch in range(state.epoch + 1, config.train.epochs + 1):
        lr = optimizer.param_groups[0]["lr"] if state.schedule is not None else None
        t0 = time.perf_counter()
        traced = memory.begin(epoch)
        on_step = (None if on_batch is None else
                   lambda k, n, e=epoch: on_batch(run_index, e, k, n))
        loss, grad_norm = train_epoch(model, optimizer, task.batches(model, shuffle), clip,
                                      task.reduce_gradients, task.replay(model, training=True),
                                      on_step)
        t1 = time.perf_counter()
        scores = task.evaluate(model)
        held, peak = (memory.end(run_nbytes(task.operands().values(), model, optimizer))
                      if traced else (None, None))
        _check_columns(task, scores)
        row = EpochRow(epoch, loss, scores, grad_norm, lr)
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
            run.status, run.message = "diverged", _diverged(run_index, run.seed, row, config)
        else:
            _keep_if_best(run, model, task.metrics, row,  # an over-budget epoch counts too
                          config.train.min_delta)
            step_schedule(state.schedule, scores[task.metrics.select])
            if event is not None and event.operand is None:
                run.status, run.message = "over_budget", f"run {run_index}: {event.message}"
        if on_epoch is not None:
            on_epoch(run_index, row, stats, alarms)
        if run.status in ("diverged", "over_budget"):
            return
        if patience is not None and epoch - run.best_epoch >= patience:
            run.status = "early_stopped"
            return
        stop = should_stop is not None and should_stop()
        if save is not None and (stop or _checkpoint_due(config, epoch)):
            state.epoch = epoch
            saving = time.perf_counter()
            save(state)  # part of the epoch's time: the summary's total counts the saves
            stats.epoch_ms += (time.perf_counter() - saving) * 1e3
        if stop:
            run.status = "interrupted"
            return


def _checkpoint_due(config: Config, epoch: int) -> bool:
    """A full checkpoint every `train.checkpoint_every` epochs, except after the last one."""
    every = config.train.checkpoint_every
    return every is not None and epoch % every == 0 and epoch < config.train.epochs


def _keep_if_best(run: RunResult, model: Module, metrics: TaskMetrics, row: EpochRow,
                  min_delta: float = 0.0) -> None:
    """Keep `model`'s parameters as the run's best if `row`'s selection column beats the best
    epoch's so far by more than `min_delta` (in the direction its metric declares;
    `metrics.tie_break` decides a tie); patience counts from that epoch."""
    best = run.rows[run.best_epoch - 1].scores if run.best_epoch else None
    if metrics.beats(row.scores, best, min_delta):
        run.best_epoch, run.state = row.epoch, model.state_dict()


def _check_columns(task: Task, scores: Scores) -> None:
    if tuple(scores) != task.metrics.names:
        raise ValueError(f"{type(task).__name__}.evaluate returned {list(scores)}, not its "
                         f"declared metrics {list(task.metrics.names)}")


def _diverged(run_index: int, seed: int, row: EpochRow, config: Config) -> str:
    return (f"run {run_index} (seed {seed}) diverged at epoch {row.epoch}: loss {row.loss:.4g}, "
            f"gradient norm {row.grad_norm:.4g}; {_divergence_hint(config)}")


def _divergence_hint(config: Config) -> str:
    """What to change: a lower rate; GCNII's own strengths where set away from their
    defaults (a large θ makes β_l = log(θ/l + 1) large); a clip only where none is set."""
    model, clip = config.model, config.train.grad_clip_norm
    fixes = ["a lower optim.lr"]
    fixes += [f"model.{k} (now {getattr(model, k):g})" for k in ("theta", "alpha")
              if model.kind == "gcnii" and getattr(model, k) != getattr(ModelConfig, k)]
    if clip is None:
        fixes.append("a train.grad_clip_norm")
    return "try " + (" or ".join(fixes) if len(fixes) < 3 else
                     ", ".join(fixes[:-1]) + " or " + fixes[-1])


def _finish(run: RunResult, model: Module, task: Task) -> None:
    """Reload the best epoch's parameters and take their scores as the run's result."""
    if not run.state:
        return
    model.load_state_dict(run.state)
    run.scores = task.evaluate(model)


# ---------------------------------------------------------------- all runs


def fit(config: Config, task: Task, on_epoch: EpochCallback | None = None,
        on_run_end: Callable[[TrainResult], None] | None = None,
        should_stop: StopFn | None = None,
        checkpoints: Checkpoints | None = None,
        on_batch: BatchCallback | None = None) -> TrainResult:
    """`task.num_runs()` runs (`train.runs`, or one per fold) with seeds seed, seed+1, …, each
    announced to the task first (`begin_run`: a fold's splits); an interrupted, diverged or
    over-budget run ends the series. With `checkpoints`, full checkpoints are written as
    they fall due, and a resumed series starts after its finished runs. `on_epoch` follows
    every epoch and `on_batch` every step (`fit_run`)."""
    result = TrainResult(config=config, placement=task.placement,
                         events=[dataclasses.asdict(e) for e in task.budget_events],
                         metrics=task.metrics, planned=task.num_runs())
    memory = EpochMemory(config.monitor.memory, config.monitor.log_every)
    # Overflow is detected and reported as divergence; numpy's own warnings would only repeat it.
    result.runs.extend(checkpoints.runs_done if checkpoints is not None else ())
    save = None if checkpoints is None else (lambda s: checkpoints.save(s, result.runs))
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(len(result.runs), task.num_runs()):
            task.begin_run(i)
            run = fit_run(config, task, config.train.seed + i, memory, on_epoch, i, should_stop,
                          checkpoints, save, on_batch)
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


