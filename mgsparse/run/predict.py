"""`mgsparse predict`: a finished run's model put to use — classes, probabilities, embeddings.

The model is rebuilt as `mgsparse evaluate` rebuilds it (the resolved config in metrics.json
and a run's best parameters) and run once, in eval mode and without a graph of gradients,
on the whole graph: the logits Z (N, C) give each node's predicted class argmax_c Z[i, c]
and its probabilities softmax(Z[i]); the embedding is what the last layer reads
(`model.embed`, (N, hidden)). The same rows the loop scores, so the argmax accuracy on the
test rows is `evaluate`'s test accuracy.

Inductive use (`graph`): the saved model on another graph with the same features, e.g. a
GraphSAGE trained on one graph scoring a new one. Only the dataset section of the other
config is read; the model, its operand and the way it runs (full batch, layer-wise
inference of a sampled run) are the saved run's. A model bound to its training graph (a GCN
that learns its edge weights) cannot, and says so.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mgsparse.config import Config
from mgsparse.data.atomic import atomic_write
from mgsparse.data.user import load_node_ids
from mgsparse.engine import no_grad
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.nn.module import Module
from mgsparse.run.checkpoint import METRICS, read_params, saved_runs
from mgsparse.run.kinds import make_task
from mgsparse.run.task import Progress, Task
from mgsparse.run.tasks.nodes import NodeTask

SPLITS = ("train", "val", "test", "all")


@dataclass(frozen=True)
class Predictions:
    """One saved run's outputs on the chosen nodes: ids (K,), classes (K,), probs (K, C) and
    the last hidden layer (K, hidden) when asked for."""

    run: int
    seed: int
    nodes: np.ndarray
    classes: np.ndarray
    probs: np.ndarray
    embeddings: np.ndarray | None = None

    def csv(self) -> str:
        """node, pred, p0 … p<C-1>: one line per node, probabilities to 8 significant digits."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["node", "pred", *(f"p{c}" for c in range(self.probs.shape[1]))])
        for node, pred, p in zip(self.nodes.tolist(), self.classes.tolist(), self.probs):
            writer.writerow([node, pred, *(f"{v:.8g}" for v in p)])
        return buffer.getvalue()


def saved_run(out_dir: str | Path, run: int | None = None) -> tuple[Config, dict, dict]:
    """(config, metrics.json's entry of the run, its parameters): `run`, or the first run
    that kept parameters. A folder that does not read back whole is a damaged one."""
    path = Path(out_dir) / METRICS
    config, saved = saved_runs(out_dir)
    chosen = next((r for r in saved if run is None or r["run"] == run), None)
    if chosen is None:
        raise ConfigError(f"--run {run}: {path} kept parameters of runs "
                          f"{[r['run'] for r in saved]}")
    return config, chosen, read_params(out_dir, chosen["params"])


def _restore(task: Task, state: dict, where: Path) -> Module:
    try:
        return task.restore(state)
    except MgsparseError as e:  # keys or shapes that are not this config's model
        raise DataError(f"{where} does not fit the model it was saved with: {e}") from None


def _other_graph(config: Config, graph: Config, trained: Task,
                 progress: Progress | None) -> Task:
    """The saved run's task on `graph`'s dataset: same model, operand and way of running."""
    if config.model.learn_edge_weight:
        raise ConfigError("--graph: a GCN that learns its edge weights holds one weight per "
                          "edge of the graph it trained on, so it cannot score another graph")
    task = make_task(dataclasses.replace(config, dataset=graph.dataset), progress)
    if task.num_features != trained.num_features:
        raise ConfigError(f"--graph {graph.source}: its nodes have {task.num_features} "
                          f"features, the saved model reads {trained.num_features}")
    return task


def select_nodes(task: Task, split: str) -> np.ndarray:
    """The node ids of a split (train, val, test), every node (all), or those a file lists."""
    if split == "all":
        return np.arange(task.num_nodes)
    if split in SPLITS:
        return dict(zip(SPLITS, task.splits))[split]
    if not Path(split).is_file():
        raise ConfigError(f"--split {split!r} is not one of {', '.join(SPLITS)} nor a file of "
                          "node ids")
    return load_node_ids(split, task.num_nodes)[0]


def predict_saved(out_dir: str | Path, split: str = "test", graph: Config | None = None,
                  run: int | None = None, embeddings: bool = False,
                  progress: Progress | None = None) -> Predictions:
    """A saved run's classes and probabilities on `split`'s nodes of its own graph or, with
    `graph`, of another graph with the same features (and the embeddings, if asked)."""
    config, entry, state = saved_run(out_dir, run)
    task = make_task(config, progress)
    if not isinstance(task, NodeTask):
        raise ConfigError(f"predict scores the nodes of a graph; {config.dataset.name!r} "
                          "has none")
    model = _restore(task, state, Path(out_dir) / entry["params"])
    if graph is not None:
        task = _other_graph(config, graph, task, progress)
    nodes = select_nodes(task, split)
    with no_grad():
        logits = np.asarray(task.logits(model.eval()).data, np.float64)[nodes]
    z = np.exp(logits - logits.max(axis=1, keepdims=True))  # softmax, overflow-safe
    hidden = None
    if embeddings:
        hidden = task.embedding(model)
        if hidden is None:
            raise ConfigError("--embeddings: a sampled run scores layer by layer and keeps no "
                              "hidden layer of the whole graph")
        hidden = hidden[nodes]
    return Predictions(entry["run"], entry["seed"], nodes, logits.argmax(axis=1),
                       z / z.sum(axis=1, keepdims=True), hidden)


def write_predictions(predictions: Predictions, out: str | Path,
                      embeddings: str | Path | None = None) -> None:
    """The CSV (and the embeddings' .npy), each written whole or not at all, their folders
    created as `mkdir -p` would."""
    try:
        for path in (out, embeddings):
            if path is not None:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda f: f.write(predictions.csv()))
        if embeddings is not None and predictions.embeddings is not None:
            atomic_write(embeddings, lambda f: np.save(f, predictions.embeddings), "wb")
    except OSError as e:
        raise DataError(f"cannot write {e.filename or out}: {e.strerror or e}") from None
