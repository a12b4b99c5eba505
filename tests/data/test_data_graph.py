"""The Graph dataclass: its checks, properties and repr, and dataset_info's numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data.graph import Graph, dataset_info, sorted_unique, undirected_edges
from mgsparse.errors import DataError


def path_graph(**changes) -> Graph:
    """0 - 1 - 2 - 3, one-hot features, node 3 unlabelled."""
    fields = {"x": sp.identity(4, dtype=np.float32, format="csr"),
              "y": np.array([0, 1, 0, -1]),
              "edge_index": undirected_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), 4),
              "num_nodes": 4, "num_classes": 2, "name": "path",
              "train_mask": np.array([1, 1, 0, 0], bool),
              "val_mask": np.array([0, 0, 1, 0], bool), "test_mask": np.zeros(4, bool)}
    fields.update(changes)
    return Graph(**fields)


def test_properties_and_repr():
    g = path_graph()
    assert (g.num_edges, g.num_features, g.split_sizes()) == (6, 4, (2, 1, 0))
    assert repr(g) == ("Graph(name='path', num_nodes=4, num_edges=6, num_features=4, "
                       "num_classes=2, x=csr nnz=4 float32, split=2/1/0)")


@pytest.mark.parametrize("changes, message", [
    ({"y": np.zeros(3, np.int64)}, r"y has shape \(3,\), expected \(4,\)"),
    ({"x": np.zeros((5, 2), np.float32)}, "x has 5 rows for 4 nodes"),
    ({"edge_index": np.zeros((3, 2), np.int64)}, r"edge_index has shape \(3, 2\)"),
    ({"test_mask": np.zeros(4, np.int64)}, "test_mask must be bool"),
    ({"edge_weight": np.ones(2, np.float32)}, r"edge_weight has shape \(2,\), expected \(6,\)"),
])
def test_inconsistent_shapes_are_refused(changes, message):
    with pytest.raises(DataError, match=message):
        path_graph(**changes)


def test_undirected_edges_canonical_form():
    row, col = np.array([2, 0, 1, 1, 3]), np.array([0, 2, 1, 3, 3])
    np.testing.assert_array_equal(undirected_edges(row, col, 4), [[0, 1, 2, 3], [2, 3, 0, 1]])
    np.testing.assert_array_equal(sorted_unique(np.array([5, 1, 5, 3, 1])), [1, 3, 5])
    assert sorted_unique(np.array([], np.int64)).size == 0


def test_dataset_info_numbers():
    info = dataset_info(path_graph())
    assert info["nodes"] == 4 and info["edges"] == 6 and info["features"] == 4
    assert info["adjacency_nnz_ratio"] == pytest.approx(6 / 16)
    assert info["feature_nnz_ratio"] == pytest.approx(4 / 16)
    assert (info["train"], info["val"], info["test"], info["unlabeled"]) == (2, 1, 0, 1)
    assert info["label_counts"] == [2, 1]
    dense = dataclasses.replace(path_graph(), x=np.eye(4, dtype=np.float32))
    assert dataset_info(dense)["feature_storage"] == "dense"
