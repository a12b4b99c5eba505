"""SGC: Â^K X against dense powers, the per-model cache (hit, miss, never stale), gradients,
sparse features kept sparse while the product is."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor
from mgsparse.nn.sgc import SGC, sgc_features
from tests.nn.model_check import model_gradcheck
from tests.nn.test_gcn import EDGE_INDEX, N, dense_norm_adj


def test_propagated_features_are_the_dense_power(rng):
    x = rng.standard_normal((N, 5))
    a = dense_norm_adj()
    for k in (0, 1, 2, 3):
        out = sgc_features(Tensor(x), SparseTensor.from_dense(a), k)
        np.testing.assert_allclose(out.data, np.linalg.matrix_power(a, k) @ x, atol=1e-12)


def test_sparse_features_stay_sparse_while_the_product_is():
    """A one-hot row on a 100-node path: Â² spreads it to 5 rows, density 5 / 1000 ≤ 0.1."""
    n = 100
    path = np.array([np.r_[np.arange(n - 1), np.arange(1, n)],
                     np.r_[np.arange(1, n), np.arange(n - 1)]])
    x = np.zeros((n, 10))
    x[50, 3] = 1.0
    from mgsparse.nn.gcn import normalized_adjacency
    adj = normalized_adjacency(path, n, dtype=np.float64)
    out = sgc_features(SparseTensor.from_dense(x), adj, 2)
    assert isinstance(out, SparseTensor) and out.nnz == 5
    np.testing.assert_allclose(out.to_dense(), np.linalg.matrix_power(adj.to_dense(), 2) @ x,
                               atol=1e-15)


def test_model_is_a_linear_layer_on_the_power(rng):
    model = SGC(5, 99, 3, k=2, rng=rng, dtype=np.float64)
    x = rng.standard_normal((N, 5))
    lin = model.linears[0]
    want = np.linalg.matrix_power(dense_norm_adj(), 2) @ x @ lin.weight.data + lin.bias.data
    np.testing.assert_allclose(model(Tensor(x), EDGE_INDEX).data, want, atol=1e-12)
    assert len(model.parameters()) == 2  # hidden and layers are not read


def test_the_power_is_computed_once_per_operands(rng, monkeypatch):
    from mgsparse.nn import sgc

    calls = []
    real = sgc.sgc_features
    monkeypatch.setattr(sgc, "sgc_features", lambda *a: calls.append(1) or real(*a))
    model = SGC(5, 8, 3, rng=rng, dtype=np.float64)
    x, y = Tensor(rng.standard_normal((N, 5))), Tensor(rng.standard_normal((N, 5)))
    first = model(x, EDGE_INDEX).data
    np.testing.assert_array_equal(model(x, EDGE_INDEX.copy()).data, first)  # equal graph: hit
    assert len(calls) == 1
    other = model(y, EDGE_INDEX).data  # other features: recomputed, not stale
    assert len(calls) == 2 and not np.allclose(other, first)


def test_gradients_reach_the_weights_and_the_features(rng):
    """Features that require a gradient are propagated with recorded ops (not cached)."""
    model = SGC(5, 8, 3, k=2, rng=rng, dtype=np.float64)
    result = model_gradcheck(model, rng.standard_normal((N, 5)), lambda m, x: m(x, EDGE_INDEX))
    assert result.passed and len(result.inputs) == 3 and result.max_abs_err < 1e-7
    assert model._cache is None


def test_a_product_kept_by_the_run_layer_is_used_by_a_new_model(rng, monkeypatch):
    from mgsparse.nn import sgc

    x = Tensor(rng.standard_normal((N, 5)))
    norm_adj = SparseTensor.from_dense(dense_norm_adj())
    shared = sgc_features(x, norm_adj, 2)
    monkeypatch.setattr(sgc, "sgc_features", lambda *a: pytest.fail("recomputed"))
    model = SGC(5, 8, 3, rng=rng, dtype=np.float64)
    model.set_propagated(x, norm_adj, shared)
    lin = model.linears[0]
    np.testing.assert_allclose(model(x, norm_adj).data,
                               shared.data @ lin.weight.data + lin.bias.data, atol=1e-12)
