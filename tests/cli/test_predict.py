"""`mgsparse predict`: the rows, classes and probabilities of a saved run agree with what
`evaluate` scores; a GraphSAGE trained on one graph scores a graph it never saw; a damaged
run folder or a graph of another feature width is one line, with nothing written."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from mgsparse.engine import Tensor, no_grad
from mgsparse.run.build import build_model
from mgsparse.run.placed import load_graph
from mgsparse.run.predict import saved_run
from mgsparse.run.tasks.nodes import GraphTask
from tests.conftest import CONFIGS, one_line_error, require_real_data

EXAMPLE = CONFIGS / "examples" / "two-communities"


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=float)


def test_predict_on_cora_writes_every_node_and_its_test_argmax_is_evaluates_accuracy(
        cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", str(require_real_data()))
    run = tmp_path / "cora"
    trained = cli("train", CONFIGS / "cora.yaml", "--out", run, "--quiet", "--epochs", 60)
    assert trained.exit_code == 0, trained.output
    result = cli("predict", run, "--split", "all", "--out", tmp_path / "p.csv",
                 "--embeddings", tmp_path / "e.npy")
    assert result.exit_code == 0, result.output
    header, rows = read_rows(tmp_path / "p.csv")
    assert header == ["node", "pred", *(f"p{c}" for c in range(7))]
    assert rows.shape == (2708, 9)
    assert np.array_equal(rows[:, 0], np.arange(2708))
    assert np.allclose(rows[:, 2:].sum(axis=1), 1.0, atol=1e-6)
    assert np.array_equal(rows[:, 1], rows[:, 2:].argmax(axis=1))
    assert np.load(tmp_path / "e.npy").shape == (2708, 16)
    config, _, _ = saved_run(run)
    task = GraphTask(config, load_graph(config.dataset))
    test = task.test_idx
    accuracy = float(np.mean(rows[test, 1] == task.y[test]))
    scored = json.loads(cli("evaluate", run, "--json").stdout)[0]["test_acc"]
    assert accuracy == scored and accuracy > 0.7
    only_test = cli("predict", run, "--out", tmp_path / "t.csv")  # the default split: test
    assert only_test.exit_code == 0
    assert np.array_equal(read_rows(tmp_path / "t.csv")[1], rows[test])


def new_graph(folder, seed: int = 11, nodes: int = 40):
    """A graph the model never saw, drawn as the two-community example is (4 features)."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], nodes // 2)
    same = y[:, None] == y[None, :]
    source, target = np.nonzero(np.triu(rng.random((nodes, nodes)) < np.where(same, 0.2, 0.02),
                                        k=1))
    x = np.hstack([(y[:, None] - 0.5) + rng.normal(0.0, 1.0, (nodes, 2)),
                   rng.normal(0.0, 1.0, (nodes, 2))])
    np.savetxt(folder / "edges.csv", np.column_stack([source, target]), fmt="%d", delimiter=",")
    np.savetxt(folder / "features.csv", x, fmt="%.3f", delimiter=",")
    np.savetxt(folder / "labels.csv", y, fmt="%d")
    config = folder / "new.yaml"
    config.write_text("dataset:\n  name: csv\n  edges: edges.csv\n  features: features.csv\n"
                      "  labels: labels.csv\n  normalize_features: false\n  split: random\n"
                      "  num_train_per_class: 2\n  num_val: 4\n  num_test: 10\n")
    return config, x, np.column_stack([source, target]), y


@pytest.fixture(scope="module")
def sage_run(tmp_path_factory):
    from typer.testing import CliRunner

    from mgsparse.cli import app
    run = tmp_path_factory.mktemp("sage") / "run"
    result = CliRunner().invoke(app, ["train", str(CONFIGS / "csv-example.yaml"), "--out",
                                      str(run), "--quiet", "--set", "model.kind=sage"])
    assert result.exit_code == 0, result.output
    return run


def test_an_inductive_sage_run_scores_a_graph_it_never_saw(cli, tmp_path, sage_run):
    config, x, edges, y = new_graph(tmp_path)
    result = cli("predict", sage_run, "--graph", config, "--split", "all",
                 "--out", tmp_path / "new.csv")
    assert result.exit_code == 0, result.output
    _, rows = read_rows(tmp_path / "new.csv")
    assert rows.shape == (40, 4) and np.array_equal(rows[:, 0], np.arange(40))
    # the saved model on the new graph's features and both-way edge list, by hand
    saved, _, state = saved_run(sage_run)
    x = np.loadtxt(tmp_path / "features.csv", delimiter=",", dtype=np.float32)
    model = build_model(saved.model, 4, 2, np.random.default_rng(0))
    model.load_state_dict(state)
    with no_grad():
        z = model.eval()(Tensor(x), np.hstack([edges.T, edges.T[::-1]])).data
    p = np.exp(z - z.max(axis=1, keepdims=True))
    assert np.allclose(rows[:, 2:], p / p.sum(axis=1, keepdims=True), atol=1e-5)
    assert np.array_equal(rows[:, 1], z.argmax(axis=1))
    assert np.mean(rows[:, 1] == y) >= 0.7  # it learned something that carries over


def test_predict_refuses_a_damaged_folder_and_another_feature_width_writing_nothing(
        cli, tmp_path, sage_run):
    out = tmp_path / "p.csv"
    wide = tmp_path / "wide"
    wide.mkdir()
    config, x, _, _ = new_graph(wide)
    np.savetxt(wide / "features.csv", np.hstack([x, x[:, :1]]), fmt="%.3f", delimiter=",")
    one_line_error(cli("predict", sage_run, "--graph", config, "--out", out), 2,
                   "5 features", "reads 4")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "metrics.json").write_text('{"config": ')
    one_line_error(cli("predict", damaged, "--out", out), 1, "metrics.json", "damaged")
    params = tmp_path / "params"
    params.mkdir()
    (params / "metrics.json").write_bytes((sage_run / "metrics.json").read_bytes())
    (params / "params_run0.npz").write_bytes(b"truncated")
    one_line_error(cli("predict", params, "--out", out), 1, "params_run0.npz", "damaged")
    one_line_error(cli("predict", sage_run, "--split", "nodes.txt", "--out", out), 2,
                   "--split 'nodes.txt'")
    assert not out.exists()
    out.write_text("kept\n")
    one_line_error(cli("predict", damaged, "--out", out), 1, "damaged")
    assert out.read_text() == "kept\n"
