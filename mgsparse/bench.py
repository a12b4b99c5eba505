"""Dense vs sparse: the same GCN training step with Â and X stored both ways, timed and traced.

The step is `train.train_step` — forward, masked cross-entropy, backward, gradient clipping,
optimizer step — on operands placed two ways from one prepared graph: ``sparse`` (Â and X
as SparseTensors) and ``dense`` (both as dense float32 arrays). Per representation:

- step time: median and interquartile range over ``repeat`` steps after ``warmup`` steps,
  with tracemalloc off (tracing slows every allocation);
- traced peak: with tracemalloc on, the bytes allocated from just before the operands are
  built up to the highest point of one steady-state step (the second step, once the CSR
  views and the optimizer state exist). It counts the operands, parameters, optimizer
  state, cached views and everything the step allocates; it leaves out the graph as loaded,
  which both representations start from, and the interpreter;
- step transient: the part of that peak allocated by the step above what it started with;
- RSS: the whole process's resident set (VmRSS) after the timed steps.

Equivalence: from the same initial weights and with dropout off (the two representations
draw their dropout masks from the generator differently, so with dropout on they compute the
same function of different masks), the loss and every parameter gradient are compared as
max|a − b| / max|b| per parameter.
"""

from __future__ import annotations

import dataclasses
import gc
import resource
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.config import POINT_CLOUD_DATASETS, Config, config_from_dict, load_config
from mgsparse.data import Graph
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.nn import functional as F
from mgsparse.plot import require_matplotlib
from mgsparse.problem import Problem, build_model, build_optimizer, load_graph, prepare
from mgsparse.sparse import SparseTensor
from mgsparse.train import train_step

MB = 1024 * 1024
GRAPH_DATASETS = ("cora", "citeseer", "pubmed", "karate", "synthetic")
# Below ~1e5 stored entries a step costs about the same whatever the size: the ~60 engine ops
# of a 2-layer GCN step each pay a fixed dispatch cost. Growth exponents are fitted above it.
FIT_MIN_NNZ = 100_000
MIN_SWEEP_NODES, MAX_SWEEP_NODES = 100, 10_000_000
# The dense step holds one N×N array, Â itself: Â needs no gradient, so the backward never
# forms dÂ, and Âᵀ·G runs through BLAS's transpose flag without a copy. Checked by the tests.
DENSE_NXN_ARRAYS = 1
Progress = Callable[[str], None]


# ---------------------------------------------------------------- results


@dataclass
class RepresentationResult:
    """One representation's figures (bytes and milliseconds)."""

    representation: str  # "sparse" | "dense"
    step_ms_median: float
    step_ms_iqr: float
    traced_peak_bytes: int
    step_transient_bytes: int
    operand_bytes: int
    rss_bytes: int
    adjacency_stored_fraction: float  # stored entries / N²: Â's density if sparse, 1 if dense
    feature_stored_fraction: float
    step_ms: list[float] = field(default_factory=list, repr=False)


@dataclass
class Equivalence:
    """Loss and gradients of the two representations from the same weights, dropout off."""

    loss_sparse: float
    loss_dense: float
    grad_rel_diff: dict[str, float]  # parameter name -> max|g_s − g_d| / max|g_d|
    tolerance: float

    @property
    def loss_rel_diff(self) -> float:
        return abs(self.loss_sparse - self.loss_dense) / max(abs(self.loss_dense), 1e-30)

    @property
    def max_rel_diff(self) -> float:
        return max([self.loss_rel_diff, *self.grad_rel_diff.values()])

    @property
    def passed(self) -> bool:
        return bool(self.max_rel_diff <= self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "loss_rel_diff": self.loss_rel_diff,
                "max_rel_diff": self.max_rel_diff, "passed": self.passed}


