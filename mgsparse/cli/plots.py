"""Every matplotlib figure of mgsparse: a run's pictures and the scaling sweep's.

A graph run: learning curves (the training loss and the task's live loss columns, then its
other live score columns, mean ± std over the runs: classification's validation loss, train and
validation accuracy; a k-fold run: each fold's curve thin, their mean bold) next to a 2-D PCA projection of what the best run's model (best on the
task's selection column) reads in its last layer, coloured by class; a sampled run, which
computes no whole-graph hidden layer, gets the two curve panels and a note instead. A
point-cloud run: the decision boundary of its best run's model next to its loss curve. Every
score drawn is one the task declares (`mgsparse.run.task.TaskMetrics`). The scaling sweep:
step time and traced peak against Â's stored entries.
matplotlib is optional (`pip install matplotlib`, the checkout's `[plot]` extra), imported only when a picture
is asked for, so the library and the CLI load without it. The figure is drawn on a bare
`matplotlib.figure.Figure` (no pyplot): no global state, no GUI backend, safe in a thread.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.bench.sweep import FIT_MIN_NNZ, SweepResult
from mgsparse.cli.outputs import PICTURES, make_parents, remove_empty
from mgsparse.cli.render import run_title
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.run.monitor import MB
from mgsparse.run.results import RunResult, TrainResult
from mgsparse.run.task import Task, TaskMetrics
from mgsparse.run.tasks.points import PointTask

# mgsparse is installed from its checkout, not PyPI (where the name could be someone else's):
# the package itself, or the checkout's extra
INSTALL_HINT = "pip install matplotlib (or pip install -e '.[plot]' in the mgsparse checkout)"
FORMATS = PICTURES
GRID_STEPS = 300  # grid points per axis for the decision regions
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


def require_matplotlib() -> Any:
    """The `matplotlib.figure` module, or an MgsparseError saying how to install it."""
    try:
        return importlib.import_module("matplotlib.figure")
    except ImportError:
        raise MgsparseError(f"plotting needs matplotlib, which is not installed: "
                            f"{INSTALL_HINT}") from None


def check_plot_target(path: str | Path) -> None:
    """Fail before training, not after: a known format, and matplotlib installed."""
    if Path(path).suffix.lower() not in FORMATS:
        raise ConfigError(f"plot file {str(path)!r} must end in {', '.join(FORMATS)}")
    require_matplotlib()


def save_training_plot(result: TrainResult, task: Task, path: str | Path) -> Path:
    """The pictures of a finished series of runs (see the module docstring). Returns the path."""
    path = Path(path)
    check_plot_target(path)
    metrics = result.metrics
    run = best_run(result.runs, metrics)
    if run is None:
        raise MgsparseError("nothing to plot: no run finished an epoch with a finite loss")
    losses_, scores_ = _live_split(metrics)
    if isinstance(task, PointTask):
        fig = require_matplotlib().Figure(figsize=(15, 4.5), layout="constrained")
        boundary, losses = fig.subplots(1, 2)
        _draw_boundary(boundary, task, run, metrics)
        _draw_losses(losses, run, losses_)
        return _save(fig, path, dpi=110)
    hidden = task.embedding(task.restore(run.state))
    fig = require_matplotlib().Figure(figsize=(15 if hidden is not None else 10, 4.5),
                                      layout="constrained")
    losses, scores, *embedding = fig.subplots(1, 3 if hidden is not None else 2)
    folded = bool(getattr(result.config.train, "folds", None))
    _draw_curves(losses, result.runs, ("loss", *losses_), "loss", metrics, folded)
    _draw_curves(scores, result.runs, scores_, _common_name(metrics, scores_), metrics, folded)
    if hidden is not None:
        fold = run.seed - result.config.train.seed if folded else None  # run i is fold i
        _draw_embedding(embedding[0], task, hidden, run, metrics, fold)
    else:  # a sampled run has no whole-graph forward to read its hidden layer from
        fig.suptitle("no embedding panel: a sampled run computes no whole-graph hidden layer",
                     fontsize="small")
    return _save(fig, path, dpi=110)


def best_run(runs: list[RunResult], metrics: TaskMetrics) -> RunResult | None:
    """The run whose kept parameters score best on the task's selection column (its
    metric's direction: the lowest validation loss for classification); the first on ties.
    None when no run kept parameters."""
    best = None
    for run in runs:
        if run.state and (best is None or metrics.better(run.scores[metrics.select],
                                                         best.scores[metrics.select])):
            best = run
    return best


def _live_split(metrics: TaskMetrics) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The live columns that are losses (drawn beside the training loss), and the others."""
    live = metrics.live
    return (tuple(c for c in live if metrics.metric(c).name == "loss"),
            tuple(c for c in live if metrics.metric(c).name != "loss"))


