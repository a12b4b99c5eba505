"""The layer gradient-check registry: its random graph, and every case passing in float64."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.errors import GradcheckError
from mgsparse.nn.cases import LAYER_CASES, NUM_NODES, random_graph


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
