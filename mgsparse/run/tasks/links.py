"""Link prediction on one graph (`task: link`): which held-out node pairs are edges.

The graph's edges are split once (`mgsparse.data.links.split_edges`, seeded by `link.seed`):
the validation and test edges, and as many fixed non-edges each, are held out; the encoder
reads the training graph only (its Â, or its edge list), so no held-out edge reaches it.
A run is full batch: each epoch encodes every node once, Z = encoder(X, Â_train), scores the
training edges and `link.neg_ratio` times as many non-edges drawn anew from the run's
shuffle generator, and steps on

    loss = BCE(s(pos), 1) + BCE(s(neg), 0)  [+ KL / N for a VGAE]

(each term a mean, PyG's `recon_loss`); with `link.negatives: all`, every entry of
A_train + I instead, positives weighted up by (N² − E)/E from the E training edges (Kipf's
code: `nn.gae.full_reconstruction_loss`, N² logits per step, for small graphs). The scores are ROC-AUC and average precision of the
validation and test pairs (`mgsparse.run.metrics`), the validation BCE, and Hits@K with
`link.hits_k`; the highest validation AUC picks the best epoch.

Sampled mini-batches of pairs (blocks around a batch's endpoints) are designed in
docs/link-prediction.md and not built: `task: link` with `train.batch_size` is a config error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.catalog import DATASETS
from mgsparse.config import Config, DatasetConfig
from mgsparse.data import Graph, user
from mgsparse.data.links import EdgeSplit, split_edges
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.decode import InnerProductDecoder, MLPDecoder
from mgsparse.nn.gae import GAE, VGAE, full_reconstruction_loss
from mgsparse.nn.module import Module
from mgsparse.run.build import build_model
from mgsparse.run.metrics import average_precision, hits_at_k, roc_auc
from mgsparse.run.placed import PlacedGraph, load_graph
from mgsparse.run.task import Batch, Metric, Progress, Scores, Task, TaskMetrics
from mgsparse.run.tasks.nodes import operand_read

EVAL_SPLITS = ("val", "test")


def link_metrics(hits_k: int | None = None) -> TaskMetrics:
    """val_loss, val/test AUC and AP (and Hits@K with `hits_k`); the best epoch has the highest
    validation AUC; the summary gives the test scores' mean and std, then validation's. The
    scores are fractions in the files and percentages on screen, as the papers quote them."""
    names = ["auc", "ap"] + ([f"hits{hits_k}"] if hits_k else [])
    label = {"auc": "AUC", "ap": "AP", f"hits{hits_k}": f"Hits@{hits_k}"}
    columns = [Metric("val_loss", False, short="v.loss", label="val loss")]
    columns += [Metric(f"{s}_{n}", True, percent=True, short=f"{s} {label[n]}",
                       label=f"{s} {label[n]}") for s in EVAL_SPLITS for n in names]
    summary = tuple(f"test_{n}_{k}" for n in names for k in ("mean", "std"))
    return TaskMetrics(
        columns=tuple(columns), select="val_auc",
        summary=summary + tuple(f"val_{n}_mean" for n in names),
        live=tuple(f"val_{n}" for n in names) + ("val_loss",),
        legend="val AUC/AP: held-out edges against as many non-edges · v.loss: their BCE")


def load_link_graph(ds: DatasetConfig, progress: Progress | None = None) -> Graph:
    """The graph a link task reads: the dataset section's, through its source. A link task
    reads no labels and no node split, so your own files need only the edge list: they are
    read by `user.load_csv_graph` directly (the files source asks for labels, which node
    classification needs), with the smallest random node split, which nothing reads, when no
    node files are named."""
    if DATASETS[ds.name].source != "files":
        return load_graph(ds, progress)
    if ds.train_nodes is None:
        ds = dataclasses.replace(ds, split="random", num_train_per_class=1, num_val=0,
                                 num_test=1)
    return user.load_csv_graph(**user.config_kwargs(ds), name=Path(ds.edges).parent.name)


def bce_logits(scores: np.ndarray, target: float) -> float:
    """Mean binary cross-entropy of raw scores against one target, the stable form."""
    s = np.asarray(scores, dtype=np.float64)
    return float(np.mean(np.maximum(s, 0) - s * target + np.log1p(np.exp(-np.abs(s)))))


class LinkTask(Task):
    """Held-out edges of one graph, the training graph placed once for every epoch and run."""

    embedding_name = "node embeddings Z"  # what the picture of `embedding` projects

    def __init__(self, config: Config, graph: Graph, dtype: Any = np.float32,
                 budget: int | None = None):
        link = config.link
        self.config, self.name, self.budget, self.dtype = config, graph.name, budget, dtype
        if graph.edge_weight is not None:  # the encoders below read a 0/1 training graph
            raise ConfigError(f"task: link would ignore edge weights, and {graph.name}'s "
                              "edges carry weights (a third column in dataset.edges): link "
                              "prediction holds out and scores unweighted edges; drop the "
                              "column")
        self.split: EdgeSplit = split_edges(graph.edge_index, graph.num_nodes, link.val,
                                            link.test, link.seed, link.undirected)
        training = dataclasses.replace(graph, edge_index=self.split.train_graph,
                                       edge_weight=None)
        self.placed = PlacedGraph.from_graph(training, operand_read(config),
                                             config.sparse.sparsity_threshold, dtype, budget)
        _ = self.placed.operand  # every step reads the whole training graph: placed now
        sizes = self.split.sizes()
        self.placed.placement["held-out edges"] = (
            f"{sizes['val_pos']:,} val + {sizes['test_pos']:,} test (each with as many "
            f"non-edges), out of the training graph's {sizes['train_graph']:,} edges")
        self.y = np.asarray(graph.y, np.int64)  # node labels, for the embedding's picture
        self.num_classes = int(graph.num_classes)
        self.num_negatives = max(1, round(link.neg_ratio * sizes["train_pos"]))
        free = self.split.num_non_edges()
        if link.negatives == "sampled" and self.num_negatives > free:
            raise ConfigError(f"link.neg_ratio {link.neg_ratio:g} asks for "
                              f"{self.num_negatives:,} non-edges a step, but {graph.name}'s "
                              f"training graph has {free:,} (neg_ratio at most "
                              f"{free / sizes['train_pos']:.3g}); lower link.neg_ratio, or set "
                              "link.negatives: all to score every pair")
        self.metrics = link_metrics(link.hits_k)

    @property
    def features(self) -> Any:
        return self.placed.features

    def graph_args(self) -> tuple:
        """What the encoder reads after the features: the training graph's operand."""
        operand = self.placed.operand
        return () if operand is None else (operand,)

    def build_model(self, rng: np.random.Generator) -> Module:
        """A GAE (or VGAE) whose encoder is the model section's kind, `link.latent` wide."""
        m, link, f = self.config.model, self.config.link, self.placed.num_features
        kw = {"edge_index": self.placed.edge_index, "dtype": self.dtype}
        decoder = (InnerProductDecoder() if link.decoder == "inner" else
                   MLPDecoder(link.latent, m.hidden, rng=rng, dtype=self.dtype))
        if not link.variational:
            return GAE(build_model(m, f, link.latent, rng, **kw), decoder)
        body = build_model(dataclasses.replace(m, layers=m.layers - 1), f, m.hidden, rng, **kw)
        head = dataclasses.replace(m, layers=1)
        mu, logstd = (build_model(head, m.hidden, link.latent, rng, **kw) for _ in range(2))
        return VGAE(body, mu, logstd, decoder, m.activation, rng)

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        if self.config.link.negatives == "all":
            yield self._full_step(model)
            return
        negatives = self.split.sample_negatives(self.num_negatives, shuffle)
        positives = self.split.train_pos

        def step() -> tuple[Tensor, int]:
            z, regulariser = model.encode(self.features, *self.graph_args())
            pos, neg = model.decode(z, positives), model.decode(z, negatives)
            loss = (F.binary_cross_entropy_with_logits(pos, np.ones(pos.shape, pos.dtype))
                    + F.binary_cross_entropy_with_logits(neg, np.zeros(neg.shape, neg.dtype)))
            return (loss if regulariser is None else loss + regulariser), (
                positives.shape[1] + negatives.shape[1])
        yield step

    def _full_step(self, model: Module) -> Batch:
        """`link.negatives: all`: every entry of A_train + I scored (`full_reconstruction_loss`,
        Kipf's code), the inner product's logits only."""
        n = self.placed.num_nodes

        def step() -> tuple[Tensor, int]:
            z, regulariser = model.encode(self.features, *self.graph_args())
            loss = full_reconstruction_loss(z, self.split.train_graph)
            return (loss if regulariser is None else loss + regulariser), n * n
        return step

    def pair_scores(self, model: Module) -> dict[str, np.ndarray]:
        """Logits of every held-out pair set (val_pos, val_neg, test_pos, test_neg), eval mode:
        one encoding, one decoding of them all."""
        model.eval()
        sets = [f"{s}_{kind}" for s in EVAL_SPLITS for kind in ("pos", "neg")]
        pairs = [getattr(self.split, name) for name in sets]
        with no_grad():
            z = model.encode(self.features, *self.graph_args())[0]
            scores = np.asarray(model.decode(z, np.concatenate(pairs, axis=1)).data, np.float64)
        return dict(zip(sets, np.split(scores, np.cumsum([p.shape[1] for p in pairs])[:-1])))

    def evaluate(self, model: Module) -> Scores:
        s, k = self.pair_scores(model), self.config.link.hits_k
        values = {"val_loss": bce_logits(s["val_pos"], 1.0) + bce_logits(s["val_neg"], 0.0)}
        for split in EVAL_SPLITS:
            pos, neg = s[f"{split}_pos"], s[f"{split}_neg"]
            labels = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
            values[f"{split}_auc"] = roc_auc(labels, np.r_[pos, neg])
            values[f"{split}_ap"] = average_precision(labels, np.r_[pos, neg])
            if k:
                values[f"{split}_hits{k}"] = hits_at_k(pos, neg, k)
        return self.metrics.scores(**values)

    def embedding(self, model: Module) -> np.ndarray:
        """(N, latent): the node embeddings Z (μ for a VGAE), in eval mode."""
        model.eval()
        with no_grad():
            return np.asarray(model.embed(self.features, *self.graph_args()).data)
