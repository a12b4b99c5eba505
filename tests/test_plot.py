"""The decision-boundary + loss-curve picture: written when matplotlib is present, and a one-line
install hint (not an ImportError) when it is not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from mgsparse.config import load_config
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.plot import INSTALL_HINT, check_plot_target, require_matplotlib, save_training_plot
from mgsparse.train_points import fit_points

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib not installed (pip install 'mgsparse[plot]')")


@pytest.fixture(scope="module")
def moons_result():
    return fit_points(load_config(CONFIGS / "moons.yaml", ["monitor.memory=false",
                                                           "train.epochs=5"]))


@needs_matplotlib
def test_png_is_written(tmp_path, moons_result):
    path = save_training_plot(moons_result, tmp_path / "moons.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # two panels with points, regions and curves, not an empty canvas


@needs_matplotlib
def test_svg_holds_both_panels(tmp_path, moons_result):
    text = save_training_plot(moons_result, tmp_path / "moons.svg").read_text()
    assert "<svg" in text
    assert "loss per epoch" in text and "test accuracy" in text


def test_missing_matplotlib_gives_the_install_hint(monkeypatch, moons_result, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` now raises ImportError
    with pytest.raises(MgsparseError) as info:
        require_matplotlib()
    assert str(info.value) == ("plotting needs matplotlib, which is not installed: "
                               "pip install 'mgsparse[plot]'")
    assert INSTALL_HINT in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(MgsparseError, match="pip install 'mgsparse"):
        save_training_plot(moons_result, tmp_path / "moons.png")
    assert not (tmp_path / "moons.png").exists()


def test_plot_targets_are_checked_before_training():
    with pytest.raises(ConfigError, match="needs a point-cloud dataset .* not 'karate'"):
        check_plot_target("k.png", "karate")
    with pytest.raises(ConfigError, match=r"must end in \.png, \.svg, \.pdf"):
        check_plot_target("moons.jpg", "moons")
