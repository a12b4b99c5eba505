"""Dense vs sparse: the same GCN training step with Â and X stored both ways, timed and traced.

The step is the run loop's training step — forward, masked cross-entropy, backward, gradient
clipping, optimizer step — on operands placed two ways from one prepared graph: ``sparse`` (Â
and X as SparseTensors) and ``dense`` (both as dense float32 arrays).

Two steps are compared. The *whole-graph* step (every layer on every node, what
``train.receptive_field: false`` trains) is always measured: it is the step whose cost grows
with the graph, and the one the sweep fits. When the config trains on receptive fields (the
default ``auto`` on Cora: 140 ← 644 ← 1,664 of 2,708 rows), the *receptive-field* step that
`mgsparse train` runs is measured too, labelled as such: there only the features change
representation (the blocks' Â rows are sparse either way) and the whole-graph Â is not built.
Per representation and step:

- step time: median and interquartile range over ``repeat`` steps after ``warmup`` steps,
  with tracemalloc off (tracing slows every allocation);
- traced peak: with tracemalloc on, the bytes allocated from just before the operands are
  built up to the highest point of one steady-state step (the second step, once the CSR
  views and the optimizer state exist): what a training run reports as held + transient,
  shown next to the run's budget estimate of it. It counts the operands, parameters, optimizer
  state, cached views and everything the step allocates; it leaves out the graph as loaded,
  which both representations start from, and the interpreter;
- step transient: the part of that peak allocated by the step above what it started with;
- RSS: the whole process's resident set (VmRSS) after the timed steps.

Equivalence: from the same initial weights and with dropout off (the two representations
draw their dropout masks from the generator differently, so with dropout on they compute the
same function of different masks), the loss of the step and every parameter gradient are
compared as max|a − b| / max|b| per parameter.

The same step over graphs of growing size is `mgsparse.bench.sweep`, built on `measure` here.
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.bench.measure import Progress, check_settings, rss_bytes, time_ms
from mgsparse.catalog import GRAPH_DATASETS, MODELS, is_points
from mgsparse.config import Config, config_from_dict, load_config
from mgsparse.data import Graph
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.run.budget import estimate_step_bytes
from mgsparse.run.build import build_optimizer
from mgsparse.run.loop import train_epoch
from mgsparse.run.monitor import MB
from mgsparse.run.placed import UNBUILT
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.nodes import GraphTask
from mgsparse.sparse import SparseTensor

# The dense step holds one N×N array, Â itself: Â needs no gradient, so the backward never
# forms dÂ, and Âᵀ·G runs through BLAS's transpose flag without a copy. Checked by the tests.
DENSE_NXN_ARRAYS = 1


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
    estimate_bytes: int = 0  # the run's budget estimate of this step (`mgsparse.run.budget`)


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
    """One step compared both ways; the whole-graph result carries the receptive-field one
    (`receptive_field`) when the config trains on fields."""

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
    step: str = "whole graph"  # or "receptive field: 140 <- 644 <- 1,664 of 2,708 rows"
    receptive_field: DenseVsSparseResult | None = None

    @property
    def passed(self) -> bool:
        """Both compared steps agree (the exit code of `mgsparse bench`)."""
        field_ok = self.receptive_field is None or self.receptive_field.passed
        return self.equivalence.passed and field_ok

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
        what = "whole-graph" if self.step == "whole graph" else "receptive-field"
        return (f"sparse {what} step {speed} than dense, {100 / self.memory_ratio:.1f}% of its "
                f"traced memory; {agree} (max relative difference {eq.max_rel_diff:.1e})")

    def to_dict(self) -> dict[str, Any]:
        ratios = {"time_dense_over_sparse": self.time_ratio,
                  "traced_peak_dense_over_sparse": self.memory_ratio,
                  "rss_dense_over_sparse": self.rss_ratio}
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["sparse"], d["dense"] = dataclasses.asdict(self.sparse), dataclasses.asdict(self.dense)
        d["receptive_field"] = self.receptive_field and self.receptive_field.to_dict()
        return {"benchmark": "dense_vs_sparse", **d, "ratios": ratios,
                "equivalence": self.equivalence.to_dict(), "verdict": self.verdict(),
                "passed": self.passed}


# ---------------------------------------------------------------- settings


def bench_config(dataset: str | None = None, config_path: str | Path | None = None,
                 overrides: Sequence[str] = ()) -> Config:
    """The run's config: a YAML file, or the defaults for `dataset` (cora when neither is
    given); `dataset` also overrides the file's dataset. Only GCN on a graph is benched."""
    if dataset is not None and is_points(dataset.lower()):  # unknown names: the config says
        raise ConfigError(f"dataset {dataset!r} has no graph to bench; "
                          f"use one of {', '.join(GRAPH_DATASETS)}")
    if config_path is not None:
        named = [(f"dataset.name={dataset}", f"--dataset {dataset}")] if dataset else []
        config = load_config(config_path, list(overrides) + named)
    else:
        config = config_from_dict({"dataset": {"name": dataset or GRAPH_DATASETS[0]}},
                                  "--dataset", overrides)
    if config.dataset.name not in GRAPH_DATASETS:
        raise ConfigError(f"dataset {config.dataset.name!r} has no graph to bench; "
                          f"use one of {', '.join(GRAPH_DATASETS)}")
    if MODELS[config.model.kind].operand != "norm_adj" or config.model.learn_edge_weight:
        raise ConfigError(f"the dense-vs-sparse bench runs a step of a model on Â (a GCN "
                          f"without learned edge weights), got model.kind {config.model.kind!r}")
    return config


