"""Edge weights: a CSV edge list's third column (`Graph.edge_weight`) is A's entries in a GCN's
Â = D^-1/2 (A + I) D^-1/2, from a file as from Python; readers that would ignore them refuse."""

from __future__ import annotations

import csv
import dataclasses
import shutil

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.data import karate_club
from mgsparse.data.user import load_csv_graph
from mgsparse.errors import ConfigError
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.run import GraphTask, fit, make_task
from tests.conftest import REPO_ROOT, make_config, one_line_error

CONFIG = REPO_ROOT / "configs" / "csv-example.yaml"
EXAMPLE = REPO_ROOT / "configs" / "examples" / "two-communities"
SCORES = ("loss", "val_loss", "train_acc", "val_acc", "test_acc", "grad_norm")


def pair_weight(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """A weight per unordered pair, 0.25 .. 4, the same both ways."""
    return (0.25 * 2.0 ** ((source * 7 + target * 7 + source * target) % 5)).astype(np.float32)


@pytest.fixture
def weighted(tmp_path):
    """The shipped example twice over: its edge list as is, and with a weight column."""
    folder = tmp_path / "ex"
    shutil.copytree(EXAMPLE, folder)
    edges = np.loadtxt(EXAMPLE / "edges.csv", dtype=np.int64, delimiter=",")
    weights = pair_weight(edges[:, 0], edges[:, 1])
    lines = [f"{s},{t},{w!r}" for (s, t), w in zip(edges.tolist(), weights.tolist(), strict=True)]
    (folder / "weighted.csv").write_text("# source,target,weight\n" + "\n".join(lines) + "\n")
    config = tmp_path / "csv-example.yaml"
    config.write_text(CONFIG.read_text().replace("examples/two-communities/", "ex/"))
    return config, folder


def dense_gcn_adjacency(edge_index, weight, n):
    """D^-1/2 (A + I) D^-1/2 with A[target, source] = weight, in plain numpy float64."""
    a = np.zeros((n, n))
    np.add.at(a, (edge_index[1], edge_index[0]), weight)
    a += np.eye(n)
    d = a.sum(axis=1) ** -0.5
    return d[:, None] * a * d[None, :]


def as_dense(operand):
    data = operand.to_scipy().toarray() if hasattr(operand, "to_scipy") else operand.data
    return np.asarray(data, dtype=np.float64)


def test_a_gcn_task_reads_the_weights_in_its_adjacency():
    karate = karate_club()
    weight = pair_weight(*karate.edge_index).astype(np.float64)
    graph = dataclasses.replace(karate, edge_weight=weight)
    task = GraphTask(make_config(), graph, dtype=np.float64)
    want = dense_gcn_adjacency(karate.edge_index, weight, 34)
    np.testing.assert_allclose(as_dense(task.operand), want, rtol=1e-12)
    unweighted = as_dense(GraphTask(make_config(), karate, dtype=np.float64).operand)
    assert np.abs(unweighted - want).max() > 0.1
    np.testing.assert_allclose(as_dense(normalized_adjacency(
        karate.edge_index, 34, weight, dtype=np.float64)), want, rtol=1e-12)


def test_a_weighted_csv_run_differs_and_equals_the_same_graph_from_python(cli, weighted,
                                                                          tmp_path):
    config, folder = weighted
    args = ("--epochs", 15, "--quiet", "--set", "monitor.memory=false")
    plain = cli("train", config, "--out", tmp_path / "plain", *args)
    heavy = cli("train", config, "--out", tmp_path / "heavy", *args, "--set",
                f"dataset.edges={folder / 'weighted.csv'}")
    assert plain.exit_code == 0 and heavy.exit_code == 0, plain.output + heavy.output
    plain_rows, heavy_rows = (read_scores(tmp_path / name / "epochs.csv")
                              for name in ("plain", "heavy"))
    assert np.abs(plain_rows - heavy_rows).max() > 1e-3  # the weights changed the run

    graph = load_csv_graph(**{key: folder / name for key, name in (
        ("edges", "edges.csv"), ("features", "features.csv"), ("labels", "labels.csv"),
        ("train_nodes", "train.csv"), ("val_nodes", "val.csv"), ("test_nodes", "test.csv"))})
    assert graph.edge_weight is None
    graph = dataclasses.replace(graph, edge_weight=pair_weight(*graph.edge_index))
    settings = load_config(config, ["train.epochs=15", "monitor.memory=false"])
    result = fit(settings, GraphTask(settings, graph))
    from_python = np.array([[row.as_dict()[c] for c in SCORES] for row in result.runs[0].rows])
    np.testing.assert_array_equal(from_python, heavy_rows)


def read_scores(path) -> np.ndarray:
    with open(path, newline="") as f:
        return np.array([[float(row[c]) for c in SCORES] for row in csv.DictReader(f)])


def test_receptive_fields_are_not_used_on_a_weighted_graph(weighted):
    config, folder = weighted
    settings = load_config(config, [f"dataset.edges={folder / 'weighted.csv'}",
                                    "train.receptive_field=auto"])
    task = make_task(settings)
    assert task.placement["receptive field"] == "not used: edge weights (the whole graph's Â)"
    assert "training rows" not in task.placement


@pytest.mark.parametrize("setting, needle", [
    ("model.kind=gat", "model.kind: gat would ignore edge weights"),
    ("model.kind=sage", "model.kind: sage would ignore edge weights"),
    ("model.learn_edge_weight=true", "model.learn_edge_weight learns the weights from 1"),
    ("train.batch_size=8", "train.batch_size: sampled blocks would ignore edge weights"),
    ("train.receptive_field=true", "train.receptive_field: true would ignore edge weights"),
])
def test_readers_that_would_ignore_weights_refuse_them(cli, weighted, tmp_path, setting,
                                                       needle):
    config, folder = weighted
    overrides = [f"dataset.edges={folder / 'weighted.csv'}", setting]
    with pytest.raises(ConfigError, match=needle):
        make_task(load_config(config, overrides))
    result = cli("train", config, "--quiet", "--out", tmp_path / "run",
                 *[arg for o in overrides for arg in ("--set", o)])
    one_line_error(result, 2, needle, "ex's edges carry weights")
    assert not (tmp_path / "run").exists()


def test_an_mlp_reads_no_edge_and_so_no_weight(weighted):
    config, folder = weighted
    settings = load_config(config, [f"dataset.edges={folder / 'weighted.csv'}",
                                    "model.kind=mlp"])
    assert make_task(settings).operand is None


def test_partitions_hold_the_weighted_adjacency(weighted, tmp_path):
    """`mgsparse partition` writes Â as training builds it: with the weights."""
    from mgsparse.data.partition import load_part
    from mgsparse.distributed import partition_graph

    config, folder = weighted
    settings = load_config(config, [f"dataset.edges={folder / 'weighted.csv'}"])
    task_graph = load_csv_graph(edges=folder / "weighted.csv", split="random",
                                labels=folder / "labels.csv")
    partition_graph(settings, task_graph, 1, tmp_path / "parts", method="contiguous")
    part = load_part(tmp_path / "parts", 0)
    want = dense_gcn_adjacency(task_graph.edge_index, task_graph.edge_weight, 60)
    got = part.adj.toarray()[:, np.argsort(part.ext)][np.argsort(part.nodes)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
