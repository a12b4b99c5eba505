"""Every matplotlib figure: a point-cloud run's decision boundary and loss curve, and the scaling
sweep's log-log panels; written when matplotlib is present, a one-line install hint (not an
ImportError) when it is not, and matplotlib imported only when a picture is asked for."""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib  # noqa: F401  (in the test extra: the plot paths always run)
import numpy as np
import pytest

from mgsparse.bench import sweep
from mgsparse.bench.dense_vs_sparse import RepresentationResult
from mgsparse.cli.plots import (
    INSTALL_HINT,
    _draw_curves,
    _draw_embedding,
    check_plot_target,
    curve_band,
    pca_2d,
    plot_sweep,
    require_matplotlib,
    save_training_plot,
)
from mgsparse.config import load_config
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.run import fit, make_task
from mgsparse.run.results import EpochRow, RunResult
from mgsparse.run.task import ACCURACY_METRICS, Scores
from tests.conftest import CONFIGS, make_config, moons_config

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def moons_run():
    config = moons_config("train.epochs=5")
    task = make_task(config)
    return fit(config, task), task


@pytest.fixture(scope="module")
def sweep_result():
    """A sweep's figures, made by hand: the plot needs no benchmark to run."""
    def row(kind, ms, peak):
        return RepresentationResult(kind, ms, 0.0, peak, 0, 0, 0, 0.0, 0.0)

    points = [sweep.SweepPoint(n, 11 * n, 2 * n, row("sparse", n / 100, 400 * n), 4 * n * n,
                               kernel_ms=n / 1000) for n in (1_000, 10_000, 100_000)]
    points[0].dense = row("dense", 50.0, 4 * 10**6)
    return sweep._fit(points, 100.0, 1, 0)


def test_png_is_written(tmp_path, moons_run):
    result, task = moons_run
    path = save_training_plot(result, task, tmp_path / "moons.png")
    data = path.read_bytes()
    assert data[:8] == PNG
    assert len(data) > 20_000  # two panels with points, regions and curves, not an empty canvas


def test_svg_holds_both_panels(tmp_path, moons_run):
    result, task = moons_run
    text = save_training_plot(result, task, tmp_path / "moons.svg").read_text()
    assert "<svg" in text
    assert "loss per epoch" in text and "test accuracy" in text


def test_nothing_to_plot_without_a_finished_epoch(tmp_path, moons_run):
    import dataclasses

    result, task = moons_run
    empty = dataclasses.replace(result, runs=[dataclasses.replace(result.runs[0], state={})])
    with pytest.raises(MgsparseError, match="nothing to plot"):
        save_training_plot(empty, task, tmp_path / "moons.png")


