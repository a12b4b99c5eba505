"""`mgsparse predict`: a finished run's model put to use — classes, probabilities, pair scores,
embeddings.

The model is rebuilt as `mgsparse evaluate` rebuilds it (the resolved config in metrics.json
and a run's best parameters) and run once, in eval mode and without a graph of gradients;
its outputs are read on the rows the loop scores, so a metric of them on the test rows is
`evaluate`'s.

- Node classification: the logits Z (N, C) of the whole graph give each node's predicted
  class argmax_c Z[i, c] and its probabilities softmax(Z[i]); the embedding is what the last
  layer reads (`model.embed`, (N, hidden)). Ids are the dataset's own, rows in their order,
  whatever order `dataset.reorder` trained in (`NodeTask.user_ids`, `run_rows`).
- Graph classification: the same, one row per graph of the set (ids are positions in the
  `GraphSet`), the splits those of the run's own fold (`Task.begin_run`). The embedding is
  what the linear heads read: the readout of every level side by side,
  [r⁰ | r¹ | … | rᴸ] (G, F + L·hidden), so that logits = Σ_l Wˡ·rˡ + cˡ.
- Link prediction: the held-out pairs of a split (its edges, then its fixed non-edges) or
  the pairs of a file, each with the edge probability σ(s) of the decoder's logit s on the
  encoder's Z of the training graph; the embedding is Z (N, latent), μ for a VGAE.

Inductive use (`graph`): the saved model on another dataset with the same features, e.g. a
GraphSAGE trained on one graph scoring a new one, or a GIN on another set of graphs. Only the
dataset section of the other config is read; the model, its operand and the way it runs (full
batch, layer-wise inference of a sampled run) are the saved run's. A model bound to its
training graph (a GCN that learns its edge weights) cannot, and says so; nor can a link run,
whose held-out pairs belong to the graph it split.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mgsparse.catalog import DATASETS
from mgsparse.config import Config
from mgsparse.data.atomic import atomic_write
from mgsparse.data.user import load_node_ids, load_pairs
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError, DataError, InputFileError, MgsparseError
from mgsparse.nn.module import Module
from mgsparse.run.checkpoint import METRICS, read_params, saved_runs
from mgsparse.run.kinds import make_task
from mgsparse.run.task import Progress, Task
from mgsparse.run.tasks.graphs import GraphClassificationTask
from mgsparse.run.tasks.links import EVAL_SPLITS, LinkTask
from mgsparse.run.tasks.nodes import NodeTask

SPLITS = ("train", "val", "test", "all")


@dataclass(frozen=True)
class Predictions:
    """One saved run's outputs on the chosen nodes (or graphs, `unit`): ids (K,), classes
    (K,), probs (K, C) and the embeddings (K, width) when asked for; `fold`: the fold the run
    is in a k-fold series (run i is fold i), None otherwise."""

    run: int
    seed: int
    ids: np.ndarray
    classes: np.ndarray
    probs: np.ndarray
    embeddings: np.ndarray | None = None
    unit: str = "node"
    fold: int | None = None

    @property
    def rows(self) -> int:
        return len(self.ids)

    def csv(self) -> str:
        """node (or graph), pred, p0 … p<C-1>: one line each, probabilities to 8 significant
        digits."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([self.unit, "pred", *(f"p{c}" for c in range(self.probs.shape[1]))])
        for i, pred, p in zip(self.ids.tolist(), self.classes.tolist(), self.probs):
            writer.writerow([i, pred, *(f"{v:.8g}" for v in p)])
        return buffer.getvalue()


