"""The memory budget: operands placed within it before training, the sparse fallback during it.

The budget is computed once per run (`make_task`: "auto" is half the memory available then)
and held by the task for placement and training alike. Its one rule (`dense_over_budget`): past
80% of the budget, dense operands turn sparse. Before training it runs once, on the placed
operands (a dense array larger than the whole budget was never built: `run.placed.place`):
the largest dense operand turns sparse while the estimated step passes it, and a run whose
all-sparse step is estimated above the budget stops before its first epoch. During training, a traced epoch whose peak passes it
turns the largest dense operand sparse from the next epoch on (same values: the loss curve
continues to float rounding, the optimizer state is untouched — the operand is marked
`dense_stream`, so its dropout draws the dense-shaped mask the dense operand drew and the
generator's stream goes on unchanged); with nothing dense left, a peak above the
budget ends the run cleanly. The rule talks to the task's placed data (`task.placed`, a
`run.placed.PlacedGraph`: its operands, `dense_operands`, `make_sparse`), never to the task's
own fields.

The estimate of a step (`estimate_step_bytes`) is built from what the engine reports, one
forward pass of a throwaway model on the candidate placement:

    step ≈ dense operands + 1.5 · sparse operands + 4 · parameters + 2 · saved

An operand counts what it holds after that forward (its arrays and the views the forward
built); a sparse one the step reads half again, for the transposed view its backward builds
(a step on receptive fields reads blocks instead: run/field.py); parameters come four times (values, gradients, Adam's two moments); `saved` is what
the forward saved for backward beyond the operands themselves, twice because the backward
allocates a gradient about as large as each activation it reads. `benchmarks/memory_estimate.py`
holds it against the measured peak (Cora dense and sparse, 100,000 synthetic nodes: within
±25%). Attention (GAT) allocates more in its backward than this counts: its estimate runs low.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from mgsparse.config import Config, MonitorConfig
from mgsparse.engine.autograd import graph_contexts
from mgsparse.errors import MemoryBudgetError
from mgsparse.run.monitor import MB, held_nbytes
from mgsparse.sparse import SparseTensor

FALLBACK_FRACTION = 0.8  # above this share of the budget, dense operands turn sparse
AUTO_FRACTION = 0.5  # "auto": this share of the memory available when the run starts
SPARSE_BACKWARD_VIEWS = 0.5  # a sparse operand's transposed view, built by the backward


def available_memory_bytes() -> int:
    """Memory the kernel says a new allocation can still get (MemAvailable), else free RAM."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024 * MB  # no way to ask: assume a modest machine


def budget_bytes(monitor: MonitorConfig) -> float | None:
    """The run's budget in bytes: the config's MB, half the available memory for "auto",
    None (no limit) for null."""
    if monitor.memory_budget_mb is None:
        return None
    if monitor.memory_budget_mb == "auto":
        return int(AUTO_FRACTION * available_memory_bytes())
    return monitor.memory_budget_mb * MB  # not rounded: 1e-9 MB is not a budget of 0 bytes


MB_DIGITS = 3  # significant digits of a figure in MB, at the least


def mb(num_bytes: float, other: float | None = None) -> str:
    """`num_bytes` in MB, truthful at any scale: at least three significant digits and one
    decimal ("34.3 MB", "2.68 MB", "2,048.0 MB", "0.0412 MB", "9.54e-07 MB"), and with
    `other` given, as many more as it takes for the two figures not to print alike (an
    estimate over its budget never reads "1.00 MB of a 1.00 MB budget")."""
    for digits in range(MB_DIGITS, 17):
        text = _mb_text(num_bytes / MB, digits)
        if other is None or text != _mb_text(other / MB, digits):
            break
    return f"{text} MB"


def _mb_text(value: float, digits: int) -> str:
    if value == 0 or not np.isfinite(value):
        return f"{value:g}"
    if abs(value) < 1e-3:
        return f"{value:.{digits - 1}e}"
    decimals = max(1, digits - 1 - int(np.floor(np.log10(abs(value)))))
    return f"{value:,.{decimals}f}"


def dense_over_budget(num_bytes: float, budget: int | None) -> bool:
    """The 80% rule, written once: `num_bytes` (a dense array, an estimated step, a traced
    peak) passes `FALLBACK_FRACTION` of the budget, so dense operands should turn sparse."""
    return budget is not None and num_bytes > FALLBACK_FRACTION * budget


