"""Fixtures for the sparse tests: a seeded rng and the three-oracle gradient check."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import gradcheck
from mgsparse.engine import Tensor
from mgsparse.sparse import SPARSE_OPS, analytic_grads, scalar_grads


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def _assert_close(name: str, what: str, got: list, want: list, atol: float) -> None:
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, atol=atol, rtol=1e-9, err_msg=f"{name}: {what} {i}")


def check_oracles(name: str, size: str, seed: int = 0) -> None:
    """The op's gradient agrees with finite differences, the dense equivalent and (on all but
    the medium size) the scalar decomposition; the three outputs agree too."""
    case = SPARSE_OPS[name]
    inputs = case.build(np.random.default_rng(seed), size, np.float64)
    checked = [a for a in inputs if isinstance(a, Tensor) and a.requires_grad]
    assert checked, f"{name}: no input to check"
    result = gradcheck(case.sparse, inputs, atol=1e-6, rtol=1e-5)  # (a), raises on failure
    assert result.passed and len(result.inputs) == len(checked)
    shape = case.sparse(*inputs).shape
    weights = np.random.default_rng(seed + 1).standard_normal(shape)
    out, grads = analytic_grads(case.sparse, inputs, weights)
    assert all(np.isfinite(g).all() for g in grads)
    d_out, d_grads = analytic_grads(case.dense, inputs, weights)  # (b)
    _assert_close(name, "output vs dense", [out], [d_out], 1e-10)
    _assert_close(name, "grad vs dense, input", grads, d_grads, 1e-10)
    if size != "medium":  # (c)
        s_out, s_grads = scalar_grads(case, inputs, weights)
        _assert_close(name, "output vs scalar", [out], [s_out], 1e-10)
        _assert_close(name, "grad vs scalar, input", grads, s_grads, 1e-10)


@pytest.fixture
def oracles():
    return check_oracles
