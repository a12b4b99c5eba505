"""Fixtures for the sparse tests: a seeded rng. (Every sparse op's gradient against its
three oracles at every size runs from the registry, in tests/checks.)"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
