"""Point clouds (moons, circles, blobs): an MLP on shuffled mini-batches, no graph.

An epoch is one pass of `DataLoader` mini-batches; its loss is the mean over its samples and
its gradient norm the largest pre-clip norm among its batches (the loop computes both from the
`Batch`es this task yields). The head decides the loss and the prediction:
    softmax: C outputs, cross_entropy (or mse on the softmax), predict argmax;
    sigmoid: 1 output for two classes (C one-vs-rest outputs otherwise), bce with logits
             (or mse on the sigmoid), predict logit > 0 (argmax for C outputs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mgsparse.catalog import DATASETS
from mgsparse.config import Config, DatasetConfig
from mgsparse.data import synthetic
from mgsparse.data.loader import DataLoader, TensorDataset
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.module import Module
from mgsparse.run.build import build_model
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.task import Batch, Scores, Task


@dataclass(frozen=True)
class PointSplits:
    """Train, validation and test points (X float32 (n, 2), y int64 (n,)) of one cloud."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def load_points(ds: DatasetConfig) -> PointSplits:
    """The point cloud `ds` names, generated from `ds.seed` (already shuffled), split in order:
    training points first, then `num_val` validation, then `num_test` test points. `noise` is
    the Gaussian noise of moons and circles and the spread of each blob."""
    facts = DATASETS[ds.name]
    make = getattr(synthetic, facts.maker)
    if facts.num_classes is None:  # blobs: as many centres as the config's classes
        X, y = make(ds.num_samples, centers=ds.num_classes, std=ds.noise, seed=ds.seed)
    else:
        X, y = make(ds.num_samples, noise=ds.noise, seed=ds.seed)
    a = ds.num_samples - ds.num_val - ds.num_test  # >= 1: the config checked it
    b = a + ds.num_val
    if ds.num_val < 1:
        raise ConfigError(f"dataset {ds.name!r}: need at least one validation point "
                          f"(dataset.num_val is {ds.num_val})")
    return PointSplits(X[:a], y[:a], X[a:b], y[a:b], X[b:], y[b:])


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


class PointTask(Task):
    """An MLP on a 2-D point cloud, trained on shuffled mini-batches (`train.batch_size`).
    Its placed data is the training points, held dense: no graph, no sparse form."""

    def __init__(self, config: Config):
        self.config, self.name = config, config.dataset.name
        self.data = load_points(config.dataset)
        num_classes = DATASETS[self.name].num_classes or config.dataset.num_classes
        self.head = PointHead(config.model.head, config.train.loss, num_classes)
        self.placed = PlacedGraph.held(self.data.X_train, None,
                                       {"features": "dense (point cloud)"}, {"features": 1.0})

    def build_model(self, rng: np.random.Generator) -> Module:
        return build_model(self.config.model, 2, self.head.num_outputs, rng)

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        d = self.data
        loader = DataLoader(TensorDataset(d.X_train, d.y_train),
                            batch_size=self.config.train.batch_size or len(d.y_train),
                            shuffle=True, seed=shuffle)
        for xb, yb in loader:
            yield lambda xb=xb, yb=yb: (self.head.loss_fn(model(Tensor(xb)), yb), len(yb))

    def evaluate(self, model: Module) -> Scores:
        d = self.data
        model.eval()
        with no_grad():
            val_logits = model(Tensor(d.X_val))
            val_loss = float(self.head.loss_fn(val_logits, d.y_val).data)
        return self.metrics.scores(
            val_loss=val_loss, train_acc=F.accuracy(self.predict(model, d.X_train), d.y_train),
            val_acc=F.accuracy(self.head.predict(val_logits.data), d.y_val),
            test_acc=F.accuracy(self.predict(model, d.X_test), d.y_test))

    def predict(self, model: Module, X: np.ndarray) -> np.ndarray:
        """Class ids (n,) for points X (n, 2): e.g. a grid, to draw the decision boundary."""
        model.eval()
        with no_grad():
            return self.head.predict(model(Tensor(np.asarray(X, dtype=np.float32))).data)