@dataclass
class DenseVsSparseResult:
    dataset: str
    num_nodes: int
    num_features: int
    adjacency_nnz: int  # Â with self loops
    feature_nnz: int
    repeat: int
    warmup: int
    sparse: RepresentationResult
    dense: RepresentationResult
    equivalence: Equivalence

    @property
    def time_ratio(self) -> float:
        """dense / sparse median step time."""
        return self.dense.step_ms_median / self.sparse.step_ms_median

    @property
    def memory_ratio(self) -> float:
        """dense / sparse traced peak."""
        return self.dense.traced_peak_bytes / max(self.sparse.traced_peak_bytes, 1)

    @property
    def rss_ratio(self) -> float:
        return self.dense.rss_bytes / max(self.sparse.rss_bytes, 1)

    def verdict(self) -> str:
        eq = self.equivalence
        agree = ("same loss and gradients" if eq.passed else
                 f"loss or gradients DIFFER beyond the tolerance {eq.tolerance:g}")
        speed = (f"{self.time_ratio:.1f}x faster" if self.time_ratio >= 1
                 else f"{1 / self.time_ratio:.1f}x slower")
        return (f"sparse step {speed} than dense, {100 / self.memory_ratio:.1f}% of its traced "
                f"memory; {agree} (max relative difference {eq.max_rel_diff:.1e})")

    def to_dict(self) -> dict[str, Any]:
        ratios = {"time_dense_over_sparse": self.time_ratio,
                  "traced_peak_dense_over_sparse": self.memory_ratio,
                  "rss_dense_over_sparse": self.rss_ratio}
        return {"benchmark": "dense_vs_sparse", **dataclasses.asdict(self), "ratios": ratios,
                "equivalence": self.equivalence.to_dict(), "verdict": self.verdict()}


@dataclass
class SweepPoint:
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


def bench_config(dataset: str | None = None, config_path: str | Path | None = None,
                 overrides: Sequence[str] = ()) -> Config:
    """The run's config: a YAML file, or the defaults for `dataset` (cora when neither is
    given); `dataset` also overrides the file's dataset. Only GCN on a graph is benched."""
    if dataset is not None and dataset.lower() in POINT_CLOUD_DATASETS:
        raise ConfigError(f"dataset {dataset!r} has no graph to bench; "
                          f"use one of {', '.join(GRAPH_DATASETS)}")
    if config_path is not None:
        named = [f"dataset.name={dataset}"] if dataset else []
        config = load_config(config_path, list(overrides) + named)
    else:
        config = config_from_dict({"dataset": {"name": dataset or "cora"}}, "--dataset",
                                  overrides)
    if config.dataset.name not in GRAPH_DATASETS:
        raise ConfigError(f"dataset {config.dataset.name!r} has no graph to bench; "
                          f"use one of {', '.join(GRAPH_DATASETS)}")
    if config.model.kind != "gcn":
        raise ConfigError(f"the dense-vs-sparse bench runs a GCN step, got model.kind "
                          f"{config.model.kind!r}")
    return config


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


def _check_settings(repeat: int, warmup: int, tolerance: float, budget_mb: float) -> None:
    if repeat < 1 or warmup < 0:
        raise ConfigError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, "
                          f"warmup={warmup}")
    if not tolerance > 0:
        raise ConfigError(f"tolerance must be > 0, got {tolerance}")
    if not budget_mb > 0:
        raise ConfigError(f"memory budget must be > 0 MB, got {budget_mb}")


def _over_budget(estimate: int, budget_mb: float) -> str:
    def mb(x: float) -> str:
        return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"
    return (f"dense skipped: it would hold ~{mb(estimate / MB)} MB (N²·4 B for Â plus the "
            f"features), over the {mb(budget_mb)} MB budget")


# ---------------------------------------------------------------- placing and measuring


def sparse_problem(config: Config, graph: Graph) -> Problem:
    """The graph prepared with both operands sparse, whatever the config's threshold."""
    config = dataclasses.replace(config, sparse=dataclasses.replace(
        config.sparse, sparsity_threshold=1.0))
    return prepare(config, graph)


def place(base: Problem, representation: str) -> Problem:
    """Fresh operands from `base` (whose operands are sparse): own copies when sparse, so
    their bytes and cached views are counted; dense float32 arrays otherwise."""
    def copy(A: SparseTensor) -> SparseTensor | Tensor:
        if representation == "dense":
            return Tensor(A.to_scipy("csr").toarray())  # one N×N allocation
        return SparseTensor(A.indices.copy(), A.values.data.copy(), A.shape)

    return dataclasses.replace(base, features=copy(base.features), norm_adj=copy(base.norm_adj))