def test_missing_matplotlib_gives_the_install_hint(monkeypatch, moons_run, tmp_path):
    result, task = moons_run
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` now raises ImportError
    with pytest.raises(MgsparseError) as info:
        require_matplotlib()
    assert str(info.value) == ("plotting needs matplotlib, which is not installed: "
                               "pip install matplotlib (or pip install -e '.[plot]' in "
                               "the mgsparse checkout)")
    assert INSTALL_HINT in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(MgsparseError, match="pip install matplotlib"):
        save_training_plot(result, task, tmp_path / "moons.png")
    assert not (tmp_path / "moons.png").exists()


def test_plot_targets_are_checked_before_training(monkeypatch):
    with pytest.raises(ConfigError, match=r"must end in \.png, \.svg, \.pdf"):
        check_plot_target("moons.jpg")
    check_plot_target("k.PNG")
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MgsparseError, match="pip install"):
        check_plot_target("k.png")


@pytest.fixture(scope="module")
def karate_runs():
    config = make_config(train={"epochs": 6, "runs": 2})
    task = make_task(config)
    return fit(config, task), task


def test_a_graph_run_draws_curves_and_the_hidden_layer(tmp_path, karate_runs):
    result, task = karate_runs
    text = save_training_plot(result, task, tmp_path / "karate.svg").read_text()
    assert "loss per epoch, mean ± std over 2 runs" in text
    assert "accuracy per epoch" in text and "last hidden layer (PCA)" in text
    assert save_training_plot(result, task, tmp_path / "k.png").read_bytes()[:8] == PNG


def test_curve_band_is_the_mean_and_std_over_runs_epoch_by_epoch():
    def run(losses):
        return RunResult(seed=0, rows=[EpochRow(i + 1, v, Scores({"val_auc": 1 - v}), 0)
                                       for i, v in enumerate(losses)])

    runs = [run([1.0, 3.0, 5.0]), run([3.0, 5.0])]
    epochs, mean, std = curve_band(runs, "loss")
    assert epochs.tolist() == [1, 2, 3]
    assert mean.tolist() == [2.0, 4.0, 5.0] and std.tolist() == [1.0, 1.0, 0.0]
    _, mean, std = curve_band(runs, "val_auc")  # a declared score column, by its name
    assert mean.tolist() == [-1.0, -3.0, -4.0] and std.tolist() == [1.0, 1.0, 0.0]


def _fold_runs(curves: list[list[float]]) -> list[RunResult]:
    """Runs whose epochs carry val_acc = the given values (train_acc = 1 − them, loss 1)."""
    return [RunResult(seed=i, rows=[EpochRow(e + 1, 1.0, Scores({"train_acc": 1 - v,
                                                                 "val_acc": v}), 0)
                                    for e, v in enumerate(c)])
            for i, c in enumerate(curves)]


def test_a_folded_run_draws_each_fold_thin_and_their_mean_bold():
    """k folds: k + 1 lines per field (every fold's own curve, then the mean), no band; a
    fold that stopped early is drawn over its own epochs."""
    runs = _fold_runs([[0.5, 0.6, 0.7], [0.7, 0.8, 0.9], [0.6, 0.7]])
    ax = require_matplotlib().Figure().subplots()
    _draw_curves(ax, runs, ("train_acc", "val_acc"), "accuracy", ACCURACY_METRICS, folded=True)
    lines = ax.get_lines()
    assert len(lines) == 2 * (3 + 1) and not ax.collections  # no ± std band
    for field, group in (("train_acc", lines[:4]), ("val_acc", lines[4:])):
        mean, *folds = group
        assert mean.get_linewidth() > 2 and all(f.get_linewidth() < 1 for f in folds)
        assert {f.get_color() for f in folds} == {mean.get_color()}
        np.testing.assert_allclose(mean.get_ydata(), curve_band(runs, field)[1])
        assert [list(f.get_xdata()) for f in folds] == [[1, 2, 3], [1, 2, 3], [1, 2]]
    np.testing.assert_allclose(lines[5].get_ydata(), [0.5, 0.6, 0.7])  # fold 0's val_acc
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "train accuracy, mean", "val accuracy, mean"]
    assert ax.get_title() == "accuracy per epoch, each of 3 folds (thin) and their mean"


@pytest.mark.parametrize(("fold", "title"), [
    (None, "last hidden layer (PCA), seed 7: test 81.5%"),
    (2, "last hidden layer (PCA), fold 2, seed 7: test 81.5%")])
def test_the_embedding_panel_names_the_fold_of_a_folded_run(fold, title, rng):
    task = type("Task", (), {"y": np.array([0, 1, 1, -1]), "num_classes": 2})()
    run = RunResult(seed=7, scores=Scores({"test_acc": 0.815}))
    ax = require_matplotlib().Figure().subplots()
    _draw_embedding(ax, task, rng.standard_normal((4, 3)), run, ACCURACY_METRICS, fold)
    assert ax.get_title() == title


@pytest.mark.parametrize(("y", "entries"), [
    ([0, 1, 1, 0], ["class 0", "class 1"]),
    ([0, 1, 1, -1], ["class 0", "class 1", "no label"])])
def test_no_label_is_in_the_legend_only_when_a_node_has_none(y, entries, rng):
    task = type("Task", (), {"y": np.array(y), "num_classes": 2})()
    run = RunResult(seed=7, scores=Scores({"test_acc": 0.815}))
    ax = require_matplotlib().Figure().subplots()
    _draw_embedding(ax, task, rng.standard_normal((4, 3)), run, ACCURACY_METRICS)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == entries


def test_the_sweep_legend_covers_no_curve(sweep_result, tmp_path, monkeypatch):
    """One legend under the two panels, outside both: inside one it covered the dense curve."""
    from mgsparse.cli import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path, dpi: figures.append(fig) or path)
    plot_sweep(sweep_result, tmp_path / "sweep.png")
    (fig,) = figures
    fig.draw_without_rendering()  # the layout done, so the boxes are where the PNG has them
    legends = [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend())]
    assert [t.get_text() for t in legends[0].get_texts()][:2] == ["sparse", "dense"]
    for legend in legends:
        box = legend.get_window_extent()
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent())


def test_runs_that_are_not_folds_keep_the_mean_and_band():
    runs = _fold_runs([[0.5, 0.6, 0.7], [0.7, 0.8, 0.9]])
    ax = require_matplotlib().Figure().subplots()
    _draw_curves(ax, runs, ("train_acc", "val_acc"), "accuracy", ACCURACY_METRICS)
    assert len(ax.get_lines()) == 2 and len(ax.collections) == 2  # a mean and a band each
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [0.6, 0.7, 0.8])
    assert ax.get_title() == "accuracy per epoch, mean ± std over 2 runs"


def test_pca_2d_keeps_the_two_directions_of_largest_variance():
    rng = np.random.default_rng(0)
    h = rng.normal(size=(200, 3)) * [10.0, 0.01, 3.0]
    p = pca_2d(h)
    assert p.shape == (200, 2)
    assert np.var(p[:, 0]) == pytest.approx(np.var(h[:, 0]), rel=0.01)
    assert np.var(p[:, 1]) == pytest.approx(np.var(h[:, 2]), rel=0.01)
    assert np.var(p, axis=0).sum() <= np.var(h, axis=0).sum()
    assert pca_2d(h[:, :1]).shape == (200, 2)  # one column: its axis and zeros


def test_sweep_plot_is_a_png(sweep_result, tmp_path):
    path = plot_sweep(sweep_result, tmp_path / "sweep.png")
    data = path.read_bytes()
    assert data[:8] == PNG
    assert len(data) > 20_000  # two panels with axes, lines and labels


def test_without_matplotlib_the_sweep_plot_says_how_to_install_it(sweep_result, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` now fails
    with pytest.raises(MgsparseError) as info:
        plot_sweep(sweep_result, tmp_path / "sweep.png")
    assert "pip install matplotlib" in str(info.value)
    assert not (tmp_path / "sweep.png").exists()


