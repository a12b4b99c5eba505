"""What a run watches: the memory it holds, each sampled epoch's traced peak, nnz ratios.

A run's memory is counted in two parts, so that neither is missed nor counted twice:

- *held*: the bytes every epoch keeps alive — the operands with the views they cache (CSR,
  transposes), the parameters, their gradients, the model's reused buffers, the products its
  layers keep for fixed operands and the optimizer state — summed from the arrays themselves
  (cheap, exact, no tracing);
- *transient*: what an epoch allocates above that, tracemalloc's peak over the epoch.

tracemalloc slows every allocation (a traced Cora epoch takes about twice as long), so it runs
only during sampled epochs: epoch `TRACED_FIRST` (the first in steady state: epoch 1 builds
the caches and optimizer state, which then count as held) and every `TRACE_EVERY`·log_every-th,
about one epoch in twenty by default. The reported figure of a sampled epoch is held +
transient; the budget rule (`mgsparse.run.budget`) sees every one of them; the estimate
before training covers the first step.
"""

from __future__ import annotations

import math
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.engine.autograd import graph_contexts
from mgsparse.nn.edges import FixedProduct
from mgsparse.sparse import SparseTensor

MB = 1024 * 1024
TRACED_FIRST = 2  # the first epoch in steady state
TRACE_EVERY = 2  # then every (TRACE_EVERY · log_every)-th epoch: a table row in two


def finite(x: float | np.ndarray) -> bool:
    if type(x) is float:  # a loss or a norm, every step: math's test, not an array's
        return math.isfinite(x)
    return bool(np.all(np.isfinite(x)))


# ---------------------------------------------------------------- held bytes


def held_nbytes(*objects: Any) -> int:
    """Bytes of every numpy array reachable from `objects` through attributes, containers and
    scipy matrices (each buffer once, however many views share it). Reaches a SparseTensor's
    cached CSR/CSC views, a Tensor's data and grad, an optimizer's state."""
    seen: set[int] = set()
    total, stack, visited = 0, list(objects), set()
    while stack:
        obj = stack.pop()
        if obj is None or isinstance(obj, (str, bytes, int, float, bool, type)):
            continue
        if id(obj) in visited:
            continue
        visited.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None else obj.base
            if isinstance(base, np.ndarray) and id(base) not in seen:
                seen.add(id(base))
                total += base.nbytes
            continue
        stack.extend(_children(obj))
    return total


def _children(obj: Any) -> Iterable[Any]:
    if sp.issparse(obj):
        return [getattr(obj, name, None) for name in ("data", "indices", "indptr", "row", "col")]
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set)):
        return list(obj)
    slots = [getattr(obj, s, None) for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())
             if s != "__dict__"]
    return slots + list(getattr(obj, "__dict__", {}).values())


def run_nbytes(operands: Iterable[Any], model: Any, optimizer: Any) -> int:
    """What a run holds between steps: operands and their views, parameters with their
    gradients, the buffers the model reuses from step to step, the products its layers keep
    for fixed operands (`nn.edges.FixedProduct`: Â·X, the features' size), optimizer state."""
    params = [(p.data, p.grad) for p in model.parameters()]
    kept = [v for m in (model.modules() if hasattr(model, "modules") else ())
            for v in vars(m).values() if isinstance(v, FixedProduct)]
    return held_nbytes(*operands, params, getattr(model, "buffers", None), kept,
                       getattr(optimizer, "state", None))


# ---------------------------------------------------------------- sampled tracing


class EpochMemory:
    """tracemalloc during sampled epochs only; each sample is the epoch's transient peak."""

    def __init__(self, enabled: bool, log_every: int):
        self.enabled, self.log_every = enabled, log_every
        self.peak_mb = 0.0  # the highest held + transient of the whole series
        self._owner = False

    def sampled(self, epoch: int) -> bool:
        every = TRACE_EVERY * self.log_every
        return self.enabled and (epoch == TRACED_FIRST or epoch % every == 0)

    def begin(self, epoch: int) -> bool:
        """Start tracing if `epoch` is sampled. Returns whether this epoch is traced."""
        if not self.sampled(epoch):
            return False
        self.start()
        return True

    def start(self) -> None:
        """Trace from now on (or reset the peak of a tracer someone else started)."""
        self._owner = not tracemalloc.is_tracing()
        if self._owner:
            tracemalloc.start()
        self._start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()

    def end(self, held_bytes: int) -> tuple[float, float]:
        """(held MB, held + transient peak MB) of the traced epoch; tracing stops."""
        transient = max(tracemalloc.get_traced_memory()[1] - self._start, 0)
        if self._owner:
            tracemalloc.stop()
        held, peak = held_bytes / MB, (held_bytes + transient) / MB
        self.peak_mb = max(self.peak_mb, peak)
        return held, peak


# ---------------------------------------------------------------- what the operands are


def nnz_ratio(m) -> float:
    """Stored entries over rows·cols: 1.0 for a dense operand."""
    if isinstance(m, SparseTensor):
        return m.density
    if hasattr(m, "nnz") and hasattr(m, "shape"):  # scipy
        rows, cols = m.shape
        return m.nnz / max(rows * cols, 1)
    if isinstance(m, np.ndarray):  # a dense array: its nonzero entries, counted in place
        return np.count_nonzero(m) / max(m.size, 1)
    return 1.0


def operand_nbytes(m) -> int:
    """Bytes held by a feature or adjacency operand (indices + values, or the dense array)."""
    if isinstance(m, SparseTensor):
        return int(m.indices.nbytes + m.values.data.nbytes)
    if isinstance(m, Tensor):
        return int(m.data.nbytes)
    return int(getattr(m, "nbytes", 0))


def saved_bytes_by_op(loss: Tensor) -> dict[str, int]:
    """Bytes each op type saved for backward in the graph below `loss` (call before backward)."""
    totals: dict[str, int] = defaultdict(int)
    for ctx in graph_contexts(loss):
        totals[ctx.fn.__name__] += ctx.saved_nbytes
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------- one step, accounted


@dataclass
class MemoryReport:
    """Where the memory of a training step goes (bytes), next to tracemalloc's peak."""

    parameters: int
    optimizer_state: int
    operands: dict[str, int]  # features, adjacency: what the task placed
    saved_for_backward: dict[str, int] = field(default_factory=dict)  # op name -> bytes
    traced_peak: int = 0  # held (operands, views, parameters, state) + the step's transient
    estimate: int = 0  # what `mgsparse.run.budget` predicted for the step before it ran


def trace_step(model, optimizer, loss_fn: Callable[[], Tensor], operands: dict[str, Any],
               estimate: int = 0) -> MemoryReport:
    """One training step under tracemalloc: the bytes each op type saved for backward (read
    from the graph before backward frees it), parameters, optimizer state and the step's peak,
    counted as every epoch of a run is (held + transient)."""
    tracer = EpochMemory(True, 1)
    tracer.start()
    model.train()
    loss = loss_fn()
    saved = saved_bytes_by_op(loss)
    loss.backward()
    optimizer.step()
    _, peak = tracer.end(run_nbytes(operands.values(), model, optimizer))
    return MemoryReport(parameters=sum(p.data.nbytes for p in model.parameters()),
                        optimizer_state=optimizer.state_nbytes(),
                        operands={k: operand_nbytes(v) for k, v in operands.items()},
                        saved_for_backward=saved, traced_peak=int(peak * MB), estimate=estimate)
