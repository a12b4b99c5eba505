"""`mgsparse predict`: the rows, classes and probabilities of a saved run agree with what
`evaluate` scores; a GraphSAGE trained on one graph scores a graph it never saw; a damaged
run folder or a graph of another feature width is one line, with nothing written. The same for
graph classification (a fold's test graphs score the fold's test accuracy) and link prediction
(a split's pairs score its AUC; the pairs of a file score as those of the split)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from mgsparse.engine import Tensor, no_grad
from mgsparse.run.build import build_model
from mgsparse.run.kinds import make_task
from mgsparse.run.metrics import roc_auc
from mgsparse.run.placed import load_graph
from mgsparse.run.predict import head_inputs, saved_run
from mgsparse.run.tasks.graphs import stratified_folds
from mgsparse.run.tasks.nodes import GraphTask
from tests.cli.test_links_cli import write_link_config
from tests.conftest import CONFIGS, one_line_error, require_real_data, require_real_tu

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



def test_a_file_of_node_ids_is_read_and_a_bad_one_is_a_usage_error(cli, tmp_path, sage_run):
    out, ids = tmp_path / "p.csv", tmp_path / "nodes.txt"
    ids.write_text("7\n0\n59\n")
    assert cli("predict", sage_run, "--split", ids, "--out", out).exit_code == 0
    assert read_rows(out)[1][:, 0].tolist() == [7, 0, 59]
    out.unlink()
    ids.write_text("7\n60\n")
    one_line_error(cli("predict", sage_run, "--split", ids, "--out", out), 2,
                   f"{ids} line 2: node 60 out of range [0, 60)")
    assert not out.exists()

# --- graph classification -------------------------------------------------------------------

@pytest.fixture(scope="module")
def mutag_folds(tmp_path_factory):
    """GIN on the real MUTAG, 3 stratified folds, a few epochs of a small model."""
    from typer.testing import CliRunner

    from mgsparse.cli import app
    folder = tmp_path_factory.mktemp("mutag")
    sets = [f"dataset.url={require_real_tu()}", f"dataset.root={folder / 'datasets'}",
            "monitor.memory=false", "model.hidden=16", "model.layers=2"]
    result = CliRunner().invoke(app, ["train", str(CONFIGS / "mutag-gin.yaml"), "--folds", "3",
                                      "--epochs", "12", "--out", str(folder / "run"), "--quiet",
                                      *(a for s in sets for a in ("--set", s))])
    assert result.exit_code == 0, result.output
    return folder / "run"


def test_a_folds_test_graphs_score_that_folds_test_accuracy(cli, tmp_path, mutag_folds):
    result = cli("predict", mutag_folds, "--split", "test", "--run", 1, "--out", tmp_path / "t.csv")
    assert result.exit_code == 0, result.output
    assert "63 graphs of fold 1 (seed 1)" in result.output  # run i of --folds is fold i
    header, rows = read_rows(tmp_path / "t.csv")
    assert header == ["graph", "pred", "p0", "p1"]
    config, _, _ = saved_run(mutag_folds)
    y = load_graph(config.dataset).y
    fold = np.flatnonzero(stratified_folds(y, 3, 0) == 1)  # the task's folds, from its seed
    assert np.array_equal(rows[:, 0], fold)
    assert np.allclose(rows[:, 2:].sum(axis=1), 1.0, atol=1e-6)
    assert np.array_equal(rows[:, 1], rows[:, 2:].argmax(axis=1))
    accuracy = float(np.mean(rows[:, 1] == y[fold]))
    scored = json.loads(cli("evaluate", mutag_folds, "--json").stdout)[1]["test_acc"]
    saved = json.loads((mutag_folds / "metrics.json").read_text())["runs"][1]["test_acc"]
    assert accuracy == scored == saved
    assert set(rows[:, 1]) == {0, 1}  # not a constant answer: the test can tell models apart
    every = cli("predict", mutag_folds, "--split", "all", "--run", 1, "--out", tmp_path / "a.csv")
    assert every.exit_code == 0 and "188 graphs of fold 1" in every.output
    _, all_rows = read_rows(tmp_path / "a.csv")
    assert all_rows.shape == (188, 4) and np.array_equal(all_rows[fold], rows)


def test_graph_embeddings_are_what_the_heads_read(cli, tmp_path, mutag_folds):
    """[r⁰ | r¹ | r²] (G, 7 + 2·16): the heads applied to their slices sum to the logits."""
    result = cli("predict", mutag_folds, "--split", "all", "--out", tmp_path / "p.csv",
                 "--embeddings", tmp_path / "e.npy")
    assert result.exit_code == 0, result.output
    e = np.load(tmp_path / "e.npy")
    assert e.shape == (188, 39)
    config, _, state = saved_run(mutag_folds)
    task = make_task(config)
    model = task.restore(state)
    assert np.array_equal(e, head_inputs(task, model))
    with no_grad():
        by_hand = sum(head(Tensor(e[:, a:b])).data for head, a, b in
                      zip(model.heads, (0, 7, 23), (7, 23, 39)))
    assert np.allclose(by_hand, task.logits(model), atol=1e-4)
    _, rows = read_rows(tmp_path / "p.csv")
    assert np.array_equal(rows[:, 1], by_hand.argmax(axis=1))


def test_graph_runs_read_graph_files_and_other_sets_or_say_why_not(cli, tmp_path, mutag_folds):
    out = tmp_path / "p.csv"
    ids = tmp_path / "ids.txt"
    ids.write_text("# graphs\n5\n187\n0\n")
    assert cli("predict", mutag_folds, "--split", ids, "--out", out).exit_code == 0
    assert read_rows(out)[1][:, 0].tolist() == [5, 187, 0]
    out.unlink()
    ids.write_text("5\n188\n")
    one_line_error(cli("predict", mutag_folds, "--split", ids, "--out", out), 2,
                   f"{ids} line 2: graph 188 out of range [0, 188)")
    ids.write_text("5\nfive\n")
    one_line_error(cli("predict", mutag_folds, "--split", ids, "--out", out), 2,
                   f"{ids} line 2: graph id 'five' is not an integer")
    one_line_error(cli("predict", mutag_folds, "--graph", CONFIGS / "cora.yaml", "--out", out),
                   2, "'cora' is a graph, the saved run read a set of graphs")
    nci1 = tmp_path / "nci1.yaml"
    nci1.write_text(f"dataset:\n  name: nci1\n  url: {require_real_tu()}\n"
                    f"  root: {tmp_path / 'datasets'}\n")
    one_line_error(cli("predict", mutag_folds, "--graph", nci1, "--out", out), 2,
                   "its nodes have 37 features, the saved model reads 7")
    one_line_error(cli("predict", mutag_folds, "--pairs", ids, "--out", out), 2,
                   "--pairs scores node pairs with a link run", "'mutag'")
    assert not out.exists()
    # the same set from another folder is the inductive case in its simplest form
    mirror = tmp_path / "mutag.yaml"
    mirror.write_text(f"dataset:\n  name: mutag\n  url: {require_real_tu()}\n"
                      f"  root: {tmp_path / 'elsewhere'}\n")
    assert cli("predict", mutag_folds, "--graph", mirror, "--split", "all", "--out",
               out).exit_code == 0
    assert cli("predict", mutag_folds, "--split", "all", "--out", tmp_path / "own.csv"
               ).exit_code == 0
    assert out.read_text() == (tmp_path / "own.csv").read_text()


# --- link prediction ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
    """A GAE on the two-community example's 60 nodes and 145 edges, two runs."""
    from typer.testing import CliRunner

    from mgsparse.cli import app
    folder = tmp_path_factory.mktemp("link")
    result = CliRunner().invoke(app, ["train", str(write_link_config(folder)), "--epochs", "30",
                                      "--runs", "2", "--out", str(folder / "run"), "--quiet"])
    assert result.exit_code == 0, result.output
    return folder / "run"


