"""GCNII: one layer against its dense formula, β_l = log(λ/l + 1), the fused layer op against
the engine's ops, gradients through a deep stack, the initial residual at depth, 64 layers
kept sparse, and the paper's two weight-decay groups."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.errors import HyperparameterError
from mgsparse.nn.gcnii import GCNII, GCNIILayer, GCNIIStep
from tests.nn.model_check import model_gradcheck
from tests.nn.test_gcn import EDGE_INDEX, N, dense_norm_adj


def test_one_layer_is_the_formula(rng):
    conv = GCNIILayer(4, alpha=0.1, theta=0.5, layer=3, rng=rng, dtype=np.float64)
    assert conv.beta == pytest.approx(math.log(0.5 / 3 + 1))
    x, x0 = rng.standard_normal((N, 4)), rng.standard_normal((N, 4))
    beta, w = conv.beta, conv.weight.data
    want = (0.9 * dense_norm_adj() @ x + 0.1 * x0) @ ((1 - beta) * np.eye(4) + beta * w)
    np.testing.assert_allclose(conv(Tensor(x), Tensor(x0), EDGE_INDEX).data, want, atol=1e-12)
    dense = conv(Tensor(x), Tensor(x0), Tensor(dense_norm_adj())).data
    sparse = conv(Tensor(x), Tensor(x0), SparseTensor.from_dense(dense_norm_adj())).data
    np.testing.assert_allclose(dense, want, atol=1e-12)
    np.testing.assert_allclose(sparse, want, atol=1e-12)


@pytest.mark.parametrize("relu", [True, False])
def test_the_fused_layer_is_the_engine_ops(rng, relu):
    """`GCNIIStep` (a constant sparse Â) and the composed ops (a dense Â) agree on the output
    and on the gradients of x, a₀ = α x₀ and W, with and without the fused relu."""
    conv = GCNIILayer(4, alpha=0.2, theta=0.5, layer=2, rng=rng, dtype=np.float64)
    x, a0, g = (rng.standard_normal((N, 4)) for _ in range(3))
    results = []
    for adj in (SparseTensor.from_dense(dense_norm_adj()), Tensor(dense_norm_adj())):
        xt, a0t = Tensor(x, requires_grad=True), Tensor(a0, requires_grad=True)
        conv.weight.grad = None
        y = conv.step(xt, a0t, adj, relu=relu)
        (y * Tensor(g)).sum().backward()
        fused = y._ctx is not None and y._ctx.fn is GCNIIStep
        results.append((fused, y.data, xt.grad, a0t.grad, conv.weight.grad.copy()))
    (fused, *got), (composed, *want) = results
    assert fused and not composed
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_the_fused_layer_passes_gradcheck(rng):
    conv = GCNIILayer(3, alpha=0.1, theta=0.5, layer=1, rng=rng, dtype=np.float64)
    adj = SparseTensor.from_dense(dense_norm_adj())
    result = gradcheck(lambda x, a0, w: GCNIIStep.apply(x, a0, w, adj.values.data,
                                                        adj._structure, 0.1, conv.beta, True),
                       [Tensor(rng.standard_normal((N, 3)) + 0.1, requires_grad=True),
                        Tensor(rng.standard_normal((N, 3)), requires_grad=True),
                        Tensor(rng.standard_normal((3, 3)), requires_grad=True)])
    assert result.passed and result.max_abs_err < 1e-7


def test_the_paper_decay_groups(rng):
    model = GCNII(5, 4, 3, layers=3, rng=rng)
    convs, linears = model.param_groups(5e-4, 0.01)
    assert convs["weight_decay"] == 0.01 and linears["weight_decay"] == 5e-4
    assert [id(p) for p in convs["params"]] == [id(c.weight) for c in model.convs]
    assert len(linears["params"]) == 4  # two Linear layers' weights and biases


def test_identity_mapping_shrinks_with_depth():
    betas = [GCNIILayer(2, theta=0.5, layer=layer).beta for layer in (1, 2, 8, 64)]
    assert betas == pytest.approx([math.log(1.5), math.log(1.25), math.log(1.0625),
                                   math.log(1 + 0.5 / 64)])


def test_model_gradients_float64(rng):
    model = GCNII(5, 4, 3, layers=3, alpha=0.2, theta=0.7, rng=rng, dtype=np.float64)
    result = model_gradcheck(model, rng.standard_normal((N, 5)), lambda m, x: m(x, EDGE_INDEX))
    assert result.passed and len(result.inputs) == 1 + 4 + 3  # x, 2 Linear, 3 convs
    assert result.max_abs_err < 1e-7


def test_the_initial_residual_keeps_rows_apart_at_depth(rng):
    """With W = 0 each layer is relu((1 − α) Â H + α H0): 64 of them stay near APPNP's fixed
    point instead of collapsing, so the rows of two different nodes still differ."""
    model = GCNII(5, 4, 3, layers=64, rng=rng, dtype=np.float64)
    model.eval()
    for conv in model.convs:
        conv.weight.data[...] = 0.0
    h = model.embed(Tensor(rng.standard_normal((N, 5))), EDGE_INDEX).data
    x0 = np.maximum(0, model.linears[0](Tensor(rng.standard_normal((N, 5)))).data)
    assert np.ptp(h, axis=0).max() > 1e-3 and x0.shape == h.shape


def test_64_layers_keep_the_adjacency_sparse(rng):
    model = GCNII(5, 8, 3, layers=64, rng=rng, dtype=np.float64)
    out = model(Tensor(rng.standard_normal((N, 5))), EDGE_INDEX)
    out.sum().backward()
    assert all(c.weight.grad is not None for c in model.convs)
    assert isinstance(model.convs[0]._norm_adj._cache._entry[3], SparseTensor)


def test_bad_settings_are_one_line_errors():
    with pytest.raises(HyperparameterError, match=r"^GCNIILayer: layer must be >= 1 and theta"):
        GCNIILayer(4, theta=0.0)
    with pytest.raises(HyperparameterError, match=r"^GCNII: alpha must be in \[0, 1\]"):
        GCNII(3, 4, 2, layers=2, alpha=-0.1)
