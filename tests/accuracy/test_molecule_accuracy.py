"""Graph regression on the real solubility files, served over loopback so the download code
runs, through the library as `mgsparse train configs/solubility-gin.yaml --runs 3` runs it.
Slow: deselect with -m 'not slow'."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.run import fit, make_task
from tests.conftest import CONFIGS, require_real_molecules

pytestmark = pytest.mark.slow


def test_gin_on_solubility_over_three_seeds(serve_folder, monkeypatch, tmp_path):
    """GIN on atom features alone (bond orders unread) measured 0.811 ± 0.045 log units over
    seeds 0-2 (0.756, 0.866, 0.812); the floor is 0.90. The issue's goal, 0.80 with GINE,
    needs the bond features."""
    url, log = serve_folder(require_real_molecules())
    monkeypatch.setenv("MGSPARSE_MOLECULES_URL", url)
    config = load_config(CONFIGS / "solubility-gin.yaml",
                         [f"dataset.root={tmp_path}", "train.runs=3", "monitor.memory=false"])
    task = make_task(config)
    assert sorted(log) == ["/solubility.test.sdf", "/solubility.train.sdf"]
    result = fit(config, task)
    rmse = [run.test_rmse for run in result.runs]
    assert all(run.status == "completed" for run in result.runs)
    assert np.mean(rmse) <= 0.90, rmse
    assert min(run.test_r2 for run in result.runs) > 0.75, rmse