def test_an_unwritable_plot_path_is_one_error(tmp_path, sweep_result):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(MgsparseError, match="cannot create the folder of"):
        plot_sweep(sweep_result, blocker / "sweep.png")
    (tmp_path / "taken.png").mkdir()
    with pytest.raises(MgsparseError, match="cannot write plot"):
        plot_sweep(sweep_result, tmp_path / "taken.png")


def test_a_plot_into_a_missing_folder_creates_it(tmp_path, sweep_result):
    path = plot_sweep(sweep_result, tmp_path / "missing" / "sweep.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_importing_plots_does_not_import_matplotlib():
    probe = ("import json, sys, mgsparse.cli.plots; "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('matplotlib'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    header = path.read_bytes()[:24]
    assert header[:8] == PNG and header[12:16] == b"IHDR"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_cora_pictures_are_curves_and_the_embedding_of_every_node(tmp_path, mirror_env):
    """`mgsparse train configs/cora.yaml --plot`: a 15 × 4.5 inch PNG at 110 dpi, drawn from
    the runs' rows and from the hidden layer of every one of Cora's 2,708 nodes."""
    config = load_config(CONFIGS / "cora.yaml", ["train.epochs=5", "train.runs=2"])
    task = make_task(config)
    result = fit(config, task)
    path = save_training_plot(result, task, tmp_path / "cora.png")
    assert png_size(path) == (1650, 495)
    hidden = task.embedding(task.restore(result.runs[0].state))
    assert hidden.shape == (2708, config.model.hidden)
    epochs, mean, std = curve_band(result.runs, "val_loss")
    rows = np.array([[row.val_loss for row in run.rows] for run in result.runs])
    np.testing.assert_allclose(mean, rows.mean(axis=0))
    np.testing.assert_allclose(std, rows.std(axis=0))
    assert list(epochs) == [1, 2, 3, 4, 5]


KARATE_RUNS = ("train", CONFIGS / "karate.yaml", "--epochs", "30", "--runs", "4", "--quiet")


def test_the_embedding_drawn_is_the_best_runs(cli, tmp_path):
    """Best by the task's selection column (classification: the lowest validation loss of the
    kept parameters), not run 0; on karate over seeds 0..3 that is not seed 0."""
    out, picture = tmp_path / "run", tmp_path / "k.svg"
    result = cli(*KARATE_RUNS, "--out", out, "--plot", picture)
    assert result.exit_code == 0, result.output
    runs = json.loads((out / "metrics.json").read_text())["runs"]
    val_loss = {r["seed"]: r["epochs"][r["best_epoch"] - 1]["val_loss"] for r in runs}
    best = min(val_loss, key=val_loss.get)
    assert best != 0  # else the picture of run 0 would pass for the best run's
    assert f"last hidden layer (PCA), seed {best}:" in picture.read_text()


def test_a_sampled_runs_pictures_leave_no_blank_panel(cli, tmp_path):
    picture = tmp_path / "sampled.svg"
    result = cli("train", CONFIGS / "karate.yaml", "--epochs", "2", "--quiet", "--set",
                 "train.batch_size=8", "--set", "model.kind=sage", "--plot", picture)
    assert result.exit_code == 0, result.output
    svg = picture.read_text()
    assert 'width="720pt"' in svg  # two panels of 5 inches, not three with one blank
    assert "no embedding panel: a sampled run computes no whole-graph hidden layer" in svg
    assert "loss per epoch" in svg and "accuracy per epoch" in svg