def over_budget(estimate: int, budget_mb: float) -> str:
    """Why dense is not run: its estimate against the budget, in MB."""
    def mb(x: float) -> str:
        return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"
    return (f"dense skipped: it would hold ~{mb(estimate / MB)} MB (N²·4 B for Â plus the "
            f"features), over the {mb(budget_mb)} MB budget")


# ---------------------------------------------------------------- placing and measuring


def sparse_task(config: Config, graph: Graph, fields: bool = False) -> GraphTask:
    """The graph placed with both operands sparse, whatever the config's threshold: the
    whole-graph step, or (`fields`) the step the config trains, on receptive fields or not."""
    train = config.train if fields else dataclasses.replace(config.train,
                                                            receptive_field=False)
    config = dataclasses.replace(config, train=train, sparse=dataclasses.replace(
        config.sparse, sparsity_threshold=1.0))
    return GraphTask(config, graph)


def field_of(task: GraphTask) -> str | None:
    """How the task's training step reads the graph: its receptive field's rows (e.g.
    "receptive field: 140 <- 644 <- 1,664 of 2,708 rows", output layer first), or None
    when it runs on the whole graph."""
    rows = task.placed.placement.get("training rows")
    return rows and rows.removesuffix(" (output layer first)")


def place(base: GraphTask, representation: str) -> GraphTask:
    """Fresh operands from `base` (whose operands are sparse): own copies when sparse, so
    their bytes and cached views are counted; dense float32 arrays otherwise. A step on
    receptive fields never reads the whole-graph Â: it is left unbuilt, as a run leaves it."""
    def copy(A: SparseTensor) -> SparseTensor | Tensor:
        if representation == "dense":
            return Tensor(A.to_scipy("csr").toarray())  # one N×N allocation
        return SparseTensor(A.indices.copy(), A.values.data.copy(), A.shape)

    operand = UNBUILT if field_of(base) else copy(base.operand)
    return base.with_operands(copy(base.features), operand)


_ORDER = shuffle_generator(0)  # a full-batch graph task draws no orderings from it


def step(task: GraphTask, model, optimizer, clip: float | None) -> None:
    """One training step of the run loop (full batch: the epoch is one step)."""
    train_epoch(model, optimizer, task.batches(model, _ORDER), clip)


def _gradients(config: Config, task: GraphTask) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and raw parameter gradients of the step's forward/backward, dropout off."""
    model = task.build_model(np.random.default_rng(config.train.seed))
    model.eval()
    (batch,) = task.batches(model, _ORDER)  # full batch: one step
    loss, _ = batch()
    loss.backward()
    return float(loss.data), {name: (p.grad if p.grad is not None else np.zeros_like(p.data))
                              for name, p in model.named_parameters()}


