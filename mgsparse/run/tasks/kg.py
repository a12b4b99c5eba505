"""Knowledge-graph completion (``dataset.name: umls | kinships | nations | triples``).

The triples (`mgsparse.data.sources.kg`) are indexed once from the training split. A model
(`mgsparse.nn.kgmodel.KGEModel`: entity and relation tables, one scorer of `nn.kge`, with
``kg.encoder: rgcn`` an R-GCN under them) answers queries (anchor, relation, ?). In the
reciprocal setting (``kg.reciprocal``, the default) every training triple (h, r, t) is two
queries, (h, r, ?) -> t and (t, r⁻¹, ?) -> h, r⁻¹ a relation of its own; otherwise the head
query asks the scorer's own inverse (`KGEModel.score_heads`). An epoch is the training
queries shuffled into batches of ``kg.batch_size``, each one step of (``kg.training``):

    1vsall     loss = CE(s(q, ·), t)                    every entity scored (Lacroix et al.)
    kvsall     loss = BCE(s(q, ·), (1−ε)·y + ε/N)       y the query's training tails (ConvE)
    negatives  loss = softplus(−s(q, t)) + Σ_k w_k·softplus(s(q, t_k))     K uniform t_k,
               w = softmax(α·s(q, t_k)) held constant (RotatE's self-adversarial; α = 0: 1/K)

plus ``kg.reg_weight``/B times the N3 (Σ|x|³) or L2 (Σx²) of the rows the batch reads. Each
evaluation ranks every validation and test triple's tail and head among all entities,
filtered (`mgsparse.run.ranking`); the highest validation MRR picks the best epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.data import load_section
from mgsparse.data.sources.kg_io import Triples
from mgsparse.engine import Tensor, concatenate, no_grad
from mgsparse.nn import functional as F
from mgsparse.nn import kge
from mgsparse.nn.kgmodel import COMPLEX, KGEModel, encode_names
from mgsparse.nn.module import Module
from mgsparse.nn.rgcn import relation_operand
from mgsparse.run.placed import PlacedGraph
from mgsparse.run.ranking import (
    HITS,
    both_directions,
    filtered_ranks,
    known_answers,
    query_keys,
    rank_metrics,
)
from mgsparse.run.task import Batch, Metric, Progress, Scores, Task, TaskMetrics

EVAL = {"val": "valid", "test": "test"}


def kg_metrics() -> TaskMetrics:
    """Filtered MRR and Hits@1/3/10 of the validation and test triples (tails and heads); the
    best validation MRR picks the epoch. MRR prints with 4 decimals, Hits@k as percentages."""
    columns = []
    for split in EVAL:
        columns.append(Metric(f"{split}_mrr", True, short=f"{split} MRR", label=f"{split} MRR"))
        columns += [Metric(f"{split}_hits{k}", True, percent=True, short=f"{split} H@{k}",
                           label=f"{split} Hits@{k}") for k in HITS]
    return TaskMetrics(
        columns=tuple(columns), select="val_mrr",
        summary=("test_mrr_mean", "test_mrr_std", *(f"test_hits{k}_mean" for k in HITS),
                 *(f"test_hits{k}_std" for k in HITS), "val_mrr_mean"),
        live=("val_mrr", "val_hits1", "val_hits10"),
        legend="val MRR, Hits@1, Hits@10: filtered ranks of each validation triple's tail "
               "and head among all entities")


def load_triples(config: Config, progress: Progress | None = None) -> Triples:
    return load_section(config.dataset, progress)


class KgTask(Task):
    """Triples indexed once; the training queries, the filter and the model's recipe."""

    def __init__(self, config: Config, triples: Triples, dtype: Any = np.float32):
        self.config, self.triples, self.dtype = config, triples, dtype
        self.name, kg = triples.name, config.kg
        self.num_entities, self.num_relations = triples.num_entities, triples.num_relations
        self.known = known_answers([triples.train, triples.valid, triples.test],
                                   self.num_entities, self.num_relations)
        self.train_known = known_answers([triples.train], self.num_entities, self.num_relations)
        anchors, rels, answers = both_directions(triples.train, self.num_relations)
        self.queries = (anchors, rels, answers)  # tail queries, then head queries (r + R)
        if kg.training == "kvsall":  # one query per distinct (anchor, relation)
            keys = np.unique(query_keys(anchors, rels, 2 * self.num_relations))
            self.queries = (keys // (2 * self.num_relations), keys % (2 * self.num_relations),
                            None)
        self.metrics = kg_metrics()
        self.placed = PlacedGraph.held(triples.train, None, self._placement(),
                                       {"triples": 1.0})

    def _placement(self) -> dict[str, str]:
        t, kg = self.triples, self.config.kg
        where = {"triples": f"{len(t.train):,} train / {len(t.valid):,} valid / "
                            f"{len(t.test):,} test, {t.num_entities:,} entities, "
                            f"{t.num_relations:,} relations",
                 "queries": f"{len(self.queries[0]):,} per epoch ({kg.training}; "
                            + ("reciprocal: each triple's tail and, via r⁻¹, its head)"
                               if kg.reciprocal else "tails, and heads via the scorer's "
                               "inverse)")}
        for note in t.notes:
            where.setdefault("dropped", note)
        return where

    # ------------------------------------------------------------ the model

    def build_model(self, rng: np.random.Generator) -> Module:
        kg = self.config.kg
        margin = kg.margin if kg.scorer in ("transe", "rotate") else 0.0
        model = KGEModel(self.num_entities, self.num_relations, kg.scorer, kg.dim,
                         reciprocal=kg.reciprocal, margin=margin, p_norm=kg.p_norm,
                         init_scale=kg.init_scale, rng=rng, dtype=self.dtype,
                         names=encode_names(self.triples.entities, self.triples.relations))
        if kg.encoder == "rgcn":
            model.add_encoder(self.graph_operand(), 2 * self.num_relations, kg.rgcn_layers,
                              kg.rgcn_bases, rng, self.dtype)
        return model

    def graph_operand(self) -> Any:
        """The R-GCN's operand over the training triples, each edge both ways: h → t of
        relation r and t → h of r + R (the self-loop is the layer's own W_0), built once."""
        if getattr(self, "_operand", None) is None:
            h, r, t = self.triples.train.T
            edges = np.stack([np.r_[h, t], np.r_[t, h]])
            self._operand = relation_operand(edges, np.r_[r, r + self.num_relations],
                                             self.num_entities, 2 * self.num_relations,
                                             self.dtype)
        return self._operand

    def scores(self, model: KGEModel, anchors: np.ndarray, rels: np.ndarray,
               candidates: np.ndarray | None = None) -> Tensor:
        """Scores of queries whose relations count inverses from R: one call when the model
        learned them, else the tail and head queries apart and stacked back in order."""
        if model.reciprocal:
            return model.score(anchors, rels, candidates)
        head = rels >= self.num_relations
        if not head.any() or head.all():
            rel = rels - self.num_relations * head
            return (model.score_heads(anchors, rel, candidates) if head.all()
                    else model.score(anchors, rel, candidates))
        order = np.r_[np.flatnonzero(~head), np.flatnonzero(head)]
        c = (lambda m: None) if candidates is None else (lambda m: candidates[m])
        parts = concatenate([model.score(anchors[~head], rels[~head], c(~head)),
                             model.score_heads(anchors[head], rels[head] - self.num_relations,
                                               c(head))], axis=0)
        return parts[np.argsort(order)]

    # ------------------------------------------------------------ training

    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        anchors, rels, answers = self.queries
        order = shuffle.permutation(len(anchors))
        size = self.config.kg.batch_size
        for start in range(0, len(order), size):
            rows = order[start:start + size]
            negatives = None
            if self.config.kg.training == "negatives":
                negatives = shuffle.integers(0, self.num_entities,
                                             (len(rows), self.config.kg.num_negatives))
            yield self._step(model, anchors[rows], rels[rows],
                             None if answers is None else answers[rows], negatives)

    def _step(self, model: KGEModel, a: np.ndarray, r: np.ndarray, t: np.ndarray | None,
              negatives: np.ndarray | None) -> Batch:
        kg = self.config.kg

        def step() -> tuple[Tensor, int]:
            if kg.training == "1vsall":
                loss = F.cross_entropy(self.scores(model, a, r), t)
            elif kg.training == "kvsall":
                loss = F.binary_cross_entropy_with_logits(self.scores(model, a, r),
                                                          self._targets(a, r))
            else:
                loss = self._negative_loss(model, a, r, t, negatives)
            return loss + self._regulariser(model, a, r, t), len(a)
        return step

    def _targets(self, a: np.ndarray, r: np.ndarray) -> np.ndarray:
        """(B, N) multi-hot training answers of each query, label-smoothed (ConvE)."""
        rows = self.train_known[query_keys(a, r, 2 * self.num_relations)]
        y = rows.toarray().astype(self.dtype)
        eps = self.config.kg.label_smoothing
        return (1.0 - eps) * y + eps / self.num_entities if eps else y

    def _negative_loss(self, model: KGEModel, a, r, t, negatives) -> Tensor:
        kg = self.config.kg
        pos = self.scores(model, a, r, t[:, None])  # (B, 1)
        neg = self.scores(model, a, r, negatives)  # (B, K)
        if kg.adversarial_temperature > 0:
            z = kg.adversarial_temperature * np.asarray(neg.data, np.float64)
            w = np.exp(z - z.max(1, keepdims=True))
            w /= w.sum(1, keepdims=True)
        else:
            w = np.full(neg.shape, 1.0 / neg.shape[1])
        total = (kge.WeightedSoftplus.apply(-pos, np.ones(pos.shape, self.dtype))
                 + kge.WeightedSoftplus.apply(neg, w.astype(self.dtype)))
        return total * (1.0 / len(a))

    def _regulariser(self, model: KGEModel, a, r, t) -> Tensor | float:
        kg = self.config.kg
        if kg.regularizer == "none" or kg.reg_weight == 0:
            return 0.0
        rel = r if model.reciprocal else r % self.num_relations
        factors = model.factors(a, rel, t if t is not None else a)
        if kg.scorer == "rotate":  # a phase has no size to shrink
            factors = [factors[0], factors[2]]
        halves = kg.scorer in COMPLEX  # a complex entry's modulus, cubed
        terms = [kge.N3.apply(f, halves) if kg.regularizer == "n3" else (f * f).sum()
                 for f in factors]
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total * (kg.reg_weight / len(a))

    # ------------------------------------------------------------ evaluation

    def ranks(self, model: KGEModel, split: str) -> np.ndarray:
        """Filtered realistic ranks of every tail, then every head, of `split` (val/test)."""
        model.eval()
        anchors, rels, answers = both_directions(self.triples.split(split), self.num_relations)
        keys = query_keys(anchors, rels, 2 * self.num_relations)
        out, size = [], self.config.kg.eval_batch
        with no_grad():
            for s in range(0, len(anchors), size):
                block = slice(s, s + size)
                scores = self.scores(model, anchors[block], rels[block]).data
                out.append(filtered_ranks(scores, answers[block], keys[block], self.known))
        return np.concatenate(out) if out else np.zeros(0)

    def evaluate(self, model: Module) -> Scores:
        values = {}
        for split in EVAL:
            for name, value in rank_metrics(self.ranks(model, split)).items():
                values[f"{split}_{name}"] = value
        return self.metrics.scores(**values)

    def embedding(self, model: Module) -> np.ndarray:
        """(N, width): the entity table, for the run's picture."""
        return np.asarray(model.entity.weight.data)

