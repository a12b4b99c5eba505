"""`dataset.reorder` end to end: a run in a new node order trains the same model (losses equal
up to float rounding without dropout), and `mgsparse predict` answers in the file's numbering
(ids, rows, classes, embeddings, a file of ids) whatever order the run used; full-batch,
receptive-field and sampled tasks read their splits in the new ids consistently."""

from __future__ import annotations

import csv
import importlib.util

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.data import load_section
from mgsparse.run.kinds import make_task
from tests.conftest import CONFIGS

EXACT = ("--set", "model.dropout=0", "--set", "train.epochs=30", "--set", "train.patience=null")


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """csv-example trained in the file's order, RCM, degree and METIS order (whole graph and
    on receptive fields), no dropout; each run's predictions of every node, of the test split
    and of a file of ids, and its embeddings. METIS parts of 16 nodes (4 parts of the 60):
    at the default size the graph would be one part, the file's order."""
    from typer.testing import CliRunner

    from mgsparse.cli import app
    root = tmp_path_factory.mktemp("reorder")
    ids = root / "ids.txt"
    ids.write_text("7\n0\n59\n31\n")
    out = {}
    orders = {"none": ("dataset.reorder=none",), "rcm": ("dataset.reorder=rcm",),
              "degree": ("dataset.reorder=degree",),
              "rcm-field": ("dataset.reorder=rcm", "train.receptive_field=true"),
              "none-field": ("train.receptive_field=true",)}
    if importlib.util.find_spec("pymetis") is not None:
        orders["metis"] = ("dataset.reorder=metis",)
    for name, sets in orders.items():
        run = root / name
        args = ["train", str(CONFIGS / "csv-example.yaml"), "--out", str(run), "--quiet",
                *EXACT, *(a for s in sets for a in ("--set", s))]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("mgsparse.data.reorder.METIS_BLOCK", 16)
            result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        for split in ("all", "test", str(ids)):
            tag = split if split in ("all", "test") else "ids"
            extra = ["--embeddings", str(root / f"{name}.npy")] if split == "all" else []
            result = CliRunner().invoke(app, ["predict", str(run), "--split", split, "--out",
                                              str(root / f"{name}-{tag}.csv"), *extra])
            assert result.exit_code == 0, result.output
        out[name] = run
    return root, out


def losses(run):
    return np.array([float(r["loss"]) for r in read_csv(run / "epochs.csv")])


def metis_if_installed(names):
    """`names` with "metis" last, skipped where pymetis (the distributed extra) is missing."""
    return [*names, pytest.param("metis", marks=pytest.mark.skipif(
        importlib.util.find_spec("pymetis") is None, reason="pymetis not installed"))]


@pytest.mark.parametrize("name", metis_if_installed(["rcm", "degree"]))
def test_a_new_order_trains_the_same_model(runs, name):
    _, out = runs
    base, moved = read_csv(out["none"] / "epochs.csv"), read_csv(out[name] / "epochs.csv")
    assert len(base) == len(moved) == 30
    assert np.allclose(losses(out[name]), losses(out["none"]), rtol=1e-5, atol=1e-7)
    for column in ("train_acc", "val_acc", "test_acc"):
        assert [r[column] for r in moved] == [r[column] for r in base]


def test_the_receptive_field_in_a_new_order_trains_the_same_model(runs):
    _, out = runs
    assert np.allclose(losses(out["rcm-field"]), losses(out["none-field"]), rtol=1e-5,
                       atol=1e-7)


@pytest.mark.parametrize("name", metis_if_installed(["rcm", "degree", "rcm-field"]))
def test_predictions_are_in_the_files_numbering(runs, name):
    root, _ = runs
    base = "none-field" if name.endswith("field") else "none"
    for tag in ("all", "test", "ids"):
        ours, theirs = read_csv(root / f"{name}-{tag}.csv"), read_csv(root / f"{base}-{tag}.csv")
        assert [(r["node"], r["pred"]) for r in ours] == [(r["node"], r["pred"]) for r in theirs]
        p = np.array([[float(r["p0"]), float(r["p1"])] for r in ours])
        q = np.array([[float(r["p0"]), float(r["p1"])] for r in theirs])
        assert np.allclose(p, q, atol=1e-5)
    assert [r["node"] for r in read_csv(root / f"{name}-ids.csv")] == ["7", "0", "59", "31"]
    test_ids = np.loadtxt(CONFIGS / "examples" / "two-communities" / "test.csv", dtype=int)
    assert [int(r["node"]) for r in read_csv(root / f"{name}-test.csv")] == sorted(test_ids)
    assert np.allclose(np.load(root / f"{name}.npy"), np.load(root / f"{base}.npy"), atol=1e-5)


@pytest.mark.parametrize("sets", [("dataset.reorder=rcm",),
                                  ("dataset.reorder=degree", "train.batch_size=8")],
                         ids=["full-batch", "sampled"])
def test_a_task_reads_its_splits_labels_and_features_in_its_new_ids(sets):
    config = load_config(CONFIGS / "csv-example.yaml", sets)
    graph = load_section(config.dataset)
    task = make_task(config)
    assert task.order is not None and not np.array_equal(task.order, np.arange(60))
    order = config.dataset.reorder
    assert task.placement["node order"] == f"{order} (outputs keep the dataset's ids)"
    for rows, mask in zip(task.splits, (graph.train_mask, graph.val_mask, graph.test_mask)):
        users = task.user_ids(rows)
        assert np.array_equal(np.sort(users), np.flatnonzero(mask))
        assert np.array_equal(task.y[rows], graph.y[users])
        assert np.array_equal(task.run_rows(users), rows)
    features = task.features.data if hasattr(task.features, "data") else task.features
    dense = features.to_dense() if hasattr(features, "to_dense") else np.asarray(features)
    assert np.allclose(dense, np.asarray(graph.x)[task.order])