def _common_name(metrics: TaskMetrics, columns: tuple[str, ...]) -> str:
    """What a panel of `columns` shows: their label without the split when they share it
    ("accuracy" for train and val accuracy), else "score"."""
    names = {metrics.metric(c).label.removeprefix(f"{metrics.metric(c).split} ")
             for c in columns}
    return names.pop() if len(names) == 1 else "score"


def _headline(metrics: TaskMetrics, run: RunResult) -> str:
    """The run's first summarised score, e.g. "test 81.5%" (classification: test accuracy)."""
    m = metrics.metric(metrics.summary_columns[0])
    return f"{m.split} {m.format(run.scores.get(m.column, 0.0), digits=1)}"


def curve_band(runs: list[RunResult], field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epochs, mean, std) of one per-epoch figure over runs, epoch by epoch; runs that
    stopped early count up to their last epoch."""
    length = max(len(r.rows) for r in runs)
    table = np.full((len(runs), length), np.nan)
    for i, r in enumerate(runs):
        table[i, :len(r.rows)] = [getattr(row, field) for row in r.rows]
    return (np.arange(1, length + 1), np.nanmean(table, axis=0), np.nanstd(table, axis=0))


def _draw_curves(ax: Any, runs: list[RunResult], fields: tuple[str, ...], what: str,
                 metrics: TaskMetrics, folded: bool = False) -> None:
    """Each field's mean over the runs per epoch, with a ± std band; a k-fold run instead
    draws every fold's own curve thin and the mean over the folds bold (folds differ in their
    data, so the spread of whole curves says more than a band)."""
    done = [r for r in runs if r.rows]
    for field in fields:
        epochs, mean, std = curve_band(done, field)
        label = "training loss" if field == "loss" else metrics.metric(field).label
        if folded:
            line, = ax.plot(epochs, mean, linewidth=2.5, label=f"{label}, mean")
            for i, r in enumerate(done):  # "_" labels stay out of the legend
                ax.plot(epochs[:len(r.rows)], [getattr(row, field) for row in r.rows],
                        linewidth=0.7, alpha=0.5, color=line.get_color(), label=f"_fold {i}")
            continue
        line, = ax.plot(epochs, mean, label=label)
        if len(runs) > 1:
            ax.fill_between(epochs, mean - std, mean + std, color=line.get_color(), alpha=0.2)
    band = f", mean ± std over {len(runs)} runs" if len(runs) > 1 else ""
    band = f", each of {len(done)} folds (thin) and their mean" if folded else band
    ax.set(xlabel="epoch", ylabel=what, title=f"{what} per epoch{band}")
    ax.legend(loc="best", fontsize="small")


def pca_2d(h: np.ndarray) -> np.ndarray:
    """(N, 2): the rows of `h` projected on their two directions of largest variance."""
    h = np.asarray(h, dtype=np.float64)
    centred = h - h.mean(axis=0)
    _, vectors = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
    top = vectors[:, ::-1][:, :2]
    if top.shape[1] < 2:  # a one-wide representation: its only axis, and zeros
        top = np.pad(top, ((0, 0), (0, 2 - top.shape[1])))
    return centred @ top


def _draw_embedding(ax: Any, task: Any, hidden: np.ndarray, run: RunResult,
                    metrics: TaskMetrics, fold: int | None = None) -> None:
    """The PCA picture of the best run's `hidden`, titled with its seed (and its fold)."""
    points = pca_2d(hidden)
    labelled = task.y >= 0
    for c in range(task.num_classes):
        mask = labelled & (task.y == c)
        ax.scatter(*points[mask].T, s=4, color=COLORS[c % len(COLORS)], label=f"class {c}")
    if not labelled.all():  # a legend entry only for nodes that are there
        ax.scatter(*points[~labelled].T, s=4, color="lightgrey", label="no label")
    what = getattr(task, "embedding_name", "last hidden layer")  # a link task's: Z
    ax.set(xlabel="PC 1", ylabel="PC 2",
           title=f"{what} (PCA), {'' if fold is None else f'fold {fold}, '}seed {run.seed}: "
                 f"{_headline(metrics, run)}")
    ax.legend(loc="best", fontsize="x-small", markerscale=3)


