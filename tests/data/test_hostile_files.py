"""Hostile user files, at the loaders: each gives one DataError naming the right file and the
right cause (or, for what is only unusual, a graph), and never a traceback or a hang."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from mgsparse.data.files import load_edge_list, load_features, load_user_graph
from mgsparse.data.sources.csv import Csv
from mgsparse.data.transforms import coalesce
from mgsparse.data.user import csv_files, load_csv_graph
from mgsparse.errors import ConfigError, DataError, InputFileError
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "configs" / "examples" / "two-communities"
EXAMPLE_FILES = {"edges": "edges.csv", "features": "features.csv", "labels": "labels.csv",
                 "train_nodes": "train.csv", "val_nodes": "val.csv", "test_nodes": "test.csv"}


@pytest.fixture
def example(tmp_path):
    """A copy of the shipped two-community example (60 nodes, 2 classes) to damage."""
    shutil.copytree(EXAMPLE, tmp_path / "ex")
    return tmp_path / "ex"


def drop_last_line(path):
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")


def load_example(folder, **override):
    files = {key: folder / name for key, name in EXAMPLE_FILES.items()}
    return load_csv_graph(**{**files, **override})


def test_a_byte_order_mark_is_skipped(example):
    """Excel's "CSV UTF-8" starts every file with U+FEFF."""
    for name in ("edges.csv", "features.csv", "labels.csv", "train.csv"):
        path = example / name
        path.write_text("\ufeff" + path.read_text(), encoding="utf-8")
    plain = load_example(EXAMPLE)
    marked = load_example(example)
    np.testing.assert_array_equal(marked.edge_index, plain.edge_index)
    np.testing.assert_array_equal(marked.x, plain.x)
    assert marked.y.tolist() == plain.y.tolist()
    assert np.flatnonzero(marked.train_mask).tolist() == np.flatnonzero(plain.train_mask).tolist()


