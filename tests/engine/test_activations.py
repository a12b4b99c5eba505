"""The activations against the selects they replace: LeakyReLU and ELU compute them by
max/min (numpy's `where` on a random sign pattern is ~10x slower) and must give the same
floats, forward and backward, at the edges too (±0, ±inf, nan, subnormals)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor
from mgsparse.errors import HyperparameterError

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-30, -1e-30, 3e-8,
                  -3e-8, -1e-3, -0.5, -17.0, -104.0, 88.0, 1.0, -1.0])


def _edge_inputs(dtype):
    rng = np.random.default_rng(5)
    return np.concatenate([EDGES, rng.standard_normal(20_000) * 4,
                           -np.logspace(-40, 2, 5_000)]).astype(dtype)


def _same_bits(a, b):
    np.testing.assert_array_equal(a.view(np.uint8), np.asarray(b, a.dtype).view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("slope", [0.2, 0.01, 1.0, 2.0, -0.5, 0.0])
def test_leaky_relu_equals_its_select_bitwise(dtype, slope):
    x = _edge_inputs(dtype)
    g = np.random.default_rng(6).standard_normal(x.size).astype(dtype)
    t = Tensor(x, requires_grad=True)
    with np.errstate(invalid="ignore", over="ignore"):  # slope 0 times inf, as the select
        out = t.leaky_relu(slope)
        out.backward(g)
        _same_bits(out.data, np.where(x > 0, x, slope * x))
        _same_bits(t.grad, np.where(x > 0, g, slope * g))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.1, 2.0])
def test_elu_equals_its_select_bitwise(dtype, alpha):
    x = _edge_inputs(dtype)
    g = np.random.default_rng(7).standard_normal(x.size).astype(dtype)
    t = Tensor(x, requires_grad=True)
    out = t.elu(alpha)
    out.backward(g)
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))
        _same_bits(out.data, want)
        _same_bits(t.grad, np.where(x > 0, g, g * (want + alpha)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_dropout_is_relu_then_dropout_bitwise(dtype):
    """One op, the same mask from the same generator, the same floats both ways (edges too:
    out > 0 exactly where x > 0 and the entry was kept)."""
    x = _edge_inputs(dtype).reshape(-1, 7)[:3000]
    g = np.random.default_rng(6).standard_normal(x.shape).astype(dtype)
    fused_in, plain_in = Tensor(x, requires_grad=True), Tensor(x, requires_grad=True)
    fused = fused_in.relu_dropout(0.5, True, np.random.default_rng(3))
    plain = plain_in.relu().dropout(0.5, True, np.random.default_rng(3))
    fused.backward(g)
    plain.backward(g)
    _same_bits(fused.data, plain.data)
    _same_bits(fused_in.grad, plain_in.grad)
    assert 0.4 < np.mean(fused.data[x > 0] == 0) < 0.6  # about half the positives dropped


def test_relu_dropout_off_is_relu_and_a_bad_p_is_refused():
    x = Tensor(np.array([[-1.0, 2.0]], dtype=np.float32))
    for off in (x.relu_dropout(0.5, training=False), x.relu_dropout(0.0)):
        np.testing.assert_array_equal(off.data, [[0.0, 2.0]])
    with pytest.raises(HyperparameterError, match=r"dropout probability must be in \[0, 1\), "
                                                  r"got 1.0"):
        x.relu_dropout(1.0)


def test_relu_without_a_backward_to_follow_keeps_no_mask():
    """An evaluation pass (no input needs a gradient) runs one max and saves nothing."""
    from mgsparse.engine.activations import Relu
    from mgsparse.engine.tensor import Context
    x = np.array([[-1.0, 2.0, 0.0]], dtype=np.float32)
    for needs, saved in (((False,), ()), ((True,), ([[False, True, False]],))):
        ctx = Context(Relu, (), needs)
        np.testing.assert_array_equal(Relu.forward(ctx, x), [[0.0, 2.0, 0.0]])
        assert [m.tolist() for m in ctx.saved_tensors] == [m for m in saved], needs