def read_pairs(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=np.float64)


def test_a_splits_pairs_score_its_auc_and_are_its_edges_and_non_edges(cli, tmp_path, link_run):
    result = cli("predict", link_run, "--run", 1, "--out", tmp_path / "s.csv",
                 "--embeddings", tmp_path / "z.npy")
    assert result.exit_code == 0, result.output
    assert "58 pairs of run 1 (seed 1)" in result.output
    header, rows = read_pairs(tmp_path / "s.csv")
    assert header == ["src", "dst", "label", "score"]
    labels, scores = rows[:, 2].astype(int), rows[:, 3]
    assert labels.tolist() == [1] * 29 + [0] * 29
    scored = json.loads(cli("evaluate", link_run, "--json").stdout)[1]["test_auc"]
    saved = json.loads((link_run / "metrics.json").read_text())["runs"][1]["test_auc"]
    assert roc_auc(labels, scores) == scored == saved  # the scores as written, exactly
    edges = np.loadtxt(EXAMPLE / "edges.csv", delimiter=",", dtype=np.int64)
    known = {(min(u, v), max(u, v)) for u, v in edges.tolist()}
    pairs = rows[:, :2].astype(np.int64)
    assert [(min(u, v), max(u, v)) in known for u, v in pairs.tolist()] == labels.astype(
        bool).tolist()
    z = np.load(tmp_path / "z.npy")  # σ(⟨z_u, z_v⟩): the inner-product decoder, by hand
    assert z.shape == (60, 8)
    by_hand = 1 / (1 + np.exp(-np.einsum("ij,ij->i", z[pairs[:, 0]], z[pairs[:, 1]])))
    assert np.allclose(scores, by_hand, atol=1e-6)
    val = cli("predict", link_run, "--split", "val", "--out", tmp_path / "v.csv")
    assert val.exit_code == 0 and "28 pairs of run 0" in val.output
    val_pairs = read_pairs(tmp_path / "v.csv")[1][:, :2].astype(np.int64)
    assert not {tuple(p) for p in val_pairs.tolist()} & {tuple(p) for p in pairs.tolist()}


