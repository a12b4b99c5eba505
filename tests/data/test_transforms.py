"""Feature normalisation and the public / full / random splits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data.synthetic import karate_club
from mgsparse.data.transforms import (
    apply_split,
    default_split_sizes,
    full_split,
    normalize_features,
    public_split,
    random_split,
)
from mgsparse.errors import ConfigError, DataError

X = np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0], [2.0, 2.0, 4.0]], dtype=np.float32)
X_NORMALISED = [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0], [0.25, 0.25, 0.5]]


def test_normalize_features_dense_and_sparse_agree_and_keep_zero_rows():
    dense = normalize_features(X)
    sparse = normalize_features(sp.csr_matrix(X))
    assert isinstance(dense, np.ndarray) and dense.dtype == np.float32
    assert sp.isspmatrix_csr(sparse) and sparse.dtype == np.float32
    np.testing.assert_allclose(dense, X_NORMALISED)
    np.testing.assert_allclose(sparse.toarray(), X_NORMALISED)
    assert not np.isnan(dense).any()


def test_public_split_is_planetoid_layout():
    train, val, test = public_split(10, 2, np.array([9, 7]), num_val=3)
    assert np.flatnonzero(train).tolist() == [0, 1]
    assert np.flatnonzero(val).tolist() == [2, 3, 4]
    assert np.flatnonzero(test).tolist() == [7, 9]


def test_full_split_trains_on_every_labelled_node_outside_val_and_test():
    y = np.array([0, 1, -1, 0, 1, 0])
    val = np.array([0, 1, 0, 0, 0, 0], bool)
    test = np.array([0, 0, 0, 0, 1, 0], bool)
    train, val2, test2 = full_split(y, val, test)
    assert np.flatnonzero(train).tolist() == [0, 3, 5]  # node 2 has no label
    assert (val2 == val).all() and (test2 == test).all()


def test_random_split_sizes_balance_seed_and_no_unlabelled():
    y = np.repeat([0, 1, 2, -1], 50)
    train, val, test = random_split(y, num_train_per_class=5, num_val=30, num_test=40, seed=7)
    assert np.bincount(y[train]).tolist() == [5, 5, 5]
    assert (val.sum(), test.sum()) == (30, 40)
    assert not ((train & val) | (train & test) | (val & test)).any()
    assert not (train | val | test)[y == -1].any()
    again = random_split(y, num_train_per_class=5, num_val=30, num_test=40, seed=7)
    other = random_split(y, num_train_per_class=5, num_val=30, num_test=40, seed=8)
    assert all((a == b).all() for a, b in zip((train, val, test), again, strict=True))
    assert not (train == other[0]).all()


def test_random_split_refuses_to_return_less_than_asked():
    y = np.repeat([0, 1], [30, 3])
    with pytest.raises(DataError, match="class 1 has 3 labelled nodes, fewer than "
                                        "num_train_per_class=5"):
        random_split(y, num_train_per_class=5, num_val=1, num_test=1)
    with pytest.raises(DataError, match="27 labelled nodes left"):
        random_split(y, num_train_per_class=3, num_val=20, num_test=10)


def test_default_split_sizes_fit_small_and_large_graphs():
    assert default_split_sizes(np.repeat([0, 1, 2], 1000)) == {
        "num_train_per_class": 20, "num_val": 500, "num_test": 1000}
    small = default_split_sizes(np.repeat([0, 1], [20, 14]))
    assert small == {"num_train_per_class": 2, "num_val": 10, "num_test": 20}
    random_split(np.repeat([0, 1], [20, 14]), **small)  # and it is satisfiable


def test_apply_split_options():
    g = karate_club()
    assert apply_split(g, "public", num_val=3) is g  # sizes are ignored, as in PyG
    full = apply_split(g, "full")
    assert full.split_sizes() == (34 - 6 - 26, 6, 26)
    rnd = apply_split(g, "random", num_train_per_class=3, num_val=4, num_test=10, seed=1)
    assert rnd.split_sizes() == (6, 4, 10)
    with pytest.raises(ConfigError, match="unknown split 'halves'"):
        apply_split(g, "halves")
    with pytest.raises(ConfigError, match="unknown split option.*num_trian"):
        apply_split(g, "random", num_trian=3)
