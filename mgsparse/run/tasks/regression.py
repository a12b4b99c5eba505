"""Graph regression on a set of molecules (solubility, FreeSolv, the user's own): one number
per molecule, predicted from its atoms and bonds.

The data is a `MoleculeSet`; a training step joins `train.batch_size` molecules into one
`GraphBatch` (block-diagonal, as graph classification does: `molecule_batch`), and the model
is graph classification's (`GraphClassifier`, of `model.kind`) with one output, the readout of
every level summed through linear heads. The batch carries what the molecules have (atom
features, and bond features to the layers that read them, `edge_attr`): the model reads what
the batch carries.

Targets. The model learns the target standardised on the run's training part,
z = (y − mean) / std (mean and std of the training molecules only, kept in the model as
buffers, so a saved model predicts in the target's units); every figure it reports is in the
target's own units (log S, kcal/mol): predictions are y' = z'·std + mean before RMSE, MAE and
R² are computed. `train.loss` is the loss on z: mse, l1 (mean |z' − z|) or huber (δ = 1, on z:
quadratic within one training standard deviation, linear beyond).

Metrics (`regression_scores`, in units): RMSE = √mean((y' − y)²), MAE = mean|y' − y|,
R² = 1 − Σ(y' − y)² / Σ(y − ȳ)² with ȳ the split's own mean (predicting that mean scores 0).
The best epoch is the one with the lowest validation RMSE.

Splits, by run (seed `train.seed + run`): a set with its own test part (the solubility SDF's
test file) keeps it, and holds out 10% of its training part, drawn by the seed, to pick the
best epoch; any other set is split at random 80 / 10 / 10 (train / validation / test, the
first 80% of a seeded permutation, then 10%, then the rest: MoleculeNet's random split).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mgsparse.catalog import MODELS
from mgsparse.config import Config
from mgsparse.data.moleculeset import MoleculeSet
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.graphnet import GraphBatch, GraphClassifier
from mgsparse.nn.module import Buffer, Module
from mgsparse.run.build import graph_layer
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.task import Batch, Metric, Scores, Task, TaskMetrics

EVAL_GRAPHS = 256  # molecules per evaluation batch (as graph classification's)
VAL_FRACTION = 0.1  # of a fixed training part, held out to pick the best epoch
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train, val, test of a random split
HUBER_DELTA = 1.0  # on standardised targets: one training standard deviation
REGRESSION_LOSSES = ("mse", "l1", "huber")

REGRESSION_METRICS = TaskMetrics(
    columns=(Metric("train_rmse", False, short="train", label="train RMSE"),
             Metric("val_rmse", False, short="val", label="val RMSE"),
             Metric("val_mae", False, short="v.mae", label="val MAE"),
             Metric("val_r2", True, short="v.r2", label="val R²"),
             Metric("test_rmse", False, short="test", label="test RMSE"),
             Metric("test_mae", False, short="t.mae", label="test MAE"),
             Metric("test_r2", True, short="t.r2", label="test R²")),
    select="val_rmse",
    summary=("test_rmse_mean", "test_rmse_std", "test_mae_mean", "test_mae_std",
             "test_r2_mean", "val_rmse_mean"),
    per_run=("train_rmse", "val_rmse", "test_rmse", "test_mae", "test_r2"),
    live=("train_rmse", "val_rmse", "val_mae", "val_r2"),
    legend="train/val: RMSE in the target's units · v.mae: val MAE · v.r2: val R²")

def regression_scores(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """RMSE, MAE and R² of predictions against targets, both in the target's units (the
    module docstring gives the formulas); R² is nan for fewer than 2 distinct targets."""
    pred, y = np.asarray(pred, dtype=np.float64), np.asarray(y, dtype=np.float64)
    err = pred - y
    spread = float(((y - y.mean()) ** 2).sum()) if y.size else 0.0
    return {"rmse": float(np.sqrt(np.mean(err ** 2))), "mae": float(np.mean(np.abs(err))),
            "r2": 1.0 - float((err ** 2).sum()) / spread if spread > 0 else float("nan")}


def regression_loss(pred: Tensor, target: np.ndarray, kind: str) -> Tensor:
    """The mean `kind` loss (mse, l1, huber with δ = `HUBER_DELTA`) of (B,) predictions."""
    if kind == "mse":
        return F.mse_loss(pred, target)
    diff = (pred - Tensor(target, dtype=pred.dtype)).abs()
    if kind == "l1":
        return diff.mean()
    inside = diff.clip(hi=HUBER_DELTA)  # huber: ½ m² + δ (|d| − m), m = min(|d|, δ)
    return (inside * inside * 0.5 + (diff - inside) * HUBER_DELTA).mean()


def molecule_batch(mols: MoleculeSet, idx: np.ndarray, dtype: Any = np.float32) -> GraphBatch:
    """The molecules `idx` as one `GraphBatch`, targets in `y` as they are stored; vectorised
    (`MoleculeSet.parts`); the bond features go with their edges where the batch takes them."""
    nodes, edges, node_ptr, _ = mols.parts(idx)
    shift = np.repeat(node_ptr[:-1] - mols.node_ptr[idx], mols.edges_per_graph[idx])
    batch = np.repeat(np.arange(len(idx), dtype=np.int64), mols.nodes_per_graph[idx])
    return GraphBatch(mols.x[nodes].astype(dtype, copy=False), mols.edge_index[:, edges] + shift,
                      batch, len(idx), mols.y[idx], dtype, edge_attr=mols.edge_attr[edges])


def split_indices(mols: MoleculeSet, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) molecule ids for one run (module docstring), each sorted."""
    rng = np.random.default_rng([seed, 44])
    if mols.test_mask is not None:
        rest, test = np.flatnonzero(~mols.test_mask), np.flatnonzero(mols.test_mask)
        held = rng.permutation(rest.size)[:max(1, round(VAL_FRACTION * rest.size))]
        val = np.sort(rest[held])
        return np.setdiff1d(rest, val), val, test
    order = rng.permutation(mols.num_graphs)
    n_train = int(SPLIT_FRACTIONS[0] * mols.num_graphs)
    n_val = max(1, int(SPLIT_FRACTIONS[1] * mols.num_graphs))
    return (np.sort(order[:n_train]), np.sort(order[n_train:n_train + n_val]),
            np.sort(order[n_train + n_val:]))