def test_the_pairs_of_a_file_score_as_in_the_split(cli, tmp_path, link_run):
    assert cli("predict", link_run, "--out", tmp_path / "s.csv").exit_code == 0
    rows = read_pairs(tmp_path / "s.csv")[1]
    chosen = rows[[0, 40, 3, 57]]
    pairs = tmp_path / "pairs.txt"
    lines = [f"{int(u)},{int(v)}" if k % 2 else f"{int(u)} {int(v)}" for k, (u, v) in
             enumerate(chosen[:, :2])]
    pairs.write_text("# src dst\n" + "\n".join(lines) + "\n")
    result = cli("predict", link_run, "--pairs", pairs, "--out", tmp_path / "p.csv")
    assert result.exit_code == 0, result.output
    assert "4 pairs of run 0 (seed 0)" in result.output
    header, scored = read_pairs(tmp_path / "p.csv")
    assert header == ["src", "dst", "score"]
    assert np.array_equal(scored[:, :2], chosen[:, :2])
    assert np.array_equal(scored[:, 2], chosen[:, 3])


def test_bad_pairs_and_splits_of_a_link_run_are_one_line_writing_nothing(
        cli, tmp_path, link_run, sage_run):
    out, pairs = tmp_path / "p.csv", tmp_path / "pairs.csv"
    pairs.write_text("0,1\n# a comment\n3,60\n")
    one_line_error(cli("predict", link_run, "--pairs", pairs, "--out", out), 2,
                   f"{pairs} line 3: node id out of range", "[0, 60)")
    pairs.write_text("0,1,0.5\n")
    one_line_error(cli("predict", link_run, "--pairs", pairs, "--out", out), 2,
                   "3 columns, expected 2 (src, dst)")
    one_line_error(cli("predict", link_run, "--pairs", pairs, "--split", "val", "--out", out),
                   2, "--pairs and --split: give one")
    one_line_error(cli("predict", link_run, "--split", "all", "--out", out), 2,
                   "--split 'all': a link run holds out val and test pairs", "--pairs FILE")
    one_line_error(cli("predict", link_run, "--graph", CONFIGS / "csv-example.yaml",
                       "--out", out), 2, "--graph: a link run scores pairs of the graph it split")
    one_line_error(cli("predict", sage_run, "--pairs", pairs, "--out", out), 2,
                   "--pairs scores node pairs with a link run")
    assert not out.exists()
