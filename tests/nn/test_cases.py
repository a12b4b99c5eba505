"""The nn gradient-check cases: losses against their scalar oracles, the layers' random graph,
and every layer case passing in float64."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.errors import GradcheckError
from mgsparse.nn import functional as F
from mgsparse.nn.cases import LAYER_CASES, LOSS_CASES, NUM_NODES, random_graph
from mgsparse.sparse.reference import data_of, to_values


@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_every_loss_matches_its_scalar_oracle_and_passes_in_float64(name):
    case = LOSS_CASES[name]
    inputs = case.build(np.random.default_rng(0), "small")
    loss = case.fn(*inputs)
    values = [to_values(a.data) if isinstance(a, Tensor) else a for a in inputs]
    assert loss.shape == () and loss.dtype == np.float64
    assert data_of(case.scalar(*values)) == pytest.approx(float(loss.data), abs=1e-12)
    assert gradcheck(case.fn, inputs).passed


def test_nll_loss_case_counts_a_repeated_row_twice():
    logits, targets, rows = LOSS_CASES["nll_loss"].build(np.random.default_rng(0), "small")
    assert rows.tolist() == [0, 0, logits.shape[0] - 1]
    F.nll_loss(logits, targets, rows).backward()
    assert logits.grad[0, targets[0]] == pytest.approx(-2 / 3)
    assert logits.grad[-1, targets[-1]] == pytest.approx(-1 / 3)


def test_random_graph_has_distinct_edges_an_isolated_node_and_a_source_only_node(rng):
    edges = random_graph(rng)
    assert edges.shape == (2, 16) and edges.dtype == np.int64
    assert len({tuple(e) for e in edges.T}) == 16  # distinct
    assert not np.any(edges[0] == edges[1])  # no self loops
    assert NUM_NODES - 1 not in edges  # isolated
    assert NUM_NODES - 2 in edges[0] and NUM_NODES - 2 not in edges[1]  # sends only


@pytest.mark.parametrize("name", sorted(LAYER_CASES))
def test_every_case_passes_in_float64(name):
    fn, inputs = LAYER_CASES[name](np.random.default_rng(0))
    assert all(t.dtype == np.float64 for t in inputs if isinstance(t, Tensor))
    result = gradcheck(fn, inputs)
    assert result.passed and len(result.inputs) >= 4


def test_a_wrong_gradient_is_caught():
    """Negative control: the same case with the features' gradient halved must fail."""
    fn, inputs = LAYER_CASES["gat_conv"](np.random.default_rng(0))

    def halved(x, *params):
        return fn(x * 0.5 + (x * 0.5).detach(), *params)  # same value, half the gradient

    with pytest.raises(GradcheckError, match="input 0"):
        gradcheck(halved, inputs)
