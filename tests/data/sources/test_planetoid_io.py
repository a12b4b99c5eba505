"""read_planetoid(): the standard Planetoid semantics, on hand-made and real files, and a
restricted unpickler that refuses anything a tampered file could smuggle in."""

from __future__ import annotations

import collections
import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data.sources.planetoid_io import load_pickle, read_planetoid
from mgsparse.errors import DataError


@pytest.fixture
def tiny_folder(tiny_dataset):
    return tiny_dataset[0]


def test_tiny_dataset_parses_to_the_hand_computed_graph(tiny_folder):
    g = read_planetoid(tiny_folder, "tiny")
    assert (g.num_nodes, g.num_features, g.num_classes) == (8, 3, 3)
    # tx rows belong to nodes 5, 4, 7 in test.index order; node 6 is the padded gap.
    expected_x = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0],
                  [4, 0, 0], [5, 0, 0], [0, 0, 0], [7, 0, 0]]
    assert sp.isspmatrix_csr(g.x) and g.x.dtype == np.float32
    np.testing.assert_array_equal(g.x.toarray(), expected_x)
    np.testing.assert_array_equal(g.y, [0, 1, 2, 0, 1, 2, -1, 0])
    assert g.y.dtype == np.int64
    # 0-1, 0-2, 3-4, 5-7 both ways: the self loop on 2 and the repeated 3-4 are gone.
    np.testing.assert_array_equal(g.edge_index, [[0, 0, 1, 2, 3, 4, 5, 7],
                                                 [1, 2, 0, 0, 4, 3, 7, 5]])
    assert g.edge_index.dtype == np.int64
    np.testing.assert_array_equal(np.flatnonzero(g.train_mask), [0, 1])
    np.testing.assert_array_equal(np.flatnonzero(g.val_mask), [2, 3])
    np.testing.assert_array_equal(np.flatnonzero(g.test_mask), [4, 5, 7])  # never node 6


class Payload:
    """Unpickling this calls ``function(argument)``: the classic pickle exploit."""

    def __init__(self, function, argument):
        self.function, self.argument = function, argument

    def __reduce__(self):
        return (self.function, (self.argument,))


@pytest.mark.parametrize("make_payload, refused", [
    (lambda marker: Payload(os.system, f"touch {marker}"), r"(posix|nt|os)\.system"),
    (lambda marker: Payload(eval, f"open({str(marker)!r}, 'w')"),
     r"(__builtin__|builtins)\.eval"),
])
def test_code_carrying_pickle_is_refused_and_never_runs(tiny_folder, tmp_path, make_payload,
                                                        refused):
    marker = tmp_path / "payload-ran"
    (tiny_folder / "ind.tiny.x").write_bytes(pickle.dumps(make_payload(marker), protocol=2))
    with pytest.raises(DataError, match=r"ind\.tiny\.x: refused to unpickle global " + refused):
        read_planetoid(tiny_folder, "tiny")
    assert not marker.exists()


def test_negative_control_the_payload_is_live_under_plain_pickle(tmp_path):
    marker = tmp_path / "payload-ran"
    pickle.loads(pickle.dumps(Payload(os.system, f"touch {marker}"), protocol=2))
    assert marker.exists()  # so the refusal tests above could fail


def test_payload_hidden_inside_a_container_is_refused(tiny_folder, tmp_path):
    marker = tmp_path / "payload-ran"
    graph = collections.defaultdict(list, {0: [Payload(os.system, f"touch {marker}")]})
    (tiny_folder / "ind.tiny.graph").write_bytes(pickle.dumps(graph, protocol=2))
    with pytest.raises(DataError, match="refused to unpickle global"):
        read_planetoid(tiny_folder, "tiny")
    assert not marker.exists()


def test_allow_list_is_exact_python3_bytes_helper_is_refused(tmp_path):
    # A Python 3 pickler routes bytes through _codecs.encode, which Planetoid never needs.
    path = tmp_path / "ind.tiny.y"
    path.write_bytes(pickle.dumps(np.eye(2, dtype=np.int32), protocol=2))
    with pytest.raises(DataError, match=r"refused to unpickle global _codecs\.encode"):
        load_pickle(path)


@pytest.mark.parametrize("key, content, message", [
    ("x", b"\x80\x02garbage", r"ind\.tiny\.x: not a readable Planetoid pickle"),
    ("allx", None, r"ind\.tiny\.allx: expected a csr_matrix, found list"),
    ("ty", None, r"ind\.tiny\.ty: expected a 2-D integer one-hot array"),
    ("test.index", b"4\nfive\n7\n", r"ind\.tiny\.test\.index: expected one integer per line"),
])
def test_malformed_files_raise_data_error_naming_the_file(tiny_folder, key, content, message):
    if content is None:
        content = pickle.dumps([1, 2, 3], protocol=2)
    (tiny_folder / f"ind.tiny.{key}").write_bytes(content)
    with pytest.raises(DataError, match=message):
        read_planetoid(tiny_folder, "tiny")


def test_edge_to_missing_node_is_refused(tiny_folder):
    # No byte strings inside, so a plain Python 3 pickle has the Python 2 globals.
    graph = collections.defaultdict(list, {0: [1], 1: [0, 99]})
    (tiny_folder / "ind.tiny.graph").write_bytes(pickle.dumps(graph, protocol=2))
    with pytest.raises(DataError, match=r"ind\.tiny\.graph: node id 99 out of range for 8 nodes"):
        read_planetoid(tiny_folder, "tiny")


def test_missing_file_is_named(tiny_folder):
    (tiny_folder / "ind.tiny.graph").unlink()
    with pytest.raises(DataError, match=r"ind\.tiny\.graph: file not found"):
        read_planetoid(tiny_folder, "tiny")


# --- the real files against a plain reference implementation --------------------------------

def reference_planetoid(folder, name):
    """Kipf's gcn/utils.py load_data, with plain pickle (the files are verified by checksum)."""
    def load(key):
        with open(folder / f"ind.{name}.{key}", "rb") as f:
            return pickle.load(f, encoding="latin1")

    tx, allx, ty, ally, graph = (load(k) for k in ("tx", "allx", "ty", "ally", "graph"))
    test_index = [int(line) for line in (folder / f"ind.{name}.test.index").read_text().split()]
    test_range = np.sort(test_index)
    full = np.arange(test_range.min(), test_range.max() + 1)
    tx_ext = sp.lil_matrix((full.size, tx.shape[1]))
    tx_ext[test_range - test_range.min(), :] = tx
    ty_ext = np.zeros((full.size, ty.shape[1]))
    ty_ext[test_range - test_range.min(), :] = ty
    features = sp.vstack((allx, tx_ext)).tolil()
    features[test_index, :] = features[test_range, :]
    onehot = np.vstack((ally, ty_ext))
    onehot[test_index, :] = onehot[test_range, :]
    labels = np.where(onehot.any(axis=1), onehot.argmax(axis=1), -1)
    pairs = {(u, v) for u, vs in graph.items() for v in vs if u != v}
    return features.tocsr(), labels, pairs | {(v, u) for u, v in pairs}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # scipy.sparse.csr, in plain pickle
@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_real_files_match_the_reference_implementation(name, real_planetoid):
    g = read_planetoid(real_planetoid, name)
    features, labels, pairs = reference_planetoid(real_planetoid, name)
    assert abs(g.x - features).sum() == 0
    np.testing.assert_array_equal(g.y, labels)
    assert set(zip(*g.edge_index.tolist(), strict=True)) == pairs
    assert g.num_edges == len(pairs)
