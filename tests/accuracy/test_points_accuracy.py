"""Accuracy on a point cloud through the library: the shipped moons config as is (batch 32,
noise 0.1) separates the held-out points. Slow: deselect with -m 'not slow'."""

from __future__ import annotations

import pytest

from mgsparse.config import load_config
from mgsparse.run import fit, make_task
from tests.conftest import CONFIGS

pytestmark = pytest.mark.slow


def test_moons_config_reaches_95_percent_on_the_held_out_points():
    config = load_config(CONFIGS / "moons.yaml")
    result = fit(config, make_task(config))
    summary = result.summary()
    assert summary.status == "ok" and summary.runs == 1
    assert summary.test_acc_mean >= 0.95, summary