def test_an_edge_list_of_self_loops_only_is_a_graph_without_edges(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("0,0,2.5\n1,1,1\n2,2,0.5\n")
    edge_index, weights = load_edge_list(path)
    merged, kept = coalesce(edge_index, weights, 3, undirected=True)
    assert merged.shape == (2, 0) and merged.dtype == np.int64 and kept.shape == (0,)
    g = load_user_graph(path)
    assert (g.num_nodes, g.num_edges) == (3, 0) and g.edge_weight.shape == (0,)


def special_path(tmp_path, kind, suffix):
    """A path that is not a regular file: a symlink loop, a FIFO, a folder, a device."""
    path = tmp_path / f"{kind}{suffix}"
    if kind == "loop":
        os.symlink(path, path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    return path if kind != "device" else "/dev/zero"


@pytest.mark.parametrize("kind, cause", [
    ("loop", r"cannot read it \(Too many levels of symbolic links\)"),
    ("fifo", r"not a regular file \(a pipe or a device\?\), expected"),
    ("device", r"not a regular file \(a pipe or a device\?\), expected"),
    ("folder", r"cannot read it \(a folder\), expected a file of"),
])
@pytest.mark.parametrize("role, suffix", [("edges", ".csv"), ("features", ".csv"),
                                          ("labels", ".csv"), ("labels", ".npy")])
def test_a_path_that_is_no_regular_file_is_named_and_never_read(tmp_path, kind, cause, role,
                                                                suffix):
    """A FIFO or /dev/zero would block or never end; a loop would end in a RuntimeError."""
    path = special_path(tmp_path, kind, suffix)
    kwargs = {"edges": EXAMPLE / "edges.csv", role: path}
    with pytest.raises(DataError, match=rf"^{path}: {cause}") as info:
        load_user_graph(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("damage, message", [
    # features one row short: the features are missing a node, not the labels
    (lambda ex: drop_last_line(ex / "features.csv"),
     (r"features\.csv: 59 feature rows, but .*labels\.csv has 60 labels and .*edges\.csv "
      r"uses node 59")),
    # features one row short, but no edge reaches the missing node: both files are named
    (lambda ex: [drop_last_line(ex / "features.csv"),
                 (ex / "edges.csv").write_text("0,1\n1,2\n")],
     (r"labels\.csv line 61: label for node 59, but the graph has 59 nodes \(60 labels; "
      r".*features\.csv has 59 rows\)")),
    # labels one short: the labels are missing a node
    (lambda ex: drop_last_line(ex / "labels.csv"),
     r"labels\.csv line 60: last label is for node 58, but the graph has 60 nodes"),
    (lambda ex: np.save(ex / "features.npy", np.zeros((60, 0))),
     r"features\.npy: 0 feature columns \(60 x 0\); give at least one number per node"),
    (lambda ex: (ex / "edges.csv").write_text("source,target\n0,1\n"),
     r"edges\.csv line 1: node id 'source' is not an integer \(a header\? start it with #\)"),
    (lambda ex: (ex / "edges.csv").write_text("0,1,\n1,2,\n"),
     r"edges\.csv line 1: weight '' is not a number \(an empty field: a separator too many\?\)"),
    (lambda ex: (ex / "edges.csv").write_text("0,1,1.5\n1,2,-0.5\n"),
     r"edges\.csv line 2: weight -0\.5 is negative; edge weights must be >= 0"),
])
def test_errors_name_the_file_at_fault_and_the_cause(example, damage, message):
    damage(example)
    features = example / ("features.npy" if (example / "features.npy").exists()
                          else "features.csv")
    with pytest.raises(DataError, match=message) as info:
        load_example(example, features=features)
    assert "\n" not in str(info.value)


def test_a_public_split_with_an_unused_class_is_no_random_split(example):
    """Classes 0 and 2 labelled, class 1 never: the node files give the split, so no random
    split is drawn (before, one was, and its failure was reported)."""
    labels = example / "labels.csv"
    labels.write_text(labels.read_text().replace("\n1\n", "\n2\n").replace("\n1\n", "\n2\n"))
    y = np.loadtxt(labels, dtype=np.int64)
    assert set(y.tolist()) == {0, 2}
    g = load_example(example)
    assert g.num_classes == 3 and g.split_sizes() == (8, 12, 40)
    with pytest.raises(InputFileError, match=rf"^{labels}: random split: class 1 has 0 "
                                             "labelled nodes"):
        load_example(example, split="random")


def test_training_a_graph_without_labels_names_the_key_or_the_file(example):
    files = {key: str(example / name) for key, name in EXAMPLE_FILES.items()
             if key in ("edges", "features")}
    with pytest.raises(ConfigError, match=r"^dataset\.labels is not set: training needs"):
        Csv().load("csv", **files, split="random")
    (example / "labels.csv").write_text("-1\n" * 60)
    with pytest.raises(InputFileError, match=rf"^{example / 'labels.csv'}: no node has a label "
                                             r"\(all are -1\): nothing to train on"):
        Csv().load("csv", **files, labels=str(example / "labels.csv"), split="random")


def test_zero_feature_columns_in_any_format(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 0), np.float32))
    np.savez(tmp_path / "x.npz", x=np.zeros((3, 0), np.float32))
    for name in ("x.npy", "x.npz"):
        with pytest.raises(DataError, match=rf"{name}: 0 feature columns \(3 x 0\)"):
            load_features(tmp_path / name)


def test_a_folder_without_an_edge_list_and_a_loop_are_input_errors(tmp_path):
    """`datasets info FOLDER`: the user's own path, so a usage error (exit 2)."""
    with pytest.raises(InputFileError, match="no edges.csv"):
        csv_files(tmp_path)
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    with pytest.raises(InputFileError, match=r"loop: Too many levels of symbolic links"):
        csv_files(tmp_path / "loop")
