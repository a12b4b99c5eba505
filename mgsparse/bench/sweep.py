"""Scaling sweep: the dense-vs-sparse GCN whole-graph step on synthetic graphs of growing size.

At each size the sparse *whole-graph* step (every layer on every node, whatever
``train.receptive_field`` says) is timed and traced as in `mgsparse.bench.dense_vs_sparse`
(same operands, same measurement); dense runs too where its estimated footprint fits the
memory budget, and is checked for equivalence there. The whole-graph step is the one whose
cost is a function of the graph's size: a receptive-field step reads the field of a fixed
number of labelled rows, which stops growing once the graph is larger than it (a fit over
field steps gave nnz^0.19). The growth is read as log-log slopes, ``time ∝ nnz^k``, next to
the same slope for scipy's bare CSR Â·H (H: N × hidden) — the reference line: the sparse
product under every layer with no engine around it, so where its exponent exceeds 1 too, the
growth comes from the memory hierarchy, not from the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mgsparse.bench import dense_vs_sparse as bench
from mgsparse.bench.dense_vs_sparse import Equivalence, RepresentationResult
from mgsparse.bench.measure import Progress, check_settings, time_ms
from mgsparse.catalog import DATASETS
from mgsparse.config import Config
from mgsparse.errors import ConfigError
from mgsparse.run.monitor import MB
from mgsparse.run.placed import load_graph
from mgsparse.run.tasks.nodes import GraphTask
from mgsparse.sparse import SparseTensor

# Below ~1e5 stored entries a step costs about the same whatever the size: the ~60 engine ops
# of a 2-layer GCN step each pay a fixed dispatch cost. Growth exponents are fitted above it.
FIT_MIN_NNZ = 100_000
MIN_SWEEP_NODES, MAX_SWEEP_NODES = 100, 10_000_000


# ---------------------------------------------------------------- results


@dataclass
class SweepPoint:
    """One size: the sparse step always, dense and its equivalence only within the budget."""

    num_nodes: int
    adjacency_nnz: int
    feature_nnz: int
    sparse: RepresentationResult
    dense_estimate_bytes: int
    kernel_ms: float = 0.0  # scipy's CSR Â·H alone (H: N×hidden), median: no engine at all
    dense: RepresentationResult | None = None
    dense_skipped: str = ""  # why dense was not run ("" when it ran)
    equivalence: Equivalence | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["equivalence"] = self.equivalence.to_dict() if self.equivalence else None
        return d


@dataclass
class SweepResult:
    """Sparse (and, within the budget, dense) step cost on synthetic graphs of growing size.

    Exponents are log-log slopes, ``time ∝ nnz^k``: ``*_large`` over the sizes with at least
    `FIT_MIN_NNZ` stored entries in Â (all sizes if fewer than two qualify), ``*_all`` over
    every size, ``local_time_exponents`` between consecutive sizes. The kernel exponent is the
    same fit for scipy's bare Â·H: where it exceeds 1 too, the growth comes from the memory
    hierarchy (a working set that no longer fits in cache), not from the engine. The dense
    exponent is against the number of nodes.
    """

    points: list[SweepPoint]
    memory_budget_mb: float
    repeat: int
    warmup: int
    fit_nnz: list[int]
    time_exponent_large: float | None
    memory_exponent_large: float | None
    time_exponent_all: float | None
    memory_exponent_all: float | None
    kernel_time_exponent_large: float | None
    local_time_exponents: list[float]
    dense_time_exponent_nodes: float | None

    @property
    def passed(self) -> bool:
        return all(p.equivalence.passed for p in self.points if p.equivalence)

    def to_dict(self) -> dict[str, Any]:
        scalars = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                   if f.name != "points"}
        return {"benchmark": "scale_sweep", **scalars, "passed": self.passed,
                "points": [p.to_dict() for p in self.points]}


# ---------------------------------------------------------------- settings


def parse_scale(text: str) -> list[int]:
    """'1000,10000,1e5' -> [1000, 10000, 100000]: node counts, sorted, each once."""
    sizes = set()
    for item in str(text).split(","):
        try:
            value = float(item.strip().replace("_", ""))
        except ValueError:
            raise ConfigError(f"--scale: {item.strip()!r} is not a node count; expected "
                              "comma-separated integers, e.g. 1000,10000,100000") from None
        if not value.is_integer() or not MIN_SWEEP_NODES <= value <= MAX_SWEEP_NODES:
            raise ConfigError(f"--scale: {item.strip()!r} must be an integer node count in "
                              f"[{MIN_SWEEP_NODES:,}, {MAX_SWEEP_NODES:,}]")
        sizes.add(int(value))
    return sorted(sizes)


# ---------------------------------------------------------------- the sweep


def kernel_ms(norm_adj: SparseTensor, columns: int, repeat: int) -> float:
    """Median time of scipy's CSR Â·H alone: the memory-bound kernel under every sparse step."""
    A = norm_adj.to_scipy("csr")
    H = np.random.default_rng(0).standard_normal((A.shape[1], columns), dtype=np.float32)
    # one untimed product first: it brings Â and H into the caches
    return float(np.median(time_ms(lambda: A @ H, repeat, warmup=1)))


