"""Fixtures shared by the whole suite: a seeded generator and float64 tensor factories."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor


@pytest.fixture
def rng() -> np.random.Generator:
    """A freshly seeded generator per test, so results never depend on test order."""
    return np.random.default_rng(0)


@pytest.fixture
def tensor64(rng):
    """Factory for float64 Tensors (the precision gradient checks need), uniform in [low, high)."""

    def make(*shape, low=-1.0, high=1.0, requires_grad=True) -> Tensor:
        return Tensor(rng.uniform(low, high, shape), requires_grad=requires_grad)

    return make
