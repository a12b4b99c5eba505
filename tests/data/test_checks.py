"""Sparse arrays read from files are checked before scipy indexes with them: a column index
past the shape or a decreasing indptr made the first product read outside its arrays (a
segmentation fault); now each is one line naming the file."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data.checks import check_coo, check_csr, check_edge_index
from mgsparse.errors import DataError, InputFileError

GOOD = {"indptr": np.array([0, 2, 2, 3]), "indices": np.array([0, 3, 1], dtype=np.int32),
        "data": np.array([1.0, 2.0, 3.0], dtype=np.float32), "shape": np.array([3, 4])}


def crafted(**changes):
    return {**GOOD, **changes}


def test_good_arrays_give_their_csr_matrix():
    m = check_csr(*GOOD.values(), "x.npz")
    assert isinstance(m, sp.csr_matrix) and m.shape == (3, 4)
    np.testing.assert_array_equal(m.toarray(), [[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]])
    empty = check_csr(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), [0, 5], "e")
    assert empty.shape == (0, 5) and empty.nnz == 0


@pytest.mark.parametrize("arrays, message", [
    (crafted(indices=np.array([0, 3, 10**7])), r"column index holds 10000000, outside \[0, 4\)"),
    (crafted(indices=np.array([0, -1, 1])), r"column index holds -1, outside \[0, 4\)"),
    (crafted(indptr=np.array([0, 2, 1, 3])), "indptr decreases after entry 1"),
    (crafted(indptr=np.array([1, 2, 2, 3])), "indptr runs from 1 to 3, expected 0 to 3"),
    (crafted(indptr=np.array([0, 2, 2, 2])), "indptr runs from 0 to 2, expected 0 to 3"),
    (crafted(indptr=np.array([0, 2, 3])), r"indptr must be 4 integers \(rows \+ 1\)"),
    (crafted(indptr=np.array([0.0, 2, 2, 3])), "indptr must be 4 integers"),
    (crafted(indices=np.array([0.0, 3, 1])), "column index must be a 1-D integer array"),
    (crafted(data=np.array([1.0, 2.0])), "sparse data has 2 values for 3 indices"),
    (crafted(data=np.array([1.0, np.nan, 2.0])), "non-finite value at entry 1"),
    (crafted(data=np.array(["a", "b", "c"])), "sparse data must be a 1-D numeric array"),
    (crafted(shape=np.array([3, -4])), "sparse shape must be two non-negative integers"),
    (crafted(shape=np.array([3, 4, 5])), "sparse shape must be two non-negative integers"),
])
def test_each_defect_is_one_line_naming_the_file(arrays, message):
    with pytest.raises(DataError, match=message) as caught:
        check_csr(arrays["indptr"], arrays["indices"], arrays["data"], arrays["shape"],
                  "part-001/adj.npz")
    assert str(caught.value).startswith("part-001/adj.npz: ") and "\n" not in str(caught.value)
    assert caught.value.exit_code == 1


def test_the_caller_chooses_the_error_for_a_users_own_file():
    with pytest.raises(InputFileError, match="mine.npz: column index holds 9") as caught:
        check_csr(GOOD["indptr"], np.array([0, 9, 1]), GOOD["data"], GOOD["shape"], "mine.npz",
                  InputFileError)
    assert caught.value.exit_code == 2


def test_coo_and_edge_lists_are_checked_on_both_axes():
    m = check_coo(np.array([0, 2]), np.array([3, 0]), np.array([1.0, 2.0]), [3, 4], "c.npz")
    np.testing.assert_array_equal(m.toarray()[[0, 2], [3, 0]], [1.0, 2.0])
    with pytest.raises(DataError, match=r"c.npz: row index holds 3, outside \[0, 3\)"):
        check_coo(np.array([0, 3]), np.array([3, 0]), np.array([1.0, 2.0]), [3, 4], "c.npz")
    with pytest.raises(DataError, match="c.npz: 2 row indices for 1 column indices"):
        check_coo(np.array([0, 1]), np.array([3]), np.array([1.0]), [3, 4], "c.npz")
    np.testing.assert_array_equal(check_edge_index([[0, 1], [1, 2]], 3, "g"), [[0, 1], [1, 2]])
    with pytest.raises(DataError, match=r"g.npz: edge_index holds 10000000, outside \[0, 3\)"):
        check_edge_index(np.array([[0, 10**7], [1, 2]]), 3, "g.npz")
