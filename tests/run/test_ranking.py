"""Filtered ranking on a hand-written triple set whose ranks are worked out by hand: the
filter, ties as the mean of the optimistic and pessimistic rank, head queries through the
inverse relation, and MRR/Hits@k."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.run.ranking import (
    both_directions,
    filtered_ranks,
    known_answers,
    query_keys,
    rank_metrics,
)

# 4 entities, 1 relation (R = 1, so the inverse is relation 1). Known triples: (0, 0, 1) in
# train, (0, 0, 2) in test, (3, 0, 2) in valid.
TRAIN = np.array([[0, 0, 1]])
VALID = np.array([[3, 0, 2]])
TEST = np.array([[0, 0, 2]])


def known():
    return known_answers([TRAIN, VALID, TEST], num_entities=4, num_base_relations=1)


def test_the_filter_holds_both_directions_of_every_split():
    k = known()
    assert k.shape == (4 * 2, 4)
    tails_of_0 = k[query_keys([0], [0], 2)].toarray()[0]
    heads_of_2 = k[query_keys([2], [1], 2)].toarray()[0]  # (?, 0, 2) asked as (2, r⁻¹, ?)
    assert tails_of_0.tolist() == [False, True, True, False]
    assert heads_of_2.tolist() == [True, False, False, True]
    assert k.nnz == 6


def test_filtered_ranks_with_ties_known_by_hand():
    """Query (0, 0, ?) with answer 2 (the test triple). Scores over entities 0..3:
    [5, 9, 4, 4]: entity 1 scores higher but is a known answer (train), so it is filtered;
    entity 0 scores higher (rank +1); entity 3 ties (half a rank). Realistic rank: 1 + 1 +
    0.5 = 2.5. Unfiltered it would be 3.5."""
    scores = np.array([[5.0, 9.0, 4.0, 4.0]])
    keys = query_keys([0], [0], 2)
    assert filtered_ranks(scores, np.array([2]), keys, known()).tolist() == [2.5]
    empty = known_answers([np.zeros((0, 3), np.int64)], 4, 1)
    assert filtered_ranks(scores, np.array([2]), keys, empty).tolist() == [3.5]
    assert scores.tolist() == [[5.0, 9.0, 4.0, 4.0]]  # the caller's scores untouched


def test_all_equal_scores_rank_in_the_middle_not_first():
    scores = np.zeros((1, 4))
    empty = known_answers([np.zeros((0, 3), np.int64)], 4, 1)
    assert filtered_ranks(scores, np.array([0]), query_keys([1], [0], 2), empty).tolist() == [2.5]


def test_a_batch_of_head_and_tail_queries():
    """The test triple (0, 0, 2) both ways. Tail query (0, 0, ?) -> 2: scores [1, 3, 2, 0]:
    entity 1 filtered, nothing else higher: rank 1. Head query (2, r⁻¹, ?) -> 0: scores
    [2, 2, 1, 7]: entity 3 is the valid triple's head, filtered; entity 1 ties: rank 1.5."""
    anchors, rels, answers = both_directions(TEST, 1)
    assert (anchors.tolist(), rels.tolist(), answers.tolist()) == ([0, 2], [0, 1], [2, 0])
    scores = np.array([[1.0, 3.0, 2.0, 0.0], [2.0, 2.0, 1.0, 7.0]])
    ranks = filtered_ranks(scores, answers, query_keys(anchors, rels, 2), known())
    assert ranks.tolist() == [1.0, 1.5]
    m = rank_metrics(ranks)
    assert m["mrr"] == pytest.approx((1 + 1 / 1.5) / 2)
    assert (m["hits1"], m["hits3"], m["hits10"]) == (0.5, 1.0, 1.0)


def test_a_nan_answer_ranks_last_and_a_nan_rival_counts_above():
    empty = known_answers([np.zeros((0, 3), np.int64)], 4, 1)
    keys = query_keys([0, 0], [0, 0], 2)
    scores = np.array([[np.nan, 1.0, 0.0, 0.0], [np.nan, 1.0, 2.0, 0.0]])
    assert filtered_ranks(scores, np.array([0, 2]), keys, empty).tolist() == [4.0, 2.0]


def test_metrics_of_known_ranks():
    m = rank_metrics(np.array([1.0, 2.0, 4.0, 20.0]))
    assert m["mrr"] == pytest.approx((1 + 0.5 + 0.25 + 0.05) / 4)
    assert (m["hits1"], m["hits3"], m["hits10"]) == (0.25, 0.5, 0.75)
