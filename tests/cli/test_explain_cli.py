"""`mgsparse explain` as a user runs it: one node's table and files, many nodes' figures, and
bad input as one line, exit 2 (1 for a damaged folder), nothing written."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import CONFIGS, one_line_error


def _train(tmp_path_factory, name, *sets):
    from typer.testing import CliRunner

    from mgsparse.cli import app
    run = tmp_path_factory.mktemp(name) / "run"
    args = ["train", str(CONFIGS / f"{name}.yaml"), "--out", str(run), "--quiet"]
    for s in sets:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return run


@pytest.fixture(scope="module")
def ba_run(tmp_path_factory):
    return _train(tmp_path_factory, "ba-shapes", "train.epochs=300")


def test_one_node_prints_its_top_edges_and_writes_the_whole_mask(cli, tmp_path, ba_run):
    out, figures = tmp_path / "mask.csv", tmp_path / "f.json"
    result = cli("explain", ba_run, "--node", 304, "--method", "saliency", "--out", out,
                 "--json", figures)
    assert result.exit_code == 0, result.output
    assert "node 304: predicted class" in result.stdout and "motif edge" in result.stdout
    with out.open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["node", "source", "target", "score", "truth"]
    assert len(rows) > 13 and all(r[0] == "304" for r in rows[1:])
    assert {r[4] for r in rows[1:]} == {"0", "1"}
    data = json.loads(figures.read_text())
    assert data["nodes"] == 1 and 0.0 <= data["auc_mean"] <= 1.0
    assert set(data) >= {"auc_mean", "fidelity_plus", "fidelity_minus", "sparsity",
                         "seconds_per_item"}


def test_many_nodes_from_a_file_report_their_means(cli, tmp_path, ba_run):
    ids = tmp_path / "nodes.txt"
    ids.write_text("300\n305\n310\n")
    figures = tmp_path / "f.json"
    result = cli("explain", ba_run, "--nodes", ids, "--method", "ig", "--steps", 5,
                 "--json", figures)
    assert result.exit_code == 0, result.output
    data = json.loads(figures.read_text())
    assert data["nodes"] == 3 and data["auc_nodes"] == 3 and data["method"] == "ig"
    assert "3 nodes (ig): AUC" in result.stderr


def test_a_plot_is_drawn(cli, tmp_path, ba_run):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "n.png"
    result = cli("explain", ba_run, "--node", 300, "--method", "saliency", "--plot", picture)
    assert result.exit_code == 0, result.output
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (["--node", 700], "--node 700 is outside 'ba-shapes'"),
    (["--node", 1, "--method", "grad"], "--method 'grad': one of saliency, ig, gnnexplainer"),
    (["--node", 1, "--steps", 0], "--steps must be >= 1"),
    (["--node", 1, "--edge-ent", 0], "--edge-ent must be > 0"),
    (["--node", 1, "--top-k", 0], "--top-k must be >= 1"),
    ([], "give --node N or --nodes"),
    (["--nodes", "nowhere.txt"], "neither 'motif' nor a file"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(cli, tmp_path, ba_run, args, needle):
    out = tmp_path / "m.csv"
    one_line_error(cli("explain", ba_run, *args, "--out", out), 2, needle)
    assert not out.exists()


def test_runs_it_cannot_explain_say_why(cli, tmp_path, tmp_path_factory, ba_run):
    one_line_error(cli("explain", tmp_path, "--node", 1), 2, "is not a run folder")
    (tmp_path / "metrics.json").write_text("{not json")
    one_line_error(cli("explain", tmp_path, "--node", 1), 1, "is damaged")
    karate = _train(tmp_path_factory, "karate", "train.epochs=5")
    one_line_error(cli("explain", karate, "--nodes", "motif"), 2, "has no planted answer")
    gat = _train(tmp_path_factory, "karate", "train.epochs=5", "model.kind=gat")
    one_line_error(cli("explain", gat, "--node", 1), 2, "explain masks the entries of Â")


def test_ctrl_c_keeps_the_nodes_already_written(cli, tmp_path, ba_run, monkeypatch):
    """A Ctrl-C during the second node: it finishes, the loop stops, both nodes' rows stay in
    the CSV, the JSON says interrupted, exit 130; the handlers are restored after."""
    import os
    import signal

    from mgsparse.run.explain.saved import Explainer

    explain, calls = Explainer.explain, []

    def interrupted(self, *args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return explain(self, *args, **kwargs)

    monkeypatch.setattr(Explainer, "explain", interrupted)
    before = signal.getsignal(signal.SIGINT)
    out, figures = tmp_path / "m.csv", tmp_path / "f.json"
    result = cli("explain", ba_run, "--nodes", "motif", "--method", "saliency", "--out", out,
                 "--json", figures)
    assert result.exit_code == 130, result.output
    assert calls == [300, 301]
    with out.open() as f:
        nodes = {row[0] for row in list(csv.reader(f))[1:]}
    assert nodes == {"300", "301"}
    data = json.loads(figures.read_text())
    assert data["interrupted"] is True and data["nodes"] == 2
    assert signal.getsignal(signal.SIGINT) is before
