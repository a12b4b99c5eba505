"""Full-batch transductive training of a GNN: one `fit(config, graph)` call, no printing.

Each epoch: forward on the whole graph, masked cross-entropy on the training nodes,
backward, gradient clipping, optimizer step; then an evaluation pass in `no_grad`.
Early stopping watches the validation loss and keeps the best-validation parameters.
Progress goes out through `on_epoch`; a `should_stop()` callback ends a run cleanly
after the current epoch (the CLI wires it to Ctrl-C).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.engine import Tensor, no_grad
from mgsparse.monitor import (
    MB,
    MemoryReport,
    MemoryTracer,
    finite,
    operand_nbytes,
    saved_bytes_by_op,
)
from mgsparse.nn import functional as F
from mgsparse.nn.module import Module
from mgsparse.optim import Optimizer, clip_grad_norm_
from mgsparse.problem import Problem, build_model, build_optimizer

# Test accuracies reported by the papers, shown next to ours (fractions).
PAPER_ACCURACY = {
    ("gcn", "cora"): 0.815, ("gcn", "citeseer"): 0.703, ("gcn", "pubmed"): 0.790,
    ("gat", "cora"): 0.830, ("gat", "citeseer"): 0.725, ("gat", "pubmed"): 0.790,
}
GRAD_ALARM_FACTOR = 10.0  # a pre-clip norm this many times the clip norm is worth a warning
MEMORY_ALARM_FRACTION = 0.8


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
    """The figures of one epoch that depend on the machine: time and memory."""

    epoch: int
    step_ms: float
    epoch_ms: float
    mem_current_mb: float
    mem_peak_mb: float


@dataclass
class RunResult:
    seed: int
    rows: list[EpochRow] = field(default_factory=list)
    stats: list[EpochStats] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    status: str = "completed"  # completed | early_stopped | interrupted | diverged
    message: str = ""
    best_epoch: int = 0
    train_acc: float = 0.0
    val_acc: float = 0.0
    test_acc: float = 0.0
    state: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class TrainResult:
    config: Config
    placement: dict[str, str]
    runs: list[RunResult] = field(default_factory=list)
    peak_memory_mb: float = 0.0
    memory_report: dict | None = None

    @property
    def failed(self) -> bool:
        return any(r.status == "diverged" for r in self.runs)

    @property
    def interrupted(self) -> bool:
        return any(r.status == "interrupted" for r in self.runs)

    def summary(self) -> dict[str, Any]:
        done = [r for r in self.runs if r.rows]
        test = np.array([r.test_acc for r in done]) if done else np.zeros(1)
        val = np.array([r.val_acc for r in done]) if done else np.zeros(1)
        times = [s.epoch_ms for r in done for s in r.stats]
        key = (self.config.model.kind, self.config.dataset.name)
        return {
            "runs": len(done),
            "test_acc_mean": float(test.mean()),
            "test_acc_std": float(test.std()),
            "val_acc_mean": float(val.mean()),
            "best_epoch": int(done[0].best_epoch) if done else 0,
            "best_epochs": [int(r.best_epoch) for r in done],
            "epoch_time_ms_median": float(np.median(times)) if times else 0.0,
            "peak_memory_mb": float(self.peak_memory_mb),
            "paper_test_acc": PAPER_ACCURACY.get(key),
            "status": "diverged" if self.failed else ("interrupted" if self.interrupted else "ok"),
        }


# ---------------------------------------------------------------- one epoch


def training_loss(model: Module, problem: Problem) -> Tensor:
    """The loss one training step differentiates: masked cross-entropy on the training nodes."""
    logits = model(problem.features, problem.norm_adj)
    return F.cross_entropy(logits, problem.y, problem.train_idx)


def train_step(model: Module, problem: Problem, optimizer: Optimizer,
               clip: float | None) -> tuple[float, float]:
    """Forward, masked loss, backward, clip, step. Returns (loss, pre-clip gradient norm)."""
    model.train()
    loss = training_loss(model, problem)
    optimizer.zero_grad()
    loss.backward()
    params = model.parameters()
    grad_norm = clip_grad_norm_(params, clip) if clip else clip_grad_norm_(params, np.inf)
    if finite(loss.data) and finite(grad_norm):
        optimizer.step()
    return float(loss.data), float(grad_norm)


def evaluate(model: Module, problem: Problem) -> dict[str, float]:
    """Accuracy on the train/val/test nodes and the validation loss, without building a graph."""
    model.eval()
    with no_grad():
        logits = model(problem.features, problem.norm_adj)
        val_loss = float(F.cross_entropy(logits, problem.y, problem.val_idx).data)
    return {
        "val_loss": val_loss,
        "train_acc": F.accuracy(logits, problem.y, problem.train_idx),
        "val_acc": F.accuracy(logits, problem.y, problem.val_idx),
        "test_acc": F.accuracy(logits, problem.y, problem.test_idx),
    }


def _alarms(config: Config, loss: float, grad_norm: float, mem_mb: float) -> list[str]:
    alarms = []
    clip = config.train.grad_clip_norm
    if clip and grad_norm > GRAD_ALARM_FACTOR * clip:
        alarms.append(f"gradient norm {grad_norm:.3g} is {grad_norm / clip:.0f}x the clip norm {clip:g}")
    budget = config.monitor.memory_budget_mb
    if mem_mb > MEMORY_ALARM_FRACTION * budget:
        alarms.append(f"traced memory {mem_mb:.1f} MB is above 80% of the {budget:g} MB budget")
    return alarms


# ---------------------------------------------------------------- one run


EpochCallback = Callable[[int, EpochRow, EpochStats, list[str]], None]
StepFn = Callable[[], tuple[float, float]]  # one epoch of training -> (loss, pre-clip grad norm)
EvalFn = Callable[[], dict[str, float]]  # -> val_loss, train_acc, val_acc, test_acc


def fit_run(config: Config, problem: Problem, seed: int, tracer: MemoryTracer,
            on_epoch: EpochCallback | None = None, run_index: int = 0,
            should_stop: Callable[[], bool] | None = None) -> RunResult:
    """Train one model from `seed`; keep the parameters of the lowest validation loss."""
    rng = np.random.default_rng(seed)
    model = build_model(config.model, problem, rng)
    optimizer = build_optimizer(config.optim, model)
    clip = config.train.grad_clip_norm
    return run_epochs(config, model, seed, tracer,
                      step=lambda: train_step(model, problem, optimizer, clip),
                      evaluate_model=lambda: evaluate(model, problem),
                      on_epoch=on_epoch, run_index=run_index, should_stop=should_stop)


def run_epochs(config: Config, model: Module, seed: int, tracer: MemoryTracer, step: StepFn,
               evaluate_model: EvalFn, on_epoch: EpochCallback | None = None,
               run_index: int = 0, should_stop: Callable[[], bool] | None = None) -> RunResult:
    """The epoch loop every trainer shares: `step()` trains one epoch (one full-graph step, or
    a pass of mini-batches), `evaluate_model()` scores the model; this loop times, samples
    memory, raises alarms, stops on divergence / patience / `should_stop`, and keeps the
    parameters of the lowest validation loss, reloaded at the end."""
    run = RunResult(seed=seed)
    best_loss, since_best = np.inf, 0
    patience = config.train.patience
    for epoch in range(1, config.train.epochs + 1):
        t0 = time.perf_counter()
        loss, grad_norm = step()
        t1 = time.perf_counter()
        metrics = evaluate_model()
        epoch_ms = (time.perf_counter() - t0) * 1e3
        current, peak = tracer.sample()
        row = EpochRow(epoch, loss, metrics["val_loss"], metrics["train_acc"],
                       metrics["val_acc"], metrics["test_acc"], grad_norm)
        stats = EpochStats(epoch, (t1 - t0) * 1e3, epoch_ms, current, peak)
        alarms = _alarms(config, loss, grad_norm, current)
        run.rows.append(row)
        run.stats.append(stats)
        run.alarms.extend(f"epoch {epoch}: {a}" for a in alarms)
        if not (finite(loss) and finite(grad_norm)):
            run.status, run.message = "diverged", _diverged(run_index, seed, row)
        elif metrics["val_loss"] < best_loss:
            best_loss, since_best = metrics["val_loss"], 0
            run.best_epoch, run.state = epoch, model.state_dict()
        else:
            since_best += 1
        if on_epoch is not None:
            on_epoch(run_index, row, stats, alarms)
        if run.status == "diverged":
            break
        if patience is not None and since_best >= patience:
            run.status = "early_stopped"
            break
        if should_stop is not None and should_stop():
            run.status = "interrupted"
            break
    _finish(run, model, evaluate_model)
    return run


def _diverged(run_index: int, seed: int, row: EpochRow) -> str:
    return (f"run {run_index} (seed {seed}) diverged at epoch {row.epoch}: loss {row.loss:.4g}, "
            f"gradient norm {row.grad_norm:.4g}; try a lower optim.lr or a train.grad_clip_norm")


def _finish(run: RunResult, model: Module, evaluate_model: EvalFn) -> None:
    """Reload the best-validation parameters and take their accuracies as the run's result."""
    if not run.state:
        return
    model.load_state_dict(run.state)
    final = evaluate_model()
    run.train_acc, run.val_acc, run.test_acc = final["train_acc"], final["val_acc"], final["test_acc"]