@dataclass
class BudgetEvent:
    """What the budget rule did: before training (epoch 0, estimated MB) or after a traced
    epoch (measured MB)."""

    epoch: int
    operand: str | None  # the operand turned sparse; None when the run had to stop
    before_mb: float
    after_mb: float
    peak_mb: float
    budget_mb: float
    message: str


# ---------------------------------------------------------------- the estimate


def estimate_step_bytes(task: Any, config: Config) -> int:
    """A training step's peak on the task's current placement (`task.placed`, see the module
    docstring): one throwaway model, one first loss."""
    seed = config.train.seed
    model = task.build_model(np.random.default_rng(seed))
    loss = task.first_loss(model, seed)
    operands = list(task.placed.operands().values())
    saved = [a for ctx in graph_contexts(loss) for a in (ctx.saved_tensors or ())]
    held = held_nbytes(*operands)
    saved_ids = {id(a) for a in saved}  # a sparse operand the step reads saved its values
    sparse = held_nbytes(*(op for op in operands if isinstance(op, SparseTensor)
                           and id(op.values.data) in saved_ids))
    beyond = held_nbytes(*operands, saved) - held
    params = sum(p.data.nbytes for p in model.parameters())
    return int(held + SPARSE_BACKWARD_VIEWS * sparse + 4 * params + 2 * beyond)


def fit_within_budget(task: Any, config: Config, budget: int | None) -> list[BudgetEvent]:
    """Place the task's operands so that the estimated step stays within 80% of `budget`:
    the largest dense operand turns sparse while it does not; stop if all-sparse is over.
    Returns what it changed, as events of epoch 0. Run once per task, by `make_task`."""
    events: list[BudgetEvent] = []
    placed = task.placed
    estimate = estimate_step_bytes(task, config)
    while dense_over_budget(estimate, budget) and placed.dense_operands():
        name = placed.dense_operands()[0]
        placed.make_sparse(name, f"sparse (dense would need {mb(estimate, budget)} of a "
                                 f"{mb(budget, estimate)} budget)")
        before, estimate = estimate, estimate_step_bytes(task, config)
        events.append(BudgetEvent(0, name, before / MB, estimate / MB, before / MB,
                                  budget / MB, f"{name} kept sparse: dense would need "
                                  f"{mb(before, budget)} of a {mb(budget, before)} budget"))
    if budget is not None and estimate > budget:
        raise MemoryBudgetError(
            f"a training step needs about {mb(estimate, budget)} with every operand sparse, "
            f"over the {mb(budget, estimate)} budget; raise monitor.memory_budget_mb or use a "
            "smaller model")
    task.estimate_bytes = estimate
    return events


# ---------------------------------------------------------------- during training


def check_epoch(placed: Any, epoch: int, peak_mb: float,
                budget: int | None) -> BudgetEvent | None:
    """Apply the 80% rule to one traced epoch's peak (held + transient, in MB): the largest
    dense operand of the placed graph turns sparse."""
    if budget is None or not dense_over_budget(peak_mb * MB, budget):
        return None
    budget_mb = budget / MB
    dense = placed.dense_operands()
    if dense:
        name = dense[0]
        before = held_nbytes(placed.operands()[name])
        peak, limit = mb(peak_mb * MB, FALLBACK_FRACTION * budget), mb(budget)
        placed.make_sparse(name, f"sparse (fell back at epoch {epoch}: peak {peak} "
                                 f"of a {limit} budget)")
        placed.operands()[name].dense_stream = True  # its dropout draws as the dense one did
        after = held_nbytes(placed.operands()[name])
        return BudgetEvent(epoch, name, before / MB, after / MB, peak_mb, budget_mb,
                           f"peak {peak} passed 80% of the {limit} budget: {name} now sparse "
                           f"({mb(before, after)} -> {mb(after, before)})")
    if peak_mb * MB > budget:
        return BudgetEvent(epoch, None, peak_mb, peak_mb, peak_mb, budget_mb,
                           f"peak {mb(peak_mb * MB, budget)} is over the "
                           f"{mb(budget, peak_mb * MB)} budget with every operand sparse; "
                           "the run stops (best parameters kept)")
    return None
