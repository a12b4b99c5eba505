"""A user's graph from files named in a config: the shipped CSV example, node-file splits, and
one-line errors naming the file and line."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mgsparse.data.user import (
    config_kwargs,
    csv_files,
    load_csv_graph,
    load_csv_path,
    load_node_ids,
)
from mgsparse.errors import ConfigError, DataError
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "configs" / "examples" / "two-communities"
EXAMPLE_KEYS = {"edges": "edges.csv", "features": "features.csv", "labels": "labels.csv",
                "train_nodes": "train.csv", "val_nodes": "val.csv", "test_nodes": "test.csv"}


def ids_in(name: str) -> list[int]:
    return np.loadtxt(EXAMPLE / name, dtype=np.int64, delimiter=",").tolist()


def test_shipped_example_loads_with_its_split():
    g = load_csv_graph(**EXAMPLE_KEYS, base_dir=EXAMPLE)
    edge_rows = len(ids_in("edges.csv"))
    assert (g.num_nodes, g.num_features, g.num_classes) == (60, 4, 2)
    assert g.num_edges == 2 * edge_rows == 290  # written once each, read both ways
    assert g.split_sizes() == (8, 12, 40)
    for mask, name in ((g.train_mask, "train.csv"), (g.val_mask, "val.csv"),
                       (g.test_mask, "test.csv")):
        assert np.flatnonzero(mask).tolist() == sorted(ids_in(name))
    assert np.bincount(g.y[g.train_mask]).tolist() == [4, 4]
    directed = load_csv_graph(**EXAMPLE_KEYS, base_dir=EXAMPLE, directed=True)
    assert directed.num_edges == edge_rows


def test_random_and_full_splits(tmp_path):
    random = load_csv_graph(**EXAMPLE_KEYS, base_dir=EXAMPLE, split="random",
                            num_train_per_class=5, num_val=10, num_test=30, seed=3)
    assert random.split_sizes() == (10, 10, 30)
    assert np.bincount(random.y[random.train_mask]).tolist() == [5, 5]
    same = load_csv_graph(EXAMPLE / "edges.csv", labels=EXAMPLE / "labels.csv", split="random",
                          num_train_per_class=5, num_val=10, num_test=30, seed=3)
    np.testing.assert_array_equal(same.test_mask, random.test_mask)  # the seed decides
    (tmp_path / "e.csv").write_text("0,1\n1,2\n2,3\n3,4\n")
    (tmp_path / "y.csv").write_text("0\n1\n-1\n0\n1\n")
    for name, nodes in (("tr", "0\n"), ("va", "1\n"), ("te", "4\n")):
        (tmp_path / f"{name}.csv").write_text(nodes)
    full = load_csv_graph("e.csv", labels="y.csv", train_nodes="tr.csv", val_nodes="va.csv",
                          test_nodes="te.csv", split="full", base_dir=tmp_path)
    # every labelled node outside val/test trains; node 2 has no label
    assert np.flatnonzero(full.train_mask).tolist() == [0, 3]


def test_bad_edge_line_names_file_and_line(tmp_path):
    (tmp_path / "edges.csv").write_text("# header\n0,1\n1,x\n")
    with pytest.raises(DataError, match=r"edges\.csv line 3: node id 'x' is not an integer"):
        load_csv_graph("edges.csv", base_dir=tmp_path, split="random")


@pytest.fixture
def small(tmp_path):
    """A 4-node path with labels, and a writer for node files."""
    (tmp_path / "e.csv").write_text("0,1\n1,2\n2,3\n")
    (tmp_path / "y.csv").write_text("0\n1\n0\n-1\n")

    def load(train="0\n", val="1\n", test="2\n", **kw):
        for name, text in (("tr", train), ("va", val), ("te", test)):
            (tmp_path / f"{name}.csv").write_text(text)
        return load_csv_graph("e.csv", labels="y.csv", train_nodes="tr.csv",
                              val_nodes="va.csv", test_nodes="te.csv", base_dir=tmp_path, **kw)
    return load


@pytest.mark.parametrize("files, message", [
    ({"train": "0\n9\n"}, r"tr\.csv line 2: node 9 out of range \[0, 4\)"),
    ({"train": "0\n# c\n0\n"}, r"tr\.csv line 3: node 0 is listed twice"),
    ({"test": "2\n1\n"}, r"te\.csv line 2: node 1 is also in va\.csv"),
    ({"test": "3\n"}, r"te\.csv line 1: node 3 has no label"),
    ({"val": "one\n"}, r"va\.csv line 1: node id 'one' is not an integer"),
])
def test_bad_node_files_are_one_line(small, files, message):
    with pytest.raises(DataError, match=message) as info:
        small(**files)
    assert "\n" not in str(info.value)


def test_split_needs_all_three_node_files_or_random(tmp_path):
    (tmp_path / "e.csv").write_text("0,1\n")
    with pytest.raises(ConfigError, match="dataset.train_nodes is set but dataset.val_nodes"):
        load_csv_graph("e.csv", train_nodes="t.csv", base_dir=tmp_path)
    with pytest.raises(ConfigError, match="split public needs the node files.*split: random"):
        load_csv_graph("e.csv", base_dir=tmp_path)
    with pytest.raises(ConfigError, match="unknown split option"):
        load_csv_graph("e.csv", base_dir=tmp_path, split="random", num_trains=3)


def test_node_ids_from_npy(tmp_path):
    np.save(tmp_path / "ids.npy", np.array([3, 1], dtype=np.int32))
    ids, lines = load_node_ids(tmp_path / "ids.npy", 4)
    assert ids.tolist() == [3, 1] and ids.dtype == np.int64 and lines is None
    with pytest.raises(DataError, match=r"ids\.npy entry 0: node 3 out of range \[0, 2\)"):
        load_node_ids(tmp_path / "ids.npy", 2)


def test_folder_discovery_and_config_section(tmp_path):
    assert {k: p.name for k, p in csv_files(EXAMPLE).items()} == EXAMPLE_KEYS
    g = load_csv_path(EXAMPLE)
    assert g.name == "two-communities" and g.split_sizes() == (8, 12, 40)
    only_edges = load_csv_path(EXAMPLE / "edges.csv")
    assert only_edges.num_classes == 0 and only_edges.split_sizes() == (0, 0, 0)
    with pytest.raises(DataError, match="no edges.csv"):
        csv_files(tmp_path)
    section = SimpleNamespace(name="csv", root=None, **EXAMPLE_KEYS, directed=True,
                              split="public", normalize_features=True, seed=1,
                              num_train_per_class=20, num_val=500, num_test=1000)
    kwargs = config_kwargs(section)
    assert "name" not in kwargs and "root" not in kwargs and kwargs["seed"] == 1
    g = load_csv_graph(**kwargs, base_dir=EXAMPLE)
    assert g.num_edges == 145 and np.allclose(g.x.sum(axis=1), 1, atol=1e-3)