# ---------------------------------------------------------------- all runs


RunFn = Callable[[int, MemoryTracer, int], RunResult]  # (seed, tracer, run index) -> one run


def fit(config: Config, problem: Problem, on_epoch: EpochCallback | None = None,
        on_run_end: Callable[[TrainResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None) -> TrainResult:
    """`config.train.runs` runs with seeds seed, seed+1, …; stops early on Ctrl-C or divergence."""
    def one_run(seed: int, tracer: MemoryTracer, index: int) -> RunResult:
        return fit_run(config, problem, seed, tracer, on_epoch, index, should_stop)

    return repeat_runs(config, dict(problem.placement), one_run, on_run_end)


def repeat_runs(config: Config, placement: dict[str, str], one_run: RunFn,
                on_run_end: Callable[[TrainResult], None] | None = None) -> TrainResult:
    """Call `one_run` for seeds seed, seed+1, … under one memory tracer, collecting the runs;
    an interrupted or diverged run ends the series."""
    result = TrainResult(config=config, placement=placement)
    # Overflow is detected and reported as divergence; numpy's own warnings would only repeat it.
    with MemoryTracer(config.monitor.memory) as tracer, np.errstate(over="ignore", invalid="ignore"):
        for i in range(config.train.runs):
            run = one_run(config.train.seed + i, tracer, i)
            result.runs.append(run)
            result.peak_memory_mb = tracer.peak_mb
            if on_run_end is not None:
                on_run_end(result)
            if run.status in ("interrupted", "diverged"):
                break
    return result


# ---------------------------------------------------------------- memory report


def trace_step(model: Module, optimizer: Optimizer, loss_fn: Callable[[], Tensor],
               adjacency: int, features: int) -> MemoryReport:
    """One training step under tracemalloc: the bytes each op type saved for backward (read
    from the graph before backward frees it), parameters, optimizer state and the step's peak."""
    with MemoryTracer(True) as tracer:
        tracer.sample()
        model.train()
        loss = loss_fn()
        saved = saved_bytes_by_op(loss)
        loss.backward()
        optimizer.step()
        _, peak = tracer.sample()
    return MemoryReport(
        parameters=sum(p.data.nbytes for p in model.parameters()),
        optimizer_state=optimizer.state_nbytes(), adjacency=adjacency, features=features,
        saved_for_backward=saved, traced_peak=int(peak * MB),
    )


def measure_memory(config: Config, problem: Problem) -> MemoryReport:
    """Where one training step's memory goes on a graph, next to tracemalloc's peak."""
    model = build_model(config.model, problem, np.random.default_rng(config.train.seed))
    optimizer = build_optimizer(config.optim, model)
    return trace_step(model, optimizer, lambda: training_loss(model, problem),
                      operand_nbytes(problem.norm_adj), operand_nbytes(problem.features))