def measure(config: Config, base: GraphTask, representation: str, repeat: int,
            warmup: int) -> tuple[RepresentationResult, float, dict[str, np.ndarray]]:
    """Trace one steady-state step, time `repeat` more, then take the equivalence gradients."""
    clip = config.train.grad_clip_norm
    gc.collect()
    owner = not tracemalloc.is_tracing()
    if owner:
        tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        task = place(base, representation)
        operand_bytes = tracemalloc.get_traced_memory()[0] - start
        model = task.build_model(np.random.default_rng(config.train.seed))
        optimizer = build_optimizer(config.optim, model)
        step(task, model, optimizer, clip)  # builds CSR views and optimizer state
        gc.collect()
        tracemalloc.reset_peak()
        held = tracemalloc.get_traced_memory()[0]
        step(task, model, optimizer, clip)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if owner:
            tracemalloc.stop()
    times = time_ms(lambda: step(task, model, optimizer, clip), repeat, warmup)
    q1, q3 = np.percentile(times, [25, 75])
    dense = representation == "dense"
    adjacency_dense = dense and not field_of(base)  # a field's blocks are sparse either way
    result = RepresentationResult(
        representation, float(np.median(times)), float(q3 - q1), int(peak - start),
        int(peak - held), int(operand_bytes), rss_bytes(),
        1.0 if adjacency_dense else base.densities["adjacency"],
        1.0 if dense else base.densities["features"],
        times, estimate_step_bytes(task, config))
    loss, grads = _gradients(config, task)
    return result, loss, grads


def compare_gradients(sparse: tuple, dense: tuple, tolerance: float) -> Equivalence:
    """(loss, grads) of each side -> max|g_s − g_d| / max|g_d| per parameter (dense: the
    reference the difference is relative to)."""
    (loss_s, grads_s), (loss_d, grads_d) = sparse, dense
    diffs = {name: float(np.max(np.abs(grads_s[name] - g), initial=0.0)
                         / max(float(np.max(np.abs(g), initial=0.0)), 1e-30))
             for name, g in grads_d.items()}
    return Equivalence(loss_s, loss_d, diffs, tolerance)


# ---------------------------------------------------------------- the comparison


def dense_vs_sparse(config: Config, graph: Graph, repeat: int = 20, warmup: int = 3,
                    tolerance: float = 1e-4, progress: Progress | None = None,
                    memory_budget_mb: float = 2048.0) -> DenseVsSparseResult:
    """The whole-graph step both ways, then (when the config trains on receptive fields) the
    receptive-field step both ways, as `receptive_field` of the result. Refuses before any
    work when the dense step's estimate exceeds the budget."""
    check_settings(repeat, warmup, tolerance, memory_budget_mb)
    estimate = dense_bytes_estimate(graph.num_nodes, graph.x.shape[1], config.model.hidden)
    if estimate > memory_budget_mb * MB:
        raise ConfigError(f"{graph.name}: {over_budget(estimate, memory_budget_mb)}; "
                          "raise the memory budget to run it")
    say = progress or (lambda message: None)
    base = sparse_task(config, graph)
    nnz = base.operand.nnz
    whole = compare(config, base, "whole graph", nnz, repeat, warmup, tolerance, say)
    if config.train.receptive_field is not False:
        trained = sparse_task(config, graph, fields=True)
        if field_of(trained):
            whole.receptive_field = compare(config, trained, field_of(trained), nnz, repeat,
                                            warmup, tolerance, say)
    return whole


def compare(config: Config, base: GraphTask, step_name: str, adjacency_nnz: int, repeat: int,
            warmup: int, tolerance: float, say: Progress) -> DenseVsSparseResult:
    """Sparse first, then dense (dense leaves the larger allocator footprint behind)."""
    label = "whole-graph" if step_name == "whole graph" else "receptive-field"
    say(f"{base.name}: sparse {label} step")
    sparse, *s_grads = measure(config, base, "sparse", repeat, warmup)
    say(f"{base.name}: dense {label} step")
    dense, *d_grads = measure(config, base, "dense", repeat, warmup)
    return DenseVsSparseResult(
        dataset=base.name, num_nodes=base.num_nodes, num_features=base.num_features,
        adjacency_nnz=adjacency_nnz, feature_nnz=base.features.nnz, repeat=repeat,
        warmup=warmup, sparse=sparse, dense=dense,
        equivalence=compare_gradients(s_grads, d_grads, tolerance), step=step_name)


def dense_bytes_estimate(num_nodes: int, num_features: int, hidden: int) -> int:
    """What the dense step holds, in float32 bytes: `DENSE_NXN_ARRAYS` N×N arrays (Â), the
    features three times (X, the dropout mask, the dropped copy) and some N×hidden arrays."""
    n = int(num_nodes)
    return 4 * (DENSE_NXN_ARRAYS * n * n + 3 * n * int(num_features) + 16 * n * int(hidden))
