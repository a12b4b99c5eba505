"""TU edge files: NAME_edge_labels.txt one-hot into edge_attr (and its first column the edge
type), NAME_edge_attributes.txt appended, each directed edge keeping its own line's row; a
damaged edge file is one line naming the file and line, exit 2 for the user's own folder and
a DataError (exit 1) for a download, nothing kept; the real MUTAG's bonds."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.sources import tu
from mgsparse.errors import DataError, InputFileError
from tests.conftest import require_real_tu
from tests.data.sources.test_tu import A, kept, lines, put, tiny, tiny_members, zip_bytes

assert tiny  # the fixture, used by name below

# A bond label per line of A (both directions of a bond alike, as in the real files), 1..3.
BONDS = [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 1, 1, 3, 3]
WHERE = r"TINY\.zip:TINY/TINY_edge_"


def test_edge_labels_are_one_hot_rows_of_their_own_edges(tiny):
    _, mirror = tiny
    attributes = np.arange(len(A), dtype=np.float32)[:, None] / 2
    put(mirror, zip_bytes(tiny_members(edge_labels=lines(BONDS),
                                       edge_attributes=lines(attributes.tolist()))))
    graphs = tu.load("tiny", url=str(mirror))
    line = {pair: k for k, pair in enumerate(A)}  # 1-based (source, target) -> its line
    k = np.array([line[(s + 1, t + 1)] for s, t in graphs.edge_index.T])
    assert graphs.edge_attr.shape == (14, 3 + 1) and graphs.edge_attr.dtype == np.float32
    np.testing.assert_array_equal(graphs.edge_attr[:, :3],
                                  np.eye(3, dtype=np.float32)[np.array(BONDS)[k] - 1])
    np.testing.assert_array_equal(graphs.edge_attr[:, 3], attributes[k, 0])
    np.testing.assert_array_equal(graphs.edge_type, np.array(BONDS)[k] - 1)
    sub = graphs.subset([2])  # the path 6-7-8-9: bonds 2, 1, 3 (both ways)
    assert sub.edge_type.tolist() == [1, 1, 0, 0, 2, 2]


def test_without_edge_files_no_edge_data(tiny):
    _, mirror = tiny
    put(mirror, zip_bytes(tiny_members()))
    graphs = tu.load("tiny", url=str(mirror))
    assert graphs.edge_attr is None and graphs.edge_type is None


EDGE_DAMAGE = {
    "a label short": ({"edge_labels": lines(BONDS[:-1])},
                      WHERE + r"labels\.txt: 13 lines, but TINY/TINY_A\.txt lists 14 edges"),
    "a word": ({"edge_labels": lines(BONDS[:4]) + b"double\n" + lines(BONDS[5:])},
               WHERE + r"labels\.txt line 5: 'double' is not an integer"),
    "a huge label": ({"edge_labels": lines(BONDS[:6] + [10**9] + BONDS[7:])},
                     WHERE + r"labels\.txt line 7: label 1000000000 spreads the labels over"),
    "two columns on one line": ({"edge_labels": lines(BONDS[:2]) + b"1, 2\n" + lines(BONDS[3:])},
                                WHERE + r"labels\.txt line 3: 2 values, expected 1"),
    "a nan attribute": ({"edge_attributes": lines([[0.5]] * 3 + [["nan"]] + [[0.5]] * 10)},
                        WHERE + r"attributes\.txt line 4: not a finite number"),
    "an attribute short": ({"edge_attributes": lines([[0.5]] * 15)},
                           WHERE + r"attributes\.txt: 15 lines, but TINY/TINY_A\.txt lists 14"),
}


@pytest.mark.parametrize("name", EDGE_DAMAGE)
def test_a_damaged_edge_file_is_one_line_and_nothing_is_kept(name, tiny, serve_folder):
    root, mirror = tiny
    parts, message = EDGE_DAMAGE[name]
    put(mirror, zip_bytes(tiny_members(**parts)))
    with pytest.raises(InputFileError, match=message) as own:  # the user's folder: exit 2
        tu.load("tiny", url=str(mirror))
    assert "\n" not in str(own.value) and own.value.exit_code == 2
    assert kept(root) == []
    url, _ = serve_folder(mirror)
    with pytest.raises(DataError, match=message) as download:  # a download: exit 1
        tu.load("tiny", url=url)
    assert not isinstance(download.value, InputFileError) and download.value.exit_code == 1
    assert kept(root) == []


def test_mutags_bonds_over_loopback(serve_folder, tmp_path):
    """MUTAG_edge_labels.txt: 7,442 lines (one per directed edge, the count the reader keeps),
    4 bond types, 4,708 / 2,008 / 724 / 2 directed edges of each; both directions of a bond
    carry the same row."""
    url, _ = serve_folder(require_real_tu())
    graphs = tu.load("mutag", root=tmp_path, url=url)
    assert graphs.edge_attr.shape == (7_442, 4) and graphs.num_edges == 7_442
    assert graphs.edge_attr.sum(axis=0).tolist() == [4_708, 2_008, 724, 2]
    assert (graphs.edge_attr.sum(axis=1) == 1).all()
    assert np.bincount(graphs.edge_type).tolist() == [4_708, 2_008, 724, 2]
    n = graphs.num_nodes
    key = graphs.edge_index[0] * n + graphs.edge_index[1]
    reverse = np.searchsorted(key, graphs.edge_index[1] * n + graphs.edge_index[0])
    np.testing.assert_array_equal(graphs.edge_type[reverse], graphs.edge_type)
