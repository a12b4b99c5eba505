"""Filtered ranking, as knowledge-graph completion is scored (Bordes et al. 2013).

A query (anchor, relation) with its true answer is ranked against every entity. Filtered: the
other known answers of the same query (any split's: train, valid and test) are removed first,
so a model is not penalised for ranking another true triple higher. Ties count realistically:
the mean of the optimistic rank (1 + the number scored higher) and the pessimistic one (1 +
the number scored higher or equal, other than the answer itself), as PyKEEN's "realistic"
rank, so a model that scores everything equal ranks each answer (N + 1) / 2, not 1.

A query's key is anchor · num_relations + relation in the space of 2R relations: relation
r < R asks for tails, r + R (the inverse) for heads; `known_answers` holds both directions of
every triple. A non-finite answer score ranks last (N); other non-finite scores rank above it.

MRR is the mean of 1 / rank, Hits@k the fraction of ranks ≤ k, over the tail and head queries
of a split together.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

HITS = (1, 3, 10)


def query_keys(anchors: np.ndarray, relations: np.ndarray, num_relations: int) -> np.ndarray:
    return np.asarray(anchors, np.int64) * num_relations + np.asarray(relations, np.int64)


def both_directions(triples: np.ndarray, num_base_relations: int) -> tuple[np.ndarray, ...]:
    """(anchors, relations, answers) of the tail queries (h, r, ?) -> t, then the head queries
    written as (t, r + R, ?) -> h, for triples (n, 3)."""
    h, r, t = (np.asarray(triples[:, i], np.int64) for i in range(3))
    return np.r_[h, t], np.r_[r, r + num_base_relations], np.r_[t, h]


def known_answers(splits: list[np.ndarray], num_entities: int,
                  num_base_relations: int) -> sp.csr_matrix:
    """(N · 2R, N) boolean CSR: row key(anchor, relation) holds every known answer."""
    anchors, rels, answers = both_directions(np.concatenate(splits), num_base_relations)
    keys = query_keys(anchors, rels, 2 * num_base_relations)
    shape = (num_entities * 2 * num_base_relations, num_entities)
    m = sp.csr_matrix((np.ones(len(keys), dtype=bool), (keys, answers)), shape=shape)
    m.sum_duplicates()
    return m


def filtered_ranks(scores: np.ndarray, answers: np.ndarray, keys: np.ndarray,
                   known: sp.csr_matrix) -> np.ndarray:
    """(B,) realistic filtered ranks of `answers` among the (B, N) `scores` of queries `keys`:
    the other known answers of each query set aside, ties the mean of the two ranks."""
    s = np.array(scores, dtype=np.float64)  # a copy: the caller's scores stay as they were
    b = np.arange(len(s))
    answers = np.asarray(answers, np.int64)
    target = s[b, answers]
    s[np.isnan(s)] = np.inf  # an undefined score is counted as above the answer
    rows, cols = known[np.asarray(keys, np.int64)].nonzero()
    other = cols != answers[rows]
    s[rows[other], cols[other]] = -np.inf
    higher = (s > target[:, None]).sum(1)
    tied = (s == target[:, None]).sum(1) - 1  # the answer itself is not a tie
    ranks = 1.0 + higher + tied / 2.0
    ranks[~np.isfinite(target)] = s.shape[1]
    return ranks


def rank_metrics(ranks: np.ndarray) -> dict[str, float]:
    """{"mrr", "hits1", "hits3", "hits10"} of `ranks` (NaN for none)."""
    ranks = np.asarray(ranks, np.float64)
    if not len(ranks):
        return {"mrr": float("nan"), **{f"hits{k}": float("nan") for k in HITS}}
    return {"mrr": float(np.mean(1.0 / ranks)),
            **{f"hits{k}": float(np.mean(ranks <= k)) for k in HITS}}
