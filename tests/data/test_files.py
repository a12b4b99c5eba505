"""User files: edge lists, features, labels -- and errors that name the file and the line."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data import files
from mgsparse.data.files import load_edge_list, load_features, load_labels, load_user_graph
from mgsparse.errors import DataError, InputFileError


def write(path, text):
    path.write_text(text)
    return path


def test_edge_list_csv_tsv_comments_and_weights(tmp_path):
    csv = write(tmp_path / "e.csv", "# source,target\n0,1\n\n1, 2\n2,0\n")
    edge_index, weights = load_edge_list(csv)
    np.testing.assert_array_equal(edge_index, [[0, 1, 2], [1, 2, 0]])
    assert edge_index.dtype == np.int64 and weights is None
    tsv = write(tmp_path / "e.tsv", "0\t1\t0.5\n1\t2\t2\n")
    edge_index, weights = load_edge_list(tsv)
    np.testing.assert_array_equal(weights, np.array([0.5, 2.0], np.float32))


@pytest.mark.parametrize("text, message", [
    ("0,1\n1,2,3,4\n", r"e\.csv line 2: 4 columns, expected 2 like line 1"),
    ("0,1,2,3\n", r"e\.csv line 1: 4 columns, expected 2 columns \(source, target\) or 3"),
    ("0,1\n1,2,0.5\n", r"e\.csv line 2: 3 columns, expected 2 like line 1"),
    ("# header\n0,1\n1,x\n", r"e\.csv line 3: node id 'x' is not an integer"),
    ("0,1\n1.5,2\n", r"e\.csv line 2: node id '1.5' is not an integer"),
    ("0,1\n-1,2\n", r"e\.csv line 2: node id out of range in edge -1 -> 2"),
    ("0,1,1\n1,2,heavy\n", r"e\.csv line 2: weight 'heavy' is not a number"),
    ("# only a comment\n", r"e\.csv: no data lines"),
])
def test_malformed_edge_lists_name_file_and_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        load_edge_list(write(tmp_path / "e.csv", text))


def test_edge_id_beyond_node_count_names_the_line(tmp_path):
    path = write(tmp_path / "e.csv", "0,1\n1,2\n2,5\n")
    with pytest.raises(DataError, match=r"e\.csv line 3: node id out of range in edge 2 -> 5 "
                                        r"\(ids must be \[0, 4\)\)"):
        load_edge_list(path, num_nodes=4)


def test_features_from_npy_npz_sparse_and_csv(tmp_path):
    x = np.array([[1, 0], [0, 2], [3, 0]], dtype=np.float64)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "dense.npz", features=x)
    sp.save_npz(tmp_path / "sparse.npz", sp.csr_matrix(x))
    write(tmp_path / "x.csv", "1,0\n0,2\n# a comment\n3,0\n")
    for name in ("x.npy", "dense.npz", "x.csv"):
        loaded = load_features(tmp_path / name)
        assert isinstance(loaded, np.ndarray) and loaded.dtype == np.float32
        np.testing.assert_array_equal(loaded, x)
    loaded = load_features(tmp_path / "sparse.npz")
    assert sp.isspmatrix_csr(loaded) and loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded.toarray(), x)


def test_malformed_features_are_named(tmp_path):
    with pytest.raises(DataError, match=r"x\.csv line 2: 3 columns, expected 2 like line 1"):
        load_features(write(tmp_path / "x.csv", "1,2\n1,2,3\n"))
    with pytest.raises(DataError, match=r"x\.csv line 1: feature 'a' is not a number"):
        load_features(write(tmp_path / "x.csv", "a,2\n"))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=r"obj\.npy: not a plain numeric \.npy file"):
        load_features(tmp_path / "obj.npy")
    np.save(tmp_path / "flat.npy", np.ones(3))
    with pytest.raises(DataError, match=r"flat\.npy: features must be 2-D"):
        load_features(tmp_path / "flat.npy")
    np.savez(tmp_path / "two.npz", a=np.ones((2, 2)), b=np.ones((2, 2)))
    with pytest.raises(DataError, match=r"two\.npz: holds \['a', 'b'\]"):
        load_features(tmp_path / "two.npz")


def test_labels_from_npy_and_text(tmp_path):
    np.save(tmp_path / "y.npy", np.array([0, 2, -1], dtype=np.int32))
    assert load_labels(tmp_path / "y.npy").tolist() == [0, 2, -1]
    assert load_labels(write(tmp_path / "y.txt", "1\n0\n# gap\n-1\n")).tolist() == [1, 0, -1]
    with pytest.raises(DataError, match=r"y\.txt line 2: label 'cat' is not an integer"):
        load_labels(write(tmp_path / "y.txt", "1\ncat\n"))
    with pytest.raises(DataError, match=r"y\.txt line 3: label -2 is negative"):
        load_labels(write(tmp_path / "y.txt", "1\n0\n-2\n"))


def test_user_graph_assembles_everything(tmp_path):
    edges = write(tmp_path / "edges.csv", "0,1,0.5\n1,0,9\n1,2,1\n2,2,1\n0,1,7\n")
    np.save(tmp_path / "x.npy", np.eye(4))
    labels = write(tmp_path / "y.csv", "0\n1\n0\n1")
    g = load_user_graph(edges, tmp_path / "x.npy", labels, num_train_per_class=1, num_val=1,
                        num_test=1, seed=0)
    assert (g.num_nodes, g.num_classes, g.name) == (4, 2, "edges")
    # self loop dropped, repeats merged (the first weight wins), reverse edges added
    np.testing.assert_array_equal(g.edge_index, [[0, 1, 1, 2], [1, 0, 2, 1]])
    np.testing.assert_array_equal(g.edge_weight, [0.5, 9.0, 1.0, 1.0])
    assert g.split_sizes() == (2, 1, 1)


def test_user_graph_without_features_or_labels(tmp_path):
    g = load_user_graph(write(tmp_path / "ring.tsv", "0\t1\n1\t2\n2\t0\n"), undirected=False)
    assert g.num_nodes == 3 and g.num_edges == 3 and g.edge_weight is None
    np.testing.assert_array_equal(g.x.toarray(), np.eye(3))
    assert (g.y == -1).all() and g.split_sizes() == (0, 0, 0)


def test_label_count_must_match_node_count(tmp_path):
    edges = write(tmp_path / "edges.csv", "0,1\n1,2\n")
    np.save(tmp_path / "x.npy", np.eye(3))
    short = write(tmp_path / "short.csv", "0\n# comment\n1\n")
    with pytest.raises(DataError, match=r"short\.csv line 3: last label is for node 1, but "
                                        r"the graph has 3 nodes"):
        load_user_graph(edges, tmp_path / "x.npy", short)
    long = write(tmp_path / "long.csv", "0\n1\n0\n1\n")
    with pytest.raises(DataError, match=r"long\.csv line 4: label for node 3, but the graph "
                                        r"has 3 nodes"):
        load_user_graph(edges, tmp_path / "x.npy", long)
    beyond = write(tmp_path / "beyond.csv", "0,1\n1,3\n")
    with pytest.raises(DataError, match=r"beyond\.csv line 2: node id out of range"):
        load_user_graph(beyond, tmp_path / "x.npy")


# --- bad numbers are refused at load time, naming the file and the first bad row ----------------

@pytest.mark.parametrize("text, message", [
    ("1,2\n3,nan\n4,inf\n", r"x\.csv line 2: feature nan is not a finite float32"),
    ("# header\n1,2\n3,4\n-inf,5\n", r"x\.csv line 4: feature -inf is not a finite"),
    ("1,2\n3,1e39\n", r"x\.csv line 2: feature inf is not a finite float32 .*beyond 3\.4e38"),
])
def test_non_finite_text_features_name_the_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        load_features(write(tmp_path / "x.csv", text))


def test_non_finite_array_features_name_the_row(tmp_path):
    x = np.ones((4, 3))
    x[2, 1] = np.nan
    x[3, 0] = np.inf
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(DataError, match=r"x\.npy row 2: feature nan is not a finite"):
        load_features(tmp_path / "x.npy")
    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(x))
    with pytest.raises(DataError, match=r"x\.npz row 2: feature nan is not a finite"):
        load_features(tmp_path / "x.npz")
    edges = write(tmp_path / "e.csv", "0,1\n")
    with pytest.raises(DataError, match=r"x\.npy row 2"):  # and so does the whole loader
        load_user_graph(edges, tmp_path / "x.npy")


@pytest.mark.parametrize("weight", ["nan", "inf", "-Infinity", "1e40"])
def test_non_finite_edge_weight_names_the_line(tmp_path, weight):
    edges = write(tmp_path / "e.csv", f"0,1,1.0\n1,2,0.5\n2,0,{weight}\n")
    with pytest.raises(DataError, match=r"e\.csv line 3: weight .* is not a finite float32"):
        load_user_graph(edges)


def test_huge_node_id_names_the_line_instead_of_allocating(tmp_path):
    edges = write(tmp_path / "e.csv", "0,1\n1,2\n2,1000000000000000000\n")
    with pytest.raises(DataError, match=r"e\.csv line 3: node id out of range in edge "
                                        r"2 -> 1000000000000000000 \(ids must be in "
                                        r"\[0, 65,536\) when no features or labels"):
        load_user_graph(edges)
    np.save(tmp_path / "x.npy", np.eye(3))
    with pytest.raises(DataError, match=r"e\.csv line 3: .*ids must be \[0, 3\)"):
        load_user_graph(edges, tmp_path / "x.npy")
    too_big = write(tmp_path / "big.csv", "0,1\n1,99999999999999999999\n")
    with pytest.raises(DataError, match=r"big\.csv line 2: node id 99999999999999999999 is "
                                        r"out of range for int64"):
        load_user_graph(too_big)


@pytest.mark.parametrize("node_id", [2**63, -(2**63) - 1])
def test_a_node_id_just_past_int64_names_its_line(tmp_path, node_id):
    """2^63 overflows int64 by one: numpy's object cast wraps it to -2^63 without a word, so
    the search for the bad cell found none and the message lost the line."""
    edges = write(tmp_path / "e.csv", f"0,1\n1,2\n{node_id},2\n")
    with pytest.raises(DataError, match=rf"e\.csv line 3: node id {node_id} is out of range "
                                        r"for int64$"):
        load_user_graph(edges)


def test_node_id_bound_grows_with_the_edge_count(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MIN_INFERRED_NODES", 16)  # small numbers, same rule
    many = 20  # 2 x 20 edges may touch ids up to 39
    lines = "\n".join(f"{a},{a + many}" for a in range(many))
    g = load_user_graph(write(tmp_path / "e.csv", lines), undirected=False)
    assert g.num_nodes == 2 * many and g.num_edges == many
    with pytest.raises(DataError, match=r"line 21: .* -> 42 \(ids must be in \[0, 42\)"):
        load_user_graph(write(tmp_path / "e.csv", lines + f"\n0,{2 * many + 2}\n"))
    short = write(tmp_path / "short.csv", "0,1\n1,15\n")  # 2 edges: the floor of 16 applies
    assert load_user_graph(short).num_nodes == 16


def test_huge_label_names_the_line(tmp_path):
    with pytest.raises(DataError, match=r"y\.txt line 2: label 1000000000000000000 is not "
                                        r"below 3, the number of labels"):
        load_labels(write(tmp_path / "y.txt", "0\n1000000000000000000\n1\n"))


# --- damaged or foreign user files ----------------------------------------------------------------

def test_damaged_array_files_are_one_line(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((50, 4)))
    np.savez(tmp_path / "x.npz", x=np.ones((50, 4)))
    for name in ("x.npy", "x.npz"):
        data = (tmp_path / name).read_bytes()
        for broken in (data[: len(data) // 2], b""):
            (tmp_path / name).write_bytes(broken)
            with pytest.raises(DataError, match=rf"{name}: not a .*readable|plain") as info:
                load_features(tmp_path / name)
            assert "\n" not in str(info.value)
    with pytest.raises(DataError, match=r"y\.npy: file not found"):
        load_labels(tmp_path / "y.npy")
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(DataError, match=r"folder\.csv: cannot read it"):
        load_edge_list(tmp_path / "folder.csv")


def _crafted_npz(path, matrix, **changes):
    """What `sp.save_npz` writes, with some arrays replaced by hand."""
    sp.save_npz(path, matrix)
    with np.load(path) as z:
        arrays = {**dict(z), **changes}
    np.savez(path, **arrays)
    return path


def test_crafted_sparse_features_are_refused_before_scipy_indexes_with_them(tmp_path):
    """A column index past the shape or a decreasing indptr used to load and then crash the
    interpreter at the first product; the user's own file: exit 2, one line naming it."""
    x = sp.csr_matrix(np.array([[1, 0, 2], [0, 3, 0], [4, 0, 0]], dtype=np.float32))
    cases = {
        "far.npz": ({"indices": np.array([0, 2, 10**7, 0], dtype=np.int32)},
                    r"column index holds 10000000, outside \[0, 3\)"),
        "down.npz": ({"indptr": np.array([0, 3, 1, 4], dtype=np.int32)},
                     "indptr decreases after entry 1"),
        "csc.npz": ({"format": np.array(b"csc"), "indices": np.array([0, 2, 1, 5])},
                    r"row index holds 5, outside \[0, 3\)"),
    }
    for name, (changes, message) in cases.items():
        path = _crafted_npz(tmp_path / name, x, **changes)
        with pytest.raises(InputFileError, match=rf"{name}: {message}") as info:
            load_features(path)
        assert info.value.exit_code == 2 and "\n" not in str(info.value)
    coo = _crafted_npz(tmp_path / "coo.npz", x.tocoo(), row=np.array([0, 0, 1, 7]))
    with pytest.raises(InputFileError, match=r"coo\.npz: row index holds 7, outside \[0, 3\)"):
        load_features(coo)
    for matrix in (x, x.tocsc(), x.tocoo()):  # what save_npz writes still reads back
        sp.save_npz(tmp_path / "ok.npz", matrix)
        np.testing.assert_array_equal(load_features(tmp_path / "ok.npz").toarray(), x.toarray())


@pytest.mark.parametrize("name, body, message", [
    ("x.npz", b"hello world", r"x\.npz: not a readable \.npz file: it does not start as np\.savez"),
    ("x.npy", b"1,2,3\n", r"x\.npy: not a readable \.npy file: it does not start as np\.save"),
])
def test_a_file_that_numpy_did_not_write_names_the_right_cause(tmp_path, name, body, message):
    """np.load unpickles whatever is neither .npy nor zip, so a text file named .npz was
    refused as "pickled (object) data"; its first bytes are the cause now."""
    path = tmp_path / name
    path.write_bytes(body)
    with pytest.raises(DataError, match=message) as caught:
        load_features(path)
    assert "pickle" not in str(caught.value)
    renamed = tmp_path / "renamed.npz"  # np.save's file under a .npz name
    np.save(tmp_path / "a.npy", np.ones((3, 2)))
    (tmp_path / "a.npy").rename(renamed)
    with pytest.raises(DataError, match=r"first bytes b'\\x93NUMPY"):
        load_features(renamed)
