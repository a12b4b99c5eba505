"""`mgsparse graph` and `to_dot` on a real training step: every op application drawn once, every
use an edge, DOT that Graphviz parses, and the command's files, hints and exit codes."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import pytest
import scipy.sparse as sp

from mgsparse.config import load_config
from mgsparse.engine import Function, Tensor
from mgsparse.engine.draw import summarize, to_dot
from mgsparse.run import first_step_loss, make_task
from mgsparse.sparse import SparseTensor
from mgsparse.sparse.structure import Structure
from tests.conftest import CONFIGS, one_line_error

KARATE = CONFIGS / "karate.yaml"
MOONS = CONFIGS / "moons.yaml"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz `dot` not installed (apt-get install graphviz)")


@pytest.fixture
def run(cli):
    """The shared CLI fixture, under the name these tests have always used."""
    return cli


@pytest.fixture
def recorded(monkeypatch):
    """(op name, number of Tensor / sparse-structure arguments) of every op the engine records,
    counted at `Function.apply` itself: a count that does not walk the graph as `draw` does."""
    applications: list[tuple[str, int]] = []
    original = Function.apply.__func__

    def counting(cls, *args):
        out = original(cls, *args)
        if out._ctx is not None:
            uses = sum(isinstance(a, (Tensor, SparseTensor, Structure)) or sp.issparse(a)
                       for a in args)
            applications.append((cls.__name__, uses))
        return out

    monkeypatch.setattr(Function, "apply", classmethod(counting))
    return applications


def karate_step_loss(recorded: list | None = None, *overrides: str) -> Tensor:
    """The loss `mgsparse train configs/karate.yaml` differentiates first. Placing the task
    may run ops of its own (the memory budget's estimate); `recorded` is cleared after it."""
    config = load_config(KARATE, overrides)
    task = make_task(config)
    if recorded is not None:
        recorded.clear()
    return first_step_loss(config, task)


def op_nodes(dot: str) -> dict[str, str]:
    """DOT op-node name -> op label."""
    return dict(re.findall(r'  (op\d+) \[shape=ellipse, label="(\w+)"\];', dot))


# ---------------------------------------------------------------- to_dot on a GCN step


def test_gcn_step_draws_every_op_once_per_use(recorded):
    loss = karate_step_loss(recorded, "train.receptive_field=false")  # Â dense, as counted
    dot = to_dot(loss)
    ops = op_nodes(dot)
    drawn = Counter(ops.values())
    # counted three ways: DOT op nodes, draw's own census, and the engine's recorded applications
    assert drawn == Counter(summarize(loss)) == Counter(name for name, _ in recorded)
    # by hand, for 2 GCNConv layers on karate (sparse one-hot X, dense Â at 16% density):
    # X·W1 (SpMM), Â·(XW1) (MatMul), +b1, ReLU and the next dropout (one op), H·W2 and
    # Â·(HW2) (MatMul), +b2, cross-entropy; the dropout of the constant input X records nothing
    assert drawn == {"SpMM": 1, "MatMul": 3, "Add": 2, "ReluDropout": 1, "CrossEntropy": 1}
    edges_in = Counter(re.findall(r"  n\d+ -> (op\d+);", dot))
    # SpMM uses X's stored values, its index structure and W1: three edges
    assert ("SpMM", 3) in recorded
    assert sorted((ops[op], edges_in[op]) for op in ops) == sorted(recorded)
    assert all(dot.count(f"  {op} -> n") == 1 for op in ops)  # one output per application


@needs_dot
def test_gcn_step_dot_parses_with_graphviz():
    done = subprocess.run(["dot", "-Tsvg"], input=to_dot(karate_step_loss()), text=True,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout and "CrossEntropy" in done.stdout


# ---------------------------------------------------------------- the command


def test_writes_the_dot_of_the_first_step(run, tmp_path):
    target = tmp_path / "karate.dot"
    result = run("graph", KARATE, "--out", target, "--format", "dot")
    assert result.exit_code == 0, result.output
    assert target.read_text() == to_dot(karate_step_loss())
    # on the training rows' receptive field: X·W1, Â1·(XW1) + b1 and Â2·(HW2) + b2 are SpMMs
    # (run/field.py), each bias added inside its propagation (sparse.spmm's bias); the ReLU
    # and the next layer's dropout are one op (Tensor.relu_dropout)
    assert ("6 op applications (CrossEntropy 1, MatMul 1, ReluDropout 1, SpMM 3)"
            in result.output)
    assert not (tmp_path / "karate.svg").exists()


def test_point_cloud_graph_is_the_mlp_on_one_batch(run, tmp_path):
    result = run("graph", MOONS, "--out", tmp_path / "m.dot", "--format", "dot")
    assert result.exit_code == 0, result.output
    dot = (tmp_path / "m.dot").read_text()
    assert Counter(op_nodes(dot).values()) == {"LinearOp": 3, "Relu": 2, "CrossEntropy": 1}
    assert 'label="leaf\\n(32, 2) float32"' in dot  # one mini-batch of 32 points


@needs_dot
@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("png", b"\x89PNG")])
def test_renders_next_to_the_dot(run, tmp_path, fmt, magic):
    result = run("graph", KARATE, "--out", tmp_path / "g.dot", "--format", fmt)
    assert result.exit_code == 0, result.output
    assert (tmp_path / f"g.{fmt}").read_bytes().startswith(magic)
    assert "rendered" in result.output


def test_without_graphviz_it_says_how_to_install_and_keeps_the_dot(run, tmp_path, monkeypatch):
    monkeypatch.setattr("mgsparse.run.draw.shutil.which", lambda name: None)
    result = run("graph", KARATE, "--out", tmp_path / "g.dot")
    assert result.exit_code == 0, result.output
    assert "apt-get install graphviz" in result.output
    assert (tmp_path / "g.dot").is_file() and not (tmp_path / "g.svg").exists()


def test_a_failing_dot_program_is_a_one_line_error(run, tmp_path, monkeypatch):
    false = shutil.which("false")
    if false is None:
        pytest.skip("no `false` program to stand in for a broken dot")
    monkeypatch.setattr("mgsparse.run.draw.shutil.which", lambda name: false)
    result = run("graph", KARATE, "--out", tmp_path / "g.dot")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1
    assert lines[-1].startswith("error: dot -Tsvg") and "failed: exit status 1" in lines[-1]


def test_over_the_size_limit_writes_a_summary_with_a_warning(run, tmp_path):
    result = run("graph", KARATE, "--out", tmp_path / "g.dot", "--format", "dot",
                 "--max-nodes", "3")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "more than max_nodes=3" in result.output
    dot = (tmp_path / "g.dot").read_text()
    assert "graph too large to draw: 16 values (max_nodes=3)" in dot and "op0" not in dot


def test_usage_errors_exit_2_with_one_line(run, tmp_path):
    one_line_error(run("graph", tmp_path / "nope.yaml", "--out", tmp_path / "g.dot"), 2,
                   "nope.yaml: config file not found")
    one_line_error(run("graph", KARATE, "--out", tmp_path / "g.svg"), 2,
                   "names the DOT file")
    one_line_error(run("graph", KARATE, "--set", "model.hidden=0"), 2, "model.hidden")
    assert run("graph", KARATE, "--format", "jpg").exit_code == 2
    assert not (tmp_path / "g.dot").exists()
