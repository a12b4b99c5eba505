"""`draw_step`: the DOT of a config's first training step, rendered with Graphviz when it is
installed, a note (not an error) when it is not, one error when it fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mgsparse.engine.draw import to_dot
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.run import draw, make_task
from mgsparse.run.draw import draw_step
from mgsparse.run.loop import first_step_loss
from tests.conftest import make_config, moons_config


def test_the_dot_is_the_first_steps_loss(tmp_path):
    config = make_config()
    drawing = draw_step(config, tmp_path / "k.dot", "dot")
    assert drawing.dot_path == tmp_path / "k.dot" and drawing.rendered is None
    assert drawing.dot_path.read_text() == to_dot(first_step_loss(config, make_task(config)))
    # on the training rows' receptive field (run/field.py): X·W1 and both blocks are SpMMs, the
    # blocks' biases added inside them (sparse.spmm's bias), the ReLU and the next dropout one op
    assert drawing.op_counts == {"CrossEntropy": 1, "MatMul": 1, "ReluDropout": 1, "SpMM": 3}
    assert drawing.notes == []
    assert not (tmp_path / "k.svg").exists()


def test_a_point_cloud_step_is_the_mlp_on_one_batch(tmp_path):
    drawing = draw_step(moons_config(), tmp_path / "m.dot", "dot")
    assert drawing.op_counts == {"CrossEntropy": 1, "LinearOp": 3, "Relu": 2}
    assert 'label="leaf\\n(32, 2) float32"' in drawing.dot_path.read_text()


def test_without_graphviz_the_dot_is_kept_and_a_note_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(draw.shutil, "which", lambda name: None)
    drawing = draw_step(make_config(), tmp_path / "g.dot", "svg")
    assert drawing.rendered is None and drawing.dot_path.is_file()
    assert len(drawing.notes) == 1 and draw.INSTALL_GRAPHVIZ in drawing.notes[0]
    assert not (tmp_path / "g.svg").exists()


def test_a_failing_dot_program_is_one_error(tmp_path, monkeypatch):
    false = shutil.which("false")
    if false is None:
        pytest.skip("no `false` program to stand in for a broken dot")
    monkeypatch.setattr(draw.shutil, "which", lambda name: false)
    with pytest.raises(MgsparseError, match=r"dot -Tpng .* failed: exit status 1"):
        draw_step(make_config(), tmp_path / "g.dot", "png")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not installed")
def test_renders_next_to_the_dot(tmp_path):
    drawing = draw_step(make_config(), tmp_path / "g.dot", "svg")
    assert drawing.rendered == tmp_path / "g.svg"
    assert drawing.rendered.read_bytes().startswith(b"<?xml")


def test_over_the_size_limit_the_note_carries_the_warning(tmp_path):
    drawing = draw_step(make_config(), tmp_path / "g.dot", "dot", max_nodes=3)
    assert len(drawing.notes) == 1 and "more than max_nodes=3" in drawing.notes[0]
    assert "graph too large to draw: 16 values" in drawing.dot_path.read_text()


@pytest.mark.parametrize("name", ["g.svg", "g.PNG"])
def test_an_image_path_for_the_dot_is_a_config_error_before_any_work(tmp_path, name):
    with pytest.raises(ConfigError, match="names the DOT file"):
        draw_step(make_config(), Path(tmp_path / name))
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_dot_path_is_one_error(tmp_path):
    with pytest.raises(MgsparseError, match="cannot write"):
        draw_step(make_config(), tmp_path / "missing" / "g.dot", "dot")