def rss_bytes() -> int:
    """The process's resident set now (VmRSS); its lifetime peak where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _gradients(config: Config, problem: Problem) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and raw parameter gradients of one forward/backward, dropout off."""
    model = build_model(config.model, problem, np.random.default_rng(config.train.seed))
    model.eval()
    loss = F.cross_entropy(model(problem.features, problem.norm_adj), problem.y,
                           problem.train_idx)
    loss.backward()
    return float(loss.data), {name: (p.grad if p.grad is not None else np.zeros_like(p.data))
                              for name, p in model.named_parameters()}


def _measure(config: Config, base: Problem, representation: str, repeat: int,
             warmup: int) -> tuple[RepresentationResult, float, dict[str, np.ndarray]]:
    """Trace one steady-state step, time `repeat` more, then take the equivalence gradients."""
    clip = config.train.grad_clip_norm
    gc.collect()
    owner = not tracemalloc.is_tracing()
    if owner:
        tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        problem = place(base, representation)
        operand_bytes = tracemalloc.get_traced_memory()[0] - start
        model = build_model(config.model, problem, np.random.default_rng(config.train.seed))
        optimizer = build_optimizer(config.optim, model)
        train_step(model, problem, optimizer, clip)  # builds CSR views and optimizer state
        gc.collect()
        tracemalloc.reset_peak()
        held = tracemalloc.get_traced_memory()[0]
        train_step(model, problem, optimizer, clip)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if owner:
            tracemalloc.stop()
    times = []
    for i in range(warmup + repeat):
        t0 = time.perf_counter()
        train_step(model, problem, optimizer, clip)
        times.append((time.perf_counter() - t0) * 1e3)
    times = times[warmup:]
    q1, q3 = np.percentile(times, [25, 75])
    dense = representation == "dense"
    result = RepresentationResult(
        representation, float(np.median(times)), float(q3 - q1), int(peak - start),
        int(peak - held), int(operand_bytes), rss_bytes(),
        1.0 if dense else base.adjacency_density, 1.0 if dense else base.feature_density, times)
    loss, grads = _gradients(config, problem)
    return result, loss, grads


def _compare(sparse: tuple, dense: tuple, tolerance: float) -> Equivalence:
    (loss_s, grads_s), (loss_d, grads_d) = sparse, dense
    diffs = {name: float(np.max(np.abs(grads_s[name] - g), initial=0.0)
                         / max(float(np.max(np.abs(g), initial=0.0)), 1e-30))
             for name, g in grads_d.items()}
    return Equivalence(loss_s, loss_d, diffs, tolerance)


# ---------------------------------------------------------------- the two benchmarks


def dense_vs_sparse(config: Config, graph: Graph, repeat: int = 20, warmup: int = 3,
                    tolerance: float = 1e-4, progress: Progress | None = None,
                    memory_budget_mb: float = 2048.0) -> DenseVsSparseResult:
    """Sparse first, then dense (dense leaves the larger allocator footprint behind).
    Refuses before any work when the dense step's estimate exceeds the budget."""
    _check_settings(repeat, warmup, tolerance, memory_budget_mb)
    estimate = dense_bytes_estimate(graph.num_nodes, graph.x.shape[1], config.model.hidden)
    if estimate > memory_budget_mb * MB:
        raise ConfigError(f"{graph.name}: {_over_budget(estimate, memory_budget_mb)}; "
                          "raise the memory budget to run it")
    say = progress or (lambda message: None)
    base = sparse_problem(config, graph)
    say(f"{graph.name}: sparse step")
    sparse, *s_grads = _measure(config, base, "sparse", repeat, warmup)
    say(f"{graph.name}: dense step")
    dense, *d_grads = _measure(config, base, "dense", repeat, warmup)
    return DenseVsSparseResult(
        dataset=graph.name, num_nodes=base.num_nodes, num_features=base.num_features,
        adjacency_nnz=base.norm_adj.nnz, feature_nnz=base.features.nnz, repeat=repeat,
        warmup=warmup, sparse=sparse, dense=dense,
        equivalence=_compare(s_grads, d_grads, tolerance))


def dense_bytes_estimate(num_nodes: int, num_features: int, hidden: int) -> int:
    """What the dense step holds, in float32 bytes: `DENSE_NXN_ARRAYS` N×N arrays (Â), the
    features three times (X, the dropout mask, the dropped copy) and some N×hidden arrays."""
    n = int(num_nodes)
    return 4 * (DENSE_NXN_ARRAYS * n * n + 3 * n * int(num_features) + 16 * n * int(hidden))


