"""Training on point clouds (moons, circles, blobs): an MLP fed by mini-batches, no graph.

The epoch loop, early stopping, best-validation parameters, alarms and memory sampling are
`mgsparse.train`'s (`run_epochs`, `repeat_runs`), so a point-cloud run reports exactly what a
GCN run reports. What differs is the epoch: instead of one full-graph step it is one pass of
shuffled mini-batches (`DataLoader`), each a forward, a loss, a backward, gradient clipping and
an optimizer step. An epoch's loss is the mean over its samples; its gradient norm is the
largest pre-clip norm among its batches (the one the clipping alarm cares about).

The head decides the loss and the prediction:
    softmax: C outputs, cross_entropy (or mse on the softmax), predict argmax;
    sigmoid: 1 output for two classes (C one-vs-rest outputs otherwise), bce with logits
             (or mse on the sigmoid), predict logit > 0 (argmax for C outputs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mgsparse.config import POINT_CLOUD_DATASETS, Config, DatasetConfig
from mgsparse.data.loader import DataLoader, TensorDataset
from mgsparse.data.synthetic import make_blobs, make_circles, make_moons
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.monitor import MemoryReport, MemoryTracer, finite
from mgsparse.nn import functional as F
from mgsparse.nn.models import MLP
from mgsparse.optim import Optimizer, clip_grad_norm_
from mgsparse.problem import build_optimizer
from mgsparse.train import (
    EpochCallback,
    RunResult,
    TrainResult,
    repeat_runs,
    run_epochs,
    trace_step,
)

PLACEMENT = {"features": "dense (point cloud)"}

# ---------------------------------------------------------------- data


def load_points(ds: DatasetConfig) -> tuple[np.ndarray, ...]:
    """(X_train, y_train, X_val, y_val, X_test, y_test) of the point cloud `ds` names.

    `num_samples` points are generated from `ds.seed` (already shuffled by the generator),
    then split in order: train first, then `num_val` validation, then `num_test` test points.
    `noise` is the Gaussian noise of moons and circles and the spread of each blob; blobs
    have `num_classes` centres. X is float32 (n, 2), y int64 (n,).
    """
    if ds.name == "moons":
        X, y = make_moons(ds.num_samples, noise=ds.noise, seed=ds.seed)
    elif ds.name == "circles":
        X, y = make_circles(ds.num_samples, noise=ds.noise, seed=ds.seed)
    elif ds.name == "blobs":
        X, y = make_blobs(ds.num_samples, centers=ds.num_classes, std=ds.noise, seed=ds.seed)
    else:
        raise ConfigError(f"dataset {ds.name!r} is not a point cloud "
                          f"(point clouds: {', '.join(POINT_CLOUD_DATASETS)})")
    num_train = ds.num_samples - ds.num_val - ds.num_test
    if num_train < 1 or ds.num_val < 1:
        raise ConfigError(f"dataset {ds.name!r}: need at least one training and one validation "
                          f"point (num_samples {ds.num_samples}, num_val {ds.num_val}, "
                          f"num_test {ds.num_test})")
    a, b = num_train, num_train + ds.num_val
    return X[:a], y[:a], X[a:b], y[a:b], X[b:], y[b:]


def num_point_classes(ds: DatasetConfig) -> int:
    """Moons and circles have two classes; blobs have `num_classes` (one per centre)."""
    return ds.num_classes if ds.name == "blobs" else 2


# ---------------------------------------------------------------- model and head


@dataclass(frozen=True)
class PointHead:
    """How logits (B, num_outputs) become a loss against integer labels, and a prediction."""

    head: str  # softmax | sigmoid
    loss: str  # cross_entropy | bce | mse
    num_classes: int

    @property
    def num_outputs(self) -> int:
        return 1 if self.head == "sigmoid" and self.num_classes == 2 else self.num_classes

    def targets(self, y: np.ndarray, dtype) -> np.ndarray:
        """0/1 targets (B, num_outputs): the label itself for one output, one-hot otherwise."""
        if self.num_outputs == 1:
            return y.astype(dtype).reshape(-1, 1)
        return np.eye(self.num_outputs, dtype=dtype)[y]

    def loss_fn(self, logits: Tensor, y: np.ndarray) -> Tensor:
        if self.loss == "cross_entropy":
            return F.cross_entropy(logits, y)
        target = self.targets(y, logits.dtype)
        if self.loss == "bce":
            return F.binary_cross_entropy_with_logits(logits, target)
        probs = logits.softmax(-1) if self.head == "softmax" else logits.sigmoid()
        return F.mse_loss(probs, target)

    def predict(self, logits: np.ndarray) -> np.ndarray:
        """Class ids (B,): logit > 0 for a single sigmoid output, argmax otherwise."""
        if self.num_outputs == 1:
            return (logits[:, 0] > 0).astype(np.int64)
        return logits.argmax(axis=1)


def build_point_model(config: Config, rng: np.random.Generator) -> tuple[MLP, PointHead]:
    """The MLP `config.model` describes, sized for 2-D points and the head's outputs."""
    m = config.model
    head = PointHead(m.head, config.train.loss, num_point_classes(config.dataset))
    model = MLP(2, m.hidden, head.num_outputs, layers=m.layers, dropout=m.dropout,
                activation=m.activation, rng=rng)
    return model, head


