"""The activations against the selects they replace: LeakyReLU and ELU compute them by
max/min (numpy's `where` on a random sign pattern is ~10x slower) and must give the same
floats, forward and backward, at the edges too (±0, ±inf, nan, subnormals)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor

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
