"""APPNP: the propagation against its unrolled dense formula, gradients, caching of Â, the
block-form refusal, and the model's shape."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.appnp import APPNP, APPNPProp
from mgsparse.nn.block import block_support
from tests.nn.model_check import model_gradcheck
from tests.nn.test_gcn import EDGE_INDEX, N, dense_norm_adj


def unrolled(h: np.ndarray, k: int, alpha: float) -> np.ndarray:
    """Z_K = Σ_{i<K} α(1 − α)^i Â^i H + (1 − α)^K Â^K H, densely."""
    a, out, power = dense_norm_adj(), np.zeros_like(h), h
    for i in range(k):
        out += alpha * (1 - alpha) ** i * power
        power = a @ power
    return out + (1 - alpha) ** k * power


@pytest.mark.parametrize("k, alpha", [(0, 0.1), (1, 0.1), (10, 0.1), (5, 0.0), (3, 1.0)])
def test_propagation_is_the_unrolled_personalised_pagerank(rng, k, alpha):
    h = rng.standard_normal((N, 3))
    out = APPNPProp(k, alpha)(Tensor(h), EDGE_INDEX).data
    np.testing.assert_allclose(out, unrolled(h, k, alpha), atol=1e-12)


def test_many_steps_reach_the_fixed_point(rng):
    """Z = α (I − (1 − α) Â)⁻¹ H: the limit of the power iteration (contraction 1 − α)."""
    h = rng.standard_normal((N, 2))
    fixed = 0.2 * np.linalg.solve(np.eye(N) - 0.8 * dense_norm_adj(), h)
    np.testing.assert_allclose(APPNPProp(200, 0.2)(Tensor(h), EDGE_INDEX).data, fixed,
                               atol=1e-12)


def test_sparse_dense_and_edge_list_operands_agree(rng):
    h = Tensor(rng.standard_normal((N, 3)))
    prop = APPNPProp(4, 0.3)
    dense = prop(h, Tensor(dense_norm_adj())).data
    sparse = prop(h, SparseTensor.from_dense(dense_norm_adj())).data
    np.testing.assert_allclose(prop(h, EDGE_INDEX).data, dense, atol=1e-12)
    np.testing.assert_allclose(sparse, dense, atol=1e-12)


def test_the_normalisation_is_cached_per_graph(rng):
    prop, h = APPNPProp(2, 0.1), Tensor(rng.standard_normal((N, 2)))
    prop(h, EDGE_INDEX)
    first = prop._norm_adj._cache._entry[3]
    prop(h, EDGE_INDEX.copy())  # an equal copy: a hit
    assert prop._norm_adj._cache._entry[3] is first
    other = prop(h, EDGE_INDEX[:, :2]).data  # another graph: rebuilt, not stale
    assert prop._norm_adj._cache._entry[3] is not first
    assert not np.allclose(other, prop(h, EDGE_INDEX).data)


def test_model_gradients_float64(rng):
    model = APPNP(5, 6, 3, k=4, alpha=0.2, rng=rng, dtype=np.float64)
    result = model_gradcheck(model, rng.standard_normal((N, 5)),
                             lambda m, x: m(x, EDGE_INDEX))
    assert result.passed and len(result.inputs) == 5  # x, 2 weights, 2 biases
    assert result.max_abs_err < 1e-7


def test_model_is_the_mlp_then_propagation(rng):
    model = APPNP(5, 6, 3, k=3, alpha=0.1, rng=rng, dtype=np.float64)
    model.eval()
    x = rng.standard_normal((N, 5))
    (w1, b1), (w2, b2) = [(lin.weight.data, lin.bias.data) for lin in model.linears]
    h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(model(Tensor(x), EDGE_INDEX).data, unrolled(h, 3, 0.1),
                               atol=1e-12)
    np.testing.assert_allclose(model.embed(Tensor(x), EDGE_INDEX).data,
                               np.maximum(x @ w1 + b1, 0), atol=1e-12)


def test_no_block_form_and_bad_settings_are_one_line_errors(rng):
    assert block_support(APPNP(3, 4, 2, rng=rng)) == "APPNP has no graph layers"
    with pytest.raises(HyperparameterError, match=r"^APPNP: alpha must be in \[0, 1\], got 1.5$"):
        APPNPProp(3, 1.5)
    with pytest.raises(HyperparameterError, match=r"^APPNP: k \(propagation steps\) must be"):
        APPNP(3, 4, 2, k=-1)
    assert APPNP(3, 4, 2, k=None).prop.k == 10  # null in the config: the paper's K
