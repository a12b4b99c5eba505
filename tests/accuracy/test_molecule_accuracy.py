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


def test_gine_on_solubility_reads_the_bonds(serve_folder, monkeypatch, tmp_path):
    """configs/solubility-gine.yaml, seed 0, 100 epochs of the config's 150 (about 70 s on
    two idle cores): measured 0.854 log units test RMSE (best validation epoch 87), R² 0.82;
    the floors are 0.90 and 0.78. The figure of the docs, 0.791 ± 0.109 over seeds 0-2, is
    the full 150 epochs (`mgsparse train configs/solubility-gine.yaml --runs 3`)."""
    url, _ = serve_folder(require_real_molecules())
    monkeypatch.setenv("MGSPARSE_MOLECULES_URL", url)
    config = load_config(CONFIGS / "solubility-gine.yaml",
                         [f"dataset.root={tmp_path}", "train.epochs=100"])
    task = make_task(config)
    assert task.placed.placement["adjacency"].endswith("4 bond features each)")
    result = fit(config, task)
    run = result.runs[0]
    assert run.status == "completed"
    assert run.test_rmse <= 0.90 and run.test_r2 >= 0.78, (run.test_rmse, run.test_r2)


def test_gine_on_freesolv_over_the_random_split(serve_folder, monkeypatch, tmp_path):
    """configs/freesolv-gine.yaml (SMILES through RDKit, OGB's features), seed 0, 100 epochs
    of the config's 200 (about 40 s on two idle cores): measured 1.490 kcal/mol test RMSE
    (best validation epoch 97); the floor is 1.60. The figure of the docs, 1.348 ± 0.254
    over seeds 0-4, is the full 200 epochs (`mgsparse train configs/freesolv-gine.yaml
    --runs 5`); FreeSolv's 64 test molecules make any one seed's figure noisy."""
    pytest.importorskip("rdkit")
    url, _ = serve_folder(require_real_molecules())
    monkeypatch.setenv("MGSPARSE_MOLECULES_URL", url)
    config = load_config(CONFIGS / "freesolv-gine.yaml",
                         [f"dataset.root={tmp_path}", "train.epochs=100"])
    result = fit(config, make_task(config))
    run = result.runs[0]
    assert run.status == "completed"
    assert run.test_rmse <= 1.60, run.test_rmse