def _save(fig: Any, path: Path, dpi: int) -> Path:
    made = make_parents(path)  # the output rule: missing folders are created (cli/outputs.py)
    try:
        fig.savefig(path, dpi=dpi, format=path.suffix.lower()[1:])
    except OSError as e:
        remove_empty(made)
        raise DataError(f"cannot write plot {path}: {e.strerror or e}") from None
    return path


def _draw_boundary(ax: Any, task: PointTask, run: RunResult, metrics: TaskMetrics) -> None:
    """The best model's decision regions with the train and test points."""
    config, d = task.config, task.data
    X_train, y_train, X_test, y_test = d.X_train, d.y_train, d.X_test, d.y_test
    model = task.restore(run.state)
    every = np.vstack([X_train, d.X_val, X_test])
    lo, hi = every.min(axis=0) - 0.5, every.max(axis=0) + 0.5
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], GRID_STEPS),
                         np.linspace(lo[1], hi[1], GRID_STEPS))
    regions = task.predict(model, np.c_[gx.ravel(), gy.ravel()]).reshape(gx.shape)
    num_classes = task.head.num_classes
    colors = [COLORS[c % len(COLORS)] for c in range(num_classes)]
    from matplotlib.colors import ListedColormap

    ax.contourf(gx, gy, regions, levels=np.arange(num_classes + 1) - 0.5,
                cmap=ListedColormap(colors), alpha=0.25)
    for c in range(num_classes):
        ax.scatter(*X_train[y_train == c].T, s=10, color=colors[c], label=f"train, class {c}")
        ax.scatter(*X_test[y_test == c].T, s=28, color=colors[c], marker="x",
                   label=f"test, class {c}")
    m = metrics.metric(metrics.summary_columns[0])
    ax.set_title(f"{run_title(config)}: {m.label} "
                 f"{m.format(run.scores.get(m.column, 0.0), digits=1)} (seed {run.seed}, "
                 f"best epoch {run.best_epoch})")
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.legend(loc="best", fontsize="small")


def _draw_losses(ax: Any, run: RunResult, losses: tuple[str, ...]) -> None:
    epochs = [row.epoch for row in run.rows]
    ax.plot(epochs, [row.loss for row in run.rows], label="training loss (mean over batches)")
    for column in losses:
        label = "validation loss" if column == "val_loss" else column.replace("_", " ")
        ax.plot(epochs, [row.scores[column] for row in run.rows], label=label)
    ax.axvline(run.best_epoch, color="grey", linestyle="--", label=f"best epoch {run.best_epoch}")
    positive = all(row.loss > 0 and all(row.scores[c] > 0 for c in losses) for row in run.rows)
    ax.set_yscale("log" if positive else "linear")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title("loss per epoch")
    ax.legend(loc="best", fontsize="small")


def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """A PNG: whole-graph step time and traced peak against Â's nnz, log-log, sparse and
    dense; scipy's bare Â·H is drawn as the reference (the floor no engine can go under)."""
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
        ax_t.plot(*zip(*kernel), "^:", color="gray",
                  label="reference: scipy Â·H alone\n(the product under each layer, no engine)")
    for ax, what, k_all, k_large in (
            (ax_t, "step time (ms)", result.time_exponent_all, result.time_exponent_large),
            (ax_m, "traced peak (MB)", result.memory_exponent_all, result.memory_exponent_large)):
        fits = (f"sparse ∝ nnz^{k_all:.2f} (all), ^{k_large:.2f} (nnz ≥ {FIT_MIN_NNZ:,})"
                if k_all is not None and k_large is not None else "")
        ax.set(xscale="log", yscale="log", xlabel="stored entries of Â (nnz)", ylabel=what,
               title=f"{what}\n{fits}")
        ax.grid(True, which="both", alpha=0.3)
    # one legend under both panels: inside either it would cover a curve (the dense one)
    fig.legend(*ax_t.get_legend_handles_labels(), loc="outside lower center", ncols=3,
               fontsize="small")
    fig.suptitle("GCN whole-graph training step (every layer on every node) on synthetic SBM "
                 "graphs: sparse vs dense")
    return _save(fig, Path(path), dpi=120)
