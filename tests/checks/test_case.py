"""The case builders: sizes, kink margins, random patterns and graphs, the registry's names."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.checks import CASES, SIZES
from mgsparse.checks.case import KINK_MARGIN, by_name, get_size, normal
from mgsparse.checks.nn import random_graph
from mgsparse.checks.sparse import random_pattern
from mgsparse.nn import functional as F


def test_normal_keeps_every_entry_away_from_the_kinks(rng):
    x = normal(rng, (500,), kinks=(0.0, 0.5))
    assert x.dtype == np.float64 and x.requires_grad
    assert np.min(np.abs(x.data)) >= KINK_MARGIN
    assert np.min(np.abs(x.data - 0.5)) >= KINK_MARGIN - 1e-12


@pytest.mark.parametrize("size", list(SIZES))
def test_inputs_follow_the_size(size):
    s = get_size(size)
    (n, m), (rows, cols, nnz), (nodes, edges) = s.dense, s.sparse, s.graph
    a, b = CASES["engine.matmul"].inputs(size)
    assert (a.shape, b.shape) == ((n, m), (m, 3))
    x, mask = CASES["engine.getitem_mask"].inputs(size)
    assert x.shape == mask.shape == (n, m) and mask.dtype == bool
    v, X, A = CASES["sparse.spmm"].inputs(size)
    assert (A.shape, A.nnz, v.shape, X.shape) == ((rows, cols), nnz, (nnz,), (cols, 3))
    x, *_, layer = CASES["nn.gcn_conv"].inputs(size)
    assert (x.shape, layer.edges) == ((nodes, s.features[0]), edges)


def test_random_patterns_have_empty_rows_columns_and_duplicates():
    idx = random_pattern(np.random.default_rng(0), (6, 5), 12)
    assert idx[0].max() < 5 and idx[1].max() < 4  # last row and last column empty
    keys = idx[0] * 5 + idx[1]
    assert len(np.unique(keys)) < len(keys)
    assert not np.all(np.diff(keys) >= 0)  # shuffled, not row-sorted


def test_random_graph_has_distinct_edges_an_isolated_node_and_a_source_only_node(rng):
    edges = random_graph(rng, 7, 16)
    assert edges.shape == (2, 16) and edges.dtype == np.int64
    assert len({tuple(e) for e in edges.T}) == 16  # distinct
    assert not np.any(edges[0] == edges[1])  # no self loops
    assert 6 not in edges  # isolated
    assert 5 in edges[0] and 5 not in edges[1]  # sends only


def test_random_graph_of_one_node_is_its_self_loop_and_of_no_edges_is_empty(rng):
    assert random_graph(rng, 1, 1).tolist() == [[0], [0]]
    assert random_graph(rng, 5, 0).shape == (2, 0)


def test_nll_loss_case_counts_a_repeated_row_twice():
    logits, targets, rows = CASES["nn.nll_loss"].inputs("small")
    assert rows.tolist() == [0, 0, logits.shape[0] - 1]
    F.nll_loss(logits, targets, rows).backward()
    assert logits.grad[0, targets[0]] == pytest.approx(-2 / 3)
    assert logits.grad[-1, targets[-1]] == pytest.approx(-1 / 3)


@pytest.mark.parametrize("size", list(SIZES))
def test_a_loss_keeps_at_least_one_row(size):
    """An empty batch is refused by the losses by design: their cases keep one row."""
    logits, *_ = CASES["nn.cross_entropy"].inputs(size)
    assert logits.shape == (max(get_size(size).dense[0], 1), get_size(size).dense[1])


def test_a_repeated_name_is_refused():
    neg, add = CASES["engine.neg"], CASES["engine.add"]
    with pytest.raises(ValueError, match="^duplicate gradcheck cases: engine.add, engine.neg$"):
        by_name([neg, add, neg, add])


def test_names_are_group_dot_op_and_the_case_repr_lists_its_oracles():
    assert all(name == case.name and case.group in ("engine", "sparse", "nn")
               for name, case in CASES.items())
    assert repr(CASES["sparse.spmm"]) == (
        "Case('sparse.spmm', oracles=['finite differences', 'dense equivalent', 'scalar'])")
    assert CASES["engine.max"].oracles("small") == ["finite differences"]
    assert CASES["engine.exp"].oracles("medium") == ["finite differences"]