def _slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) < 2 or len(set(x)) < 2 or min(y) <= 0:
        return None
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def kernel_ms(norm_adj: SparseTensor, columns: int, repeat: int) -> float:
    """Median time of scipy's CSR Â·H alone: the memory-bound kernel under every sparse step."""
    A = norm_adj.to_scipy("csr")
    H = np.random.default_rng(0).standard_normal((A.shape[1], columns), dtype=np.float32)
    times = []
    for _ in range(repeat + 1):  # the first product warms the caches
        t0 = time.perf_counter()
        A @ H
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times[1:]))


def _sweep_point(config: Config, n: int, repeat: int, warmup: int, budget_mb: float,
                 say: Progress) -> tuple[SweepPoint, Problem, tuple]:
    say(f"n={n:,}: generating the graph")
    graph = load_graph(dataclasses.replace(config.dataset, num_nodes=n))
    base = sparse_problem(config, graph)
    del graph
    say(f"n={n:,}: sparse step (Â nnz {base.norm_adj.nnz:,})")
    sparse, *grads = _measure(config, base, "sparse", repeat, warmup)
    estimate = dense_bytes_estimate(n, base.num_features, config.model.hidden)
    point = SweepPoint(n, base.norm_adj.nnz, base.features.nnz, sparse, estimate,
                       kernel_ms(base.norm_adj, config.model.hidden, repeat))
    if estimate > budget_mb * MB:
        point.dense_skipped = _over_budget(estimate, budget_mb)
        say(f"n={n:,}: {point.dense_skipped}")
    return point, base, tuple(grads)


def scale_sweep(config: Config, sizes: Sequence[int], repeat: int = 10, warmup: int = 2,
                memory_budget_mb: float = 2048.0, tolerance: float = 1e-4,
                progress: Progress | None = None) -> SweepResult:
    """Sparse at every size, then dense at the sizes whose estimate fits the budget (after
    all sparse runs, so dense BLAS threads never overlap a sparse measurement)."""
    _check_settings(repeat, warmup, tolerance, memory_budget_mb)
    if config.dataset.name != "synthetic":
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
        point.dense, *d_grads = _measure(config, base, "dense", repeat, warmup)
        point.equivalence = _compare(grads, d_grads, tolerance)
    return _fit(points, memory_budget_mb, repeat, warmup)


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


# ---------------------------------------------------------------- plot


def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """A PNG: step time and traced peak against Â's nnz, log-log, sparse and dense.

    matplotlib is the optional `plot` extra, imported here only (see `mgsparse.plot`)."""
    fig = require_matplotlib().Figure(figsize=(11, 4.2), layout="constrained")
    ax_t, ax_m = fig.subplots(1, 2)
    for kind, style in (("sparse", "o-"), ("dense", "s--")):
        pts = [(p.adjacency_nnz, getattr(p, kind)) for p in result.points if getattr(p, kind)]
        if pts:
            nnz = [x for x, _ in pts]
            ax_t.plot(nnz, [r.step_ms_median for _, r in pts], style, label=kind)
            ax_m.plot(nnz, [r.traced_peak_bytes / MB for _, r in pts], style, label=kind)
    kernel = [(p.adjacency_nnz, p.kernel_ms) for p in result.points if p.kernel_ms > 0]
    if kernel:
        ax_t.plot(*zip(*kernel), "^:", color="gray", label="scipy Â·H alone")
    for ax, what, k_all, k_large in (
            (ax_t, "step time (ms)", result.time_exponent_all, result.time_exponent_large),
            (ax_m, "traced peak (MB)", result.memory_exponent_all, result.memory_exponent_large)):
        fits = (f"sparse ∝ nnz^{k_all:.2f} (all), ^{k_large:.2f} (nnz ≥ {FIT_MIN_NNZ:,})"
                if k_all is not None and k_large is not None else "")
        ax.set(xscale="log", yscale="log", xlabel="stored entries of Â (nnz)", ylabel=what,
               title=f"{what}\n{fits}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("GCN training step on synthetic SBM graphs: sparse vs dense")
    path = Path(path)
    try:
        fig.savefig(path, dpi=120, format="png")
    except OSError as err:
        raise MgsparseError(f"cannot write the plot to {path}: {err.strerror or err}") from None
    return path