def point_loader(config: Config, X: np.ndarray, y: np.ndarray, seed: int) -> DataLoader:
    """Shuffled mini-batches from their own generator, so shuffling never shifts the init."""
    batch_size = config.train.batch_size or len(y)
    return DataLoader(TensorDataset(X, y), batch_size=batch_size, shuffle=True,
                      seed=np.random.default_rng([seed, 1]))


# ---------------------------------------------------------------- one epoch


def train_epoch(model: MLP, head: PointHead, loader: DataLoader, optimizer: Optimizer,
                clip: float | None) -> tuple[float, float]:
    """One pass of mini-batches. Returns (mean loss per sample, largest pre-clip grad norm);
    a non-finite batch ends the pass at once and is returned as is (the loop calls it
    divergence), without an optimizer step."""
    model.train()
    params = model.parameters()
    total, count, largest = 0.0, 0, 0.0
    for xb, yb in loader:
        loss = head.loss_fn(model(Tensor(xb)), yb)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = clip_grad_norm_(params, clip if clip else np.inf)
        value = float(loss.data)
        if not (finite(value) and finite(grad_norm)):
            return value, float(grad_norm)
        optimizer.step()
        total, count = total + value * len(yb), count + len(yb)
        largest = max(largest, float(grad_norm))
    return total / count, largest


def evaluate_points(model: MLP, head: PointHead, data: tuple[np.ndarray, ...]) -> dict[str, float]:
    """Validation loss and the accuracies on the three splits, without building a graph."""
    X_train, y_train, X_val, y_val, X_test, y_test = data
    model.eval()
    with no_grad():
        val_logits = model(Tensor(X_val))
        val_loss = float(head.loss_fn(val_logits, y_val).data)
        train_pred = head.predict(model(Tensor(X_train)).data)
        test_pred = head.predict(model(Tensor(X_test)).data)
    return {
        "val_loss": val_loss,
        "train_acc": F.accuracy(train_pred, y_train),
        "val_acc": F.accuracy(head.predict(val_logits.data), y_val),
        "test_acc": F.accuracy(test_pred, y_test),
    }


# ---------------------------------------------------------------- runs


def fit_points_run(config: Config, data: tuple[np.ndarray, ...], seed: int,
                   tracer: MemoryTracer, on_epoch: EpochCallback | None = None,
                   run_index: int = 0,
                   should_stop: Callable[[], bool] | None = None) -> RunResult:
    """Train one MLP from `seed` (init and shuffling); keep the lowest-validation-loss params."""
    model, head = build_point_model(config, np.random.default_rng(seed))
    optimizer = build_optimizer(config.optim, model)
    loader = point_loader(config, data[0], data[1], seed)
    clip = config.train.grad_clip_norm
    return run_epochs(config, model, seed, tracer,
                      step=lambda: train_epoch(model, head, loader, optimizer, clip),
                      evaluate_model=lambda: evaluate_points(model, head, data),
                      on_epoch=on_epoch, run_index=run_index, should_stop=should_stop)


def fit_points(config: Config, on_epoch: EpochCallback | None = None,
               on_run_end: Callable[[TrainResult], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> TrainResult:
    """`config.train.runs` runs on the point cloud `config.dataset` names (seeds seed, seed+1,
    …); the same TrainResult, callbacks and stopping rules as `mgsparse.train.fit`."""
    data = load_points(config.dataset)

    def one_run(seed: int, tracer: MemoryTracer, index: int) -> RunResult:
        return fit_points_run(config, data, seed, tracer, on_epoch, index, should_stop)

    return repeat_runs(config, dict(PLACEMENT), one_run, on_run_end)


# ---------------------------------------------------------------- after training


def restore_point_model(config: Config, state: dict[str, np.ndarray]) -> tuple[MLP, PointHead]:
    """The model of a finished run, from its saved parameters (e.g. `RunResult.state`)."""
    model, head = build_point_model(config, np.random.default_rng(0))
    model.load_state_dict(state)
    return model.eval(), head


def predict_points(model: MLP, head: PointHead, X: np.ndarray) -> np.ndarray:
    """Class ids (n,) for points X (n, 2): e.g. a grid, to draw the decision boundary."""
    model.eval()
    with no_grad():
        return head.predict(model(Tensor(np.asarray(X, dtype=np.float32))).data)


def point_step_loss(config: Config) -> Tensor:
    """The loss of the first training step of run 0: the first shuffled mini-batch through a
    fresh model, graph kept (for drawing it)."""
    data = load_points(config.dataset)
    model, head = build_point_model(config, np.random.default_rng(config.train.seed))
    xb, yb = next(iter(point_loader(config, data[0], data[1], config.train.seed)))
    model.train()
    return head.loss_fn(model(Tensor(xb)), yb)


def measure_points_memory(config: Config) -> MemoryReport:
    """Where one mini-batch step's memory goes (the point-cloud twin of `measure_memory`)."""
    data = load_points(config.dataset)
    model, head = build_point_model(config, np.random.default_rng(config.train.seed))
    optimizer = build_optimizer(config.optim, model)
    xb, yb = next(iter(point_loader(config, data[0], data[1], config.train.seed)))
    return trace_step(model, optimizer, lambda: head.loss_fn(model(Tensor(xb)), yb),
                      adjacency=0, features=int(xb.nbytes))