def _sweep_point(config: Config, n: int, repeat: int, warmup: int, budget_mb: float,
                 say: Progress) -> tuple[SweepPoint, GraphTask, tuple]:
    say(f"n={n:,}: generating the graph")
    graph = load_graph(dataclasses.replace(config.dataset, num_nodes=n))
    base = bench.sparse_task(config, graph)
    del graph
    say(f"n={n:,}: sparse step (Â nnz {base.operand.nnz:,})")
    sparse, *grads = bench.measure(config, base, "sparse", repeat, warmup)
    estimate = bench.dense_bytes_estimate(n, base.num_features, config.model.hidden)
    point = SweepPoint(n, base.operand.nnz, base.features.nnz, sparse, estimate,
                       kernel_ms(base.operand, config.model.hidden, repeat))
    if estimate > budget_mb * MB:
        point.dense_skipped = bench.over_budget(estimate, budget_mb)
        say(f"n={n:,}: {point.dense_skipped}")
    return point, base, tuple(grads)


def scale_sweep(config: Config, sizes: Sequence[int], repeat: int = 10, warmup: int = 2,
                memory_budget_mb: float = 2048.0, tolerance: float = 1e-4,
                progress: Progress | None = None) -> SweepResult:
    """Sparse at every size, then dense at the sizes whose estimate fits the budget (after
    all sparse runs, so dense BLAS threads never overlap a sparse measurement)."""
    check_settings(repeat, warmup, tolerance, memory_budget_mb)
    if DATASETS[config.dataset.name].maker != "sbm":
        raise ConfigError(f"a scaling sweep needs the synthetic dataset (graphs of any size), "
                          f"got {config.dataset.name!r}")
    say = progress or (lambda message: None)
    points, dense_todo = [], []
    for n in sorted({int(s) for s in sizes}):
        point, base, grads = _sweep_point(config, n, repeat, warmup, memory_budget_mb, say)
        points.append(point)
        if not point.dense_skipped:
            dense_todo.append((point, base, grads))
        del base
    for point, base, grads in dense_todo:
        say(f"n={point.num_nodes:,}: dense step")
        point.dense, *d_grads = bench.measure(config, base, "dense", repeat, warmup)
        point.equivalence = bench.compare_gradients(grads, d_grads, tolerance)
    return _fit(points, memory_budget_mb, repeat, warmup)


# ---------------------------------------------------------------- growth exponents


def _slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """k of the least-squares line log y = k·log x + c, i.e. y ∝ x^k; None without two
    distinct x or with a y ≤ 0 (no logarithm)."""
    if len(x) < 2 or len(set(x)) < 2 or min(y) <= 0:
        return None
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _fit(points: list[SweepPoint], budget_mb: float, repeat: int, warmup: int) -> SweepResult:
    large = [p for p in points if p.adjacency_nnz >= FIT_MIN_NNZ]
    fitted = large if len(large) >= 2 else points
    nnz = [p.adjacency_nnz for p in fitted]
    dense = [p for p in points if p.dense]
    ms = [p.sparse.step_ms_median for p in points]
    local = [_slope([a.adjacency_nnz, b.adjacency_nnz], [ta, tb])
             for a, b, ta, tb in zip(points, points[1:], ms, ms[1:])]
    return SweepResult(
        points=points, memory_budget_mb=budget_mb, repeat=repeat, warmup=warmup, fit_nnz=nnz,
        time_exponent_large=_slope(nnz, [p.sparse.step_ms_median for p in fitted]),
        memory_exponent_large=_slope(nnz, [p.sparse.traced_peak_bytes for p in fitted]),
        time_exponent_all=_slope([p.adjacency_nnz for p in points],
                                 [p.sparse.step_ms_median for p in points]),
        memory_exponent_all=_slope([p.adjacency_nnz for p in points],
                                   [p.sparse.traced_peak_bytes for p in points]),
        kernel_time_exponent_large=_slope(nnz, [p.kernel_ms for p in fitted]),
        local_time_exponents=[k for k in local if k is not None],
        dense_time_exponent_nodes=_slope([p.num_nodes for p in dense],
                                         [p.dense.step_ms_median for p in dense]))