class MoleculeRegressor(Module):
    """A `GraphClassifier` with one output, and the training part's target mean and std as
    buffers: `forward` gives standardised predictions (B,), `in_units` turns them back."""

    def __init__(self, body: GraphClassifier, mean: float, std: float, dtype: Any):
        super().__init__()
        self.body = body
        self.target_mean = Buffer(np.array([mean]), dtype=np.float64)
        self.target_std = Buffer(np.array([std]), dtype=np.float64)

    def forward(self, batch: GraphBatch) -> Tensor:
        return self.body(batch).reshape(-1)

    def in_units(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(z, np.float64) * self.target_std.data[0] + self.target_mean.data[0]

    def embed(self, batch: GraphBatch) -> Tensor:
        return self.body.embed(batch)


class GraphRegressionTask(Task):
    """Graph regression on a `MoleculeSet`: batches of molecules, a split per run (module)."""

    metrics = REGRESSION_METRICS

    def __init__(self, config: Config, mols: MoleculeSet, dtype: Any = np.float32,
                 budget: int | None = None):
        if config.train.loss not in REGRESSION_LOSSES:
            raise ConfigError(f"train.loss {config.train.loss!r}: the target "
                              f"{mols.target!r} of {mols.name} is numeric; train it with "
                              f"{', '.join(REGRESSION_LOSSES)} (cross_entropy classifies a "
                              "class target such as SOL_classification)")
        self.config, self.mols, self.dtype, self.budget = config, mols, dtype, budget
        self.name, self.y = mols.name, np.asarray(mols.y, dtype=np.float64)
        edges = f", {mols.num_edge_features} bond features each"
        self.placed = PlacedGraph.held(Tensor(mols.x.astype(dtype, copy=False)), None, {
            "features": f"dense ({mols.num_nodes:,} atoms x {mols.num_features})",
            "adjacency": f"block-diagonal sparse per batch ({mols.num_graphs:,} molecules, "
                         f"{mols.num_edges:,} edges{edges})"},
            {"features": float(np.count_nonzero(mols.x)) / max(mols.x.size, 1),
             "adjacency": mols.num_edges / max(mols.num_nodes, 1) ** 2})
        self._eval: list[GraphBatch] | None = None
        self.begin_run(0)

    def begin_run(self, index: int) -> None:
        """Run `index`'s split (seed `train.seed + index`) and its training part's mean/std."""
        self.train_idx, self.val_idx, self.test_idx = split_indices(
            self.mols, self.config.train.seed + index)
        part = self.y[self.train_idx]
        self.mean, self.std = float(part.mean()), float(part.std()) or 1.0

    def build_model(self, rng: np.random.Generator) -> Module:
        m = self.config.model
        options = {key: getattr(m, key) for key in MODELS[m.kind].options}
        body = GraphClassifier(self.mols.num_features, m.hidden, 1, layers=m.layers,
                               dropout=m.dropout, activation=m.activation,
                               layer=graph_layer(m.kind), readout=m.readout,
                               edge_dim=self.mols.num_edge_features, rng=rng,
                               dtype=self.dtype, **options)
        return MoleculeRegressor(body, self.mean, self.std, self.dtype)

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        """`train.batch_size` molecules per step in a fresh order each epoch; a last batch of
        a single atom (FreeSolv's 513 training molecules hold methane, and 513 = 16·32 + 1)
        joins the one before it: a BatchNorm cannot train on one row."""
        order = self.train_idx[shuffle.permutation(len(self.train_idx))]
        size = self.config.train.batch_size or len(order)
        starts = list(range(0, len(order), size))
        if len(starts) > 1 and self.mols.nodes_per_graph[order[starts[-1]:]].sum() < 2:
            starts.pop()
        for start, stop in zip(starts, [*starts[1:], len(order)]):
            idx = order[start:stop]
            yield lambda idx=idx: self._step(model, idx)

    def _step(self, model: Module, idx: np.ndarray) -> tuple[Tensor, int]:
        batch = molecule_batch(self.mols, idx, self.dtype)
        z = (self.y[idx] - model.target_mean.data[0]) / model.target_std.data[0]
        return regression_loss(model(batch), z.astype(self.dtype), self.config.train.loss), len(idx)

    def eval_batches(self) -> list[GraphBatch]:
        """Every molecule in chunks of `EVAL_GRAPHS`, built once per task."""
        if self._eval is None:
            ids = np.arange(self.mols.num_graphs)
            self._eval = [molecule_batch(self.mols, ids[s:s + EVAL_GRAPHS], self.dtype)
                          for s in range(0, len(ids), EVAL_GRAPHS)]
        return self._eval

    def predict(self, model: Module) -> np.ndarray:
        """(G,) every molecule's prediction in the target's units, eval mode, no graph kept."""
        model.eval()
        with no_grad():
            z = np.concatenate([model(b).data for b in self.eval_batches()])
        return model.in_units(z)

    def evaluate(self, model: Module) -> Scores:
        pred = self.predict(model)
        scores = {}
        for split, idx in (("train", self.train_idx), ("val", self.val_idx),
                           ("test", self.test_idx)):
            for name, value in regression_scores(pred[idx], self.y[idx]).items():
                scores[f"{split}_{name}"] = value
        return self.metrics.scores(**{c: scores[c] for c in self.metrics.names})

    def embedding(self, model: Module) -> np.ndarray:
        """(G, hidden): each molecule's readout of the last layer (the picture of a run)."""
        model.eval()
        with no_grad():
            return np.concatenate([model.embed(b).data for b in self.eval_batches()])


def molecule_task(config: Config, mols: MoleculeSet, budget: int | None = None) -> Task:
    """The task a molecule set's target asks for: regression for a numeric one, graph
    classification (of the same molecules, bond features included) for classes."""
    if mols.is_regression:
        return GraphRegressionTask(config, mols, budget=budget)
    if config.train.loss != "cross_entropy":
        raise ConfigError(f"train.loss {config.train.loss!r}: the target {mols.target!r} of "
                          f"{mols.name} holds classes ({', '.join(mols.classes)}); train it "
                          "with cross_entropy")
    from mgsparse.run.tasks.graphs import GraphClassificationTask

    task = GraphClassificationTask(config, mols.graphset(), budget=budget)
    task.mols = mols  # how to featurise new molecules (`mgsparse predict --molecules`)
    return task