@dataclass(frozen=True)
class PairScores:
    """A link run's edge probabilities σ(s) (P,) of node pairs (2, P), their labels (P,: 1 an
    edge, 0 a held-out non-edge) for a split's pairs, and Z (N, latent) when asked for."""

    run: int
    seed: int
    pairs: np.ndarray
    scores: np.ndarray
    labels: np.ndarray | None = None
    embeddings: np.ndarray | None = None
    unit: str = "pair"

    @property
    def rows(self) -> int:
        return len(self.scores)

    def csv(self) -> str:
        """src, dst, [label,] score: one line per pair, the score as the float64 it is (its
        shortest exact form), so the ranking metrics of the file are the run's."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        labels = [] if self.labels is None else [self.labels.tolist()]
        writer.writerow(["src", "dst", *(["label"] if labels else []), "score"])
        for row in zip(*self.pairs.tolist(), *labels, self.scores.tolist()):
            writer.writerow([*row[:-1], repr(row[-1])])
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


def restore_saved(task: Task, state: dict, where: Path) -> Module:
    """The task's model with the saved parameters; a file that does not fit is damaged."""
    try:
        return task.restore(state)
    except MgsparseError as e:  # keys or shapes that are not this config's model
        raise DataError(f"{where} does not fit the model it was saved with: {e}") from None


def predict_saved(out_dir: str | Path, split: str | None = None, graph: Config | None = None,
                  run: int | None = None, embeddings: bool = False,
                  progress: Progress | None = None,
                  pairs: str | Path | None = None) -> Predictions | PairScores:
    """A saved run's classes and probabilities on `split`'s nodes or graphs (default test)
    of its own dataset or, with `graph`, of another with the same features; a link run's
    scores of `split`'s held-out pairs or of the pairs in the file `pairs`. The embeddings
    too, if asked."""
    config, entry, state = saved_run(out_dir, run)
    task = make_task(config, progress)
    if pairs is not None and not isinstance(task, LinkTask):
        raise ConfigError(f"--pairs scores node pairs with a link run (task: link); this run "
                          f"classifies {config.dataset.name!r}")
    if not isinstance(task, NodeTask | GraphClassificationTask | LinkTask):
        raise ConfigError(f"predict scores the nodes of a graph, the graphs of a set or the "
                          f"node pairs of a link run; {config.dataset.name!r} has none")
    task.begin_run(entry["run"])  # a fold's own splits
    model = restore_saved(task, state, Path(out_dir) / entry["params"])
    if isinstance(task, LinkTask):
        if graph is not None:
            raise ConfigError("--graph: a link run scores pairs of the graph it split into "
                              "training and held-out edges; it cannot score another graph")
        return _pair_scores(task, model, entry, split, pairs, embeddings)
    if graph is not None:
        task = _other_graph(config, graph, task, progress)
    return _classes(task, model, entry, split or "test", embeddings)


# --- classes of nodes or graphs -------------------------------------------------------------

def _other_graph(config: Config, graph: Config, trained: Task,
                 progress: Progress | None) -> Task:
    """The saved run's task on `graph`'s dataset: same model, operand and way of running;
    a set of graphs without folds (its train/val/test the seeded 80/10/10 split)."""
    if config.model.learn_edge_weight:
        raise ConfigError("--graph: a GCN that learns its edge weights holds one weight per "
                          "edge of the graph it trained on, so it cannot score another graph")
    kinds = {"graph": "a graph", "graphs": "a set of graphs", "points": "a point cloud"}
    theirs, ours = DATASETS[graph.dataset.name].kind, DATASETS[config.dataset.name].kind
    if theirs != ours:
        raise ConfigError(f"--graph {graph.source}: {graph.dataset.name!r} is {kinds[theirs]}, "
                          f"the saved run read {kinds[ours]}")
    train = dataclasses.replace(config.train, folds=None)
    task = make_task(dataclasses.replace(config, dataset=graph.dataset, train=train), progress)
    if task.placed.num_features != trained.placed.num_features:
        raise ConfigError(f"--graph {graph.source}: its nodes have {task.placed.num_features} "
                          f"features, the saved model reads {trained.placed.num_features}")
    return task


