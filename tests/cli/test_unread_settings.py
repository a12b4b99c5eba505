"""What users set is what runs: a key a task would record and never read is refused with one
line naming it (exit 2), or honoured — `train.metrics` on graph classification, the node
datasets' keys on a set of graphs, `train.metrics` and edge weights on link prediction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.errors import ConfigError
from mgsparse.run import fit, make_task
from mgsparse.run.metrics import macro_f1, roc_auc
from tests.cli.test_links_cli import EXAMPLE, write_link_config
from tests.conftest import CONFIGS, one_line_error, require_real_tu

MUTAG = CONFIGS / "mutag-gin.yaml"
KARATE = CONFIGS / "karate.yaml"


@pytest.fixture
def tu(monkeypatch, tmp_path):
    """The real TU zips as the download source; the cache in a fresh folder."""
    monkeypatch.setenv("MGSPARSE_TU_URL", str(require_real_tu()))
    return ["--set", f"dataset.root={tmp_path / 'datasets'}", "--set", "monitor.memory=false",
            "--set", "model.hidden=16", "--set", "model.layers=2"]


# --- train.metrics -----------------------------------------------------------------------------

def test_train_metrics_are_scored_on_graph_classification(cli, tu, tmp_path):
    """f1 and auc mean on graphs what they mean on nodes: macro-F1 of the argmax and ROC-AUC
    of the softmax, on the validation and test graphs; they reach epochs.csv, the summary."""
    out = tmp_path / "run"
    result = cli("train", MUTAG, "--epochs", 3, "--out", out, "--quiet", *tu,
                 "--set", "train.metrics=[f1, auc]")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    run = metrics["runs"][0]
    assert {"val_f1", "test_f1", "val_auc", "test_auc"} <= set(run)
    assert 0 <= run["test_f1"] <= 1 and 0 <= run["test_auc"] <= 1
    assert metrics["summary"]["test_auc_mean"] == pytest.approx(run["test_auc"])
    assert "val_auc" in (out / "epochs.csv").read_text().splitlines()[0]


def test_graph_classification_scores_equal_the_metrics_on_its_logits(tu, tmp_path):
    config = load_config(MUTAG, [f"dataset.root={tmp_path}", "monitor.memory=false",
                                 "train.epochs=2", "train.metrics=[f1, auc]", "model.hidden=8"])
    task = make_task(config)
    run = fit(config, task).runs[0]
    z = task.logits(task.restore(run.state)).astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    test = task.test_idx
    assert run.scores["test_f1"] == pytest.approx(macro_f1(task.y[test], z[test].argmax(1)))
    assert run.scores["test_auc"] == pytest.approx(roc_auc(task.y[test], p[test]), abs=1e-6)


def test_train_metrics_on_a_link_run_is_refused(cli, tmp_path):
    config = write_link_config(tmp_path)
    config.write_text(config.read_text().replace("train:\n", "train:\n  metrics: [auc]\n"))
    line = one_line_error(cli("train", config, "--epochs", 2), 2, "train.metrics",
                          "task: link always scores AUC and average precision")
    assert line.startswith(f"error: {config}:16: ")  # the file and line of the key


@pytest.mark.parametrize("value, needle", [
    ("[f1, f1]", "train.metrics lists 'f1' twice (got ['f1', 'f1'])"),
    ("[]", "train.metrics must be a non-empty list of 'f1', 'auc' or null (got an empty list)"),
])
def test_train_metrics_repeated_or_empty_is_one_line(cli, value, needle):
    one_line_error(cli("train", KARATE, "--set", f"train.metrics={value}"), 2,
                   f"--set train.metrics={value}: {needle}")


# --- a set of graphs and the node datasets' keys --------------------------------------------

@pytest.mark.parametrize("setting", ["dataset.split=random", "dataset.normalize_features=false",
                                     "dataset.normalize_features=true", "dataset.num_val=3",
                                     "dataset.num_train_per_class=5"])
def test_node_dataset_keys_on_a_set_of_graphs_are_refused(cli, setting):
    key = setting.partition("=")[0]
    one_line_error(cli("train", MUTAG, "--set", setting), 2, f"--set {setting}: {key} is not "
                   "read for dataset 'mutag', a set of graphs", "remove it")


def test_a_node_key_written_in_a_graph_config_names_its_line(cli, tmp_path):
    path = tmp_path / "mutag.yaml"
    path.write_text("dataset:\n  name: mutag\n  split: public\n")
    one_line_error(cli("train", path), 2, f"{path}:3: dataset.split is not read")


# --- link prediction -------------------------------------------------------------------------

def test_a_weighted_edge_list_with_task_link_is_refused(cli, tmp_path):
    edges = np.loadtxt(EXAMPLE / "edges.csv", dtype=np.int64, delimiter=",")
    weighted = tmp_path / "weighted.csv"
    weighted.write_text("".join(f"{s},{t},{1 + (s + t) % 3}\n" for s, t in edges.tolist()))
    config = write_link_config(tmp_path, edges=weighted)
    with pytest.raises(ConfigError, match="task: link would ignore edge weights"):
        make_task(load_config(config))
    one_line_error(cli("train", config, "--epochs", 2, "--out", tmp_path / "run"), 2,
                   "task: link would ignore edge weights", "edges carry weights")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("ratio, needle", [
    ("1e9", "link.neg_ratio must be <= 1000 sampled non-edges per training edge (got 1e+09)"),
    ("500", "link.neg_ratio 500 asks for"),
])
def test_an_impossible_neg_ratio_names_the_key(cli, ratio, needle):
    one_line_error(cli("train", KARATE, "--set", "task=link", "--set", f"link.neg_ratio={ratio}",
                       "--epochs", 2), 2, needle)
