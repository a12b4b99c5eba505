"""What a run watches: traced memory, nnz ratios, and where the bytes of one step went.

Plain functions returning plain numbers and dataclasses; the CLI decides how to show them.
"""

from __future__ import annotations

import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.tensor import graph_contexts
from mgsparse.sparse import SparseTensor

MB = 1024 * 1024


class MemoryTracer:
    """tracemalloc, started only if nobody else started it, sampled once per epoch."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._owner = False
        self.peak_mb = 0.0

    def __enter__(self) -> MemoryTracer:
        if self.enabled and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._owner = True
        return self

    def __exit__(self, *exc) -> None:
        if self._owner:
            tracemalloc.stop()

    def sample(self) -> tuple[float, float]:
        """(current MB, peak MB since the last sample); the run's peak is kept in `peak_mb`."""
        if not self.enabled or not tracemalloc.is_tracing():
            return 0.0, 0.0
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        self.peak_mb = max(self.peak_mb, peak / MB)
        return current / MB, peak / MB


def nnz_ratio(m) -> float:
    """Stored entries over rows·cols: 1.0 for a dense operand."""
    if isinstance(m, SparseTensor):
        return m.density
    if hasattr(m, "nnz") and hasattr(m, "shape"):  # scipy
        rows, cols = m.shape
        return m.nnz / max(rows * cols, 1)
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


@dataclass
class MemoryReport:
    """Where the memory of a training step goes (bytes), next to tracemalloc's peak."""

    parameters: int
    optimizer_state: int
    operands: dict[str, int]  # features, adjacency: what the task placed
    saved_for_backward: dict[str, int] = field(default_factory=dict)  # op name -> bytes
    traced_peak: int = 0


def trace_step(model, optimizer, loss_fn: Callable[[], Tensor],
               operands: dict[str, int]) -> MemoryReport:
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
    return MemoryReport(parameters=sum(p.data.nbytes for p in model.parameters()),
                        optimizer_state=optimizer.state_nbytes(), operands=dict(operands),
                        saved_for_backward=saved, traced_peak=int(peak * MB))


def finite(x: float | np.ndarray) -> bool:
    return bool(np.all(np.isfinite(x)))