def select_rows(task: Task, split: str) -> np.ndarray:
    """The node (or graph) ids of a split (train, val, test), all of them, or those a file
    lists (one a line; a bad line is a usage error naming it): the user's ids, those of the
    dataset's own files whatever `dataset.reorder` numbered the run's rows by."""
    graphs = isinstance(task, GraphClassificationTask)
    count, unit = (task.graphs.num_graphs, "graph") if graphs else (task.num_nodes, "node")
    if split == "all":
        return np.arange(count)
    if split in SPLITS:
        rows = dict(zip(SPLITS, (task.train_idx, task.val_idx, task.test_idx)))[split]
        return rows if graphs else np.sort(task.user_ids(rows))  # the file's ids, ascending
    if not Path(split).is_file():
        raise ConfigError(f"--split {split!r} is not one of {', '.join(SPLITS)} nor a file of "
                          f"{unit} ids")
    try:
        return load_node_ids(split, count, unit)[0]
    except DataError as e:  # the user's own file: a usage error
        raise InputFileError(str(e)) from None


def _classes(task: Task, model: Module, entry: dict, split: str,
             embeddings: bool) -> Predictions:
    graphs = isinstance(task, GraphClassificationTask)
    ids = select_rows(task, split)
    rows = ids if graphs else task.run_rows(ids)  # the run's rows of the user's ids
    with no_grad():
        logits = task.logits(model.eval())
    logits = np.asarray(logits.data if isinstance(logits, Tensor) else logits, np.float64)[rows]
    z = np.exp(logits - logits.max(axis=1, keepdims=True))  # softmax, overflow-safe
    hidden = None
    if embeddings:
        hidden = head_inputs(task, model) if graphs else task.embedding(model)
        if hidden is None:
            raise ConfigError("--embeddings: a sampled run scores layer by layer and keeps no "
                              "hidden layer of the whole graph")
        hidden = hidden[rows]
    return Predictions(entry["run"], entry["seed"], ids, logits.argmax(axis=1),
                       z / z.sum(axis=1, keepdims=True), hidden, "graph" if graphs else "node",
                       entry["run"] if getattr(task, "folds", None) else None)


def head_inputs(task: GraphClassificationTask, model: Module) -> np.ndarray:
    """(G, F + L·hidden): each graph's readout of every level, [r⁰ | … | rᴸ], what the
    classifier's linear heads read (eval mode: no dropout between them)."""
    model.eval()
    with no_grad():
        return np.concatenate([
            np.hstack([np.asarray(batch.pool(h, model.readout).data) for h in model.levels(batch)])
            for _, batch in task.eval_batches()])


# --- scores of node pairs -------------------------------------------------------------------

def _pair_scores(task: LinkTask, model: Module, entry: dict, split: str | None,
                 pairs: str | Path | None, embeddings: bool) -> PairScores:
    """σ of the logits evaluate scores (`LinkTask.pair_scores`: the same one decoding) for a
    split's pairs; one more encoding and decoding for the pairs of a file."""
    if pairs is not None:
        if split is not None:
            raise ConfigError("--pairs and --split: give one (the pairs of a file, or a "
                              "split's held-out pairs)")
        chosen, labels = load_pairs(pairs, task.placed.num_nodes), None
        model.eval()
        with no_grad():
            z = model.encode(task.features, *task.graph_args())[0]
            logits = np.asarray(model.decode(z, chosen).data, np.float64)
    else:
        split = split or "test"
        if split not in EVAL_SPLITS:
            raise ConfigError(f"--split {split!r}: a link run holds out {' and '.join(EVAL_SPLITS)}"
                              " pairs; score other pairs with --pairs FILE")
        scored = task.pair_scores(model)
        pos, neg = scored[f"{split}_pos"], scored[f"{split}_neg"]
        chosen = np.concatenate([getattr(task.split, f"{split}_{k}") for k in ("pos", "neg")],
                                axis=1)
        logits = np.r_[pos, neg]
        labels = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
    hidden = task.embedding(model) if embeddings else None
    from scipy.special import expit  # 40 ms to load: not at every command's start

    return PairScores(entry["run"], entry["seed"], chosen, expit(logits), labels, hidden)


def write_predictions(predictions: Predictions | PairScores, out: str | Path,
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
