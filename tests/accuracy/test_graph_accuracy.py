"""Graph classification accuracy on the real TU sets, under Errica et al.'s protocol
(stratified 10-fold cross-validation, each fold's best epoch picked on 10% of its training
part), through the library as `mgsparse train CONFIG --folds 10` runs it. Folds are
independent runs, so they run two at a time in forked workers (one per core); run i of
`--folds 10` is fold i, so the figures are those of `--folds 10` (NCI1: its first two folds).
Slow: deselect with -m 'not slow'."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.run import fit, make_task
from mgsparse.run.loop import fit_run
from mgsparse.run.monitor import EpochMemory
from tests.conftest import CONFIGS, require_real_tu

pytestmark = pytest.mark.slow
FOLDS = 10


def _config(name: str, sets: tuple = ()):
    return load_config(CONFIGS / name, [f"train.folds={FOLDS}", "monitor.memory=false", *sets])


def one_fold(config_name: str, fold: int, sets: tuple = ()) -> tuple[int, str, float]:
    """(fold, status, test accuracy) of fold `fold`, as run `fold` of `--folds 10`."""
    config = _config(config_name, sets)
    task = make_task(config)
    task.begin_run(fold)
    run = fit_run(config, task, config.train.seed + fold, EpochMemory(False, 10),
                  run_index=fold)
    return fold, run.status, run.test_acc


def fold_accuracies(config_name: str, folds: list[int], sets: tuple = ()) -> list[float]:
    make_task(_config(config_name, sets))  # unpack the zip once, before forking
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        done = list(pool.map(one_fold, [config_name] * len(folds), folds,
                             [sets] * len(folds)))
    assert [f for f, _, _ in done] == folds
    assert all(status == "completed" for _, status, _ in done), done
    return [acc for _, _, acc in done]


@pytest.fixture
def tu(monkeypatch, tmp_path):
    monkeypatch.setenv("MGSPARSE_TU_URL", str(require_real_tu()))
    return (f"dataset.root={tmp_path}",)


def test_gin_on_mutag_over_ten_folds(tu):
    """Xu et al. report 89.4 ± 5.6% (a more optimistic protocol). With the folds dealt as
    scikit-learn's StratifiedKFold deals them (sizes 18-19, Errica et al.'s splitter) the ten
    folds measured 82.95% ± 9.11 at seed 0 (84.30 over seeds 0..3): the floor is 80%."""
    accs = fold_accuracies("mutag-gin.yaml", list(range(FOLDS)), tu)
    assert np.mean(accs) >= 0.80, accs


def test_gine_on_mutag_reads_the_bond_labels(tu):
    """GIN's recipe with GINE layers and MUTAG's four bond labels: the ten folds measured
    87.66% ± 8.47 at seed 0 (GIN's 82.95% under the same folds; `mgsparse train
    configs/mutag-gine.yaml --folds 10`), folds 0 and 1 100.0% and 89.5%. Those two, one on
    each worker, guard regressions (the ten took 100 s of the suite); the floor is 88%."""
    accs = fold_accuracies("mutag-gine.yaml", [0, 1], tu)
    assert np.mean(accs) >= 0.88, accs


def test_gin_on_nci1_first_two_folds(tu):
    """Errica et al. measure GIN at 80.0 ± 1.4% over ten folds; the floor is 78.5%. The ten
    folds measured 80.15% ± 1.48 (docs/graph-classification.md); folds 0 and 1 gave 79.3 and
    81.3%, so this guards regressions, it does not re-measure the ten-fold figure. Two folds,
    one on each of the two workers: a third ran alone after them and added half the suite's
    time again (200 epochs of 4,110 graphs)."""
    accs = fold_accuracies("nci1-gin.yaml", [0, 1], tu)
    assert np.mean(accs) >= 0.785, accs


def test_one_fold_is_the_run_of_that_fold_in_a_series(tu):
    """The workers' figures are those of `--folds 10`: fold i alone is run i of the series."""
    sets = (*tu, "train.epochs=3")
    config = _config("mutag-gin.yaml", sets)
    series = fit(config, make_task(config)).runs
    for fold in (0, 3):
        assert one_fold("mutag-gin.yaml", fold, sets)[2] == series[fold].test_acc
