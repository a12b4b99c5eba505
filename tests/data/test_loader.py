"""DataLoader and TensorDataset: batch sizes, drop_last, seeded shuffling, errors."""

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data.loader import DataLoader, TensorDataset
from mgsparse.errors import ConfigError, DataError, ShapeError


def _arrays(n=10):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)  # row i = (2i, 2i + 1)
    y = np.arange(n, dtype=np.int64)
    return x, y


# ---------------------------------------------------------------- TensorDataset


def test_dataset_rows_and_repr():
    ds = TensorDataset(*_arrays())
    assert len(ds) == 10
    x3, y3 = ds[3]
    np.testing.assert_array_equal(x3, [6.0, 7.0])
    assert y3 == 3
    assert repr(ds) == "TensorDataset(len=10, arrays=[(10, 2) float32, (10,) int64])"


def test_dataset_keeps_sparse_features_sparse():
    x = sp.csr_matrix(np.eye(4, dtype=np.float32))
    (rows, labels) = TensorDataset(x, [0, 1, 2, 3])[np.array([2, 0])]
    assert sp.issparse(rows)
    np.testing.assert_array_equal(rows.toarray(), np.eye(4)[[2, 0]])
    np.testing.assert_array_equal(labels, [2, 0])


def test_dataset_rejects_mismatched_first_dimension():
    with pytest.raises(ShapeError, match=r"differ in their first dimension \(\(10, 2\), \(9,\)\)"):
        TensorDataset(np.zeros((10, 2)), np.zeros(9))


@pytest.mark.parametrize("arrays, message", [((), "at least one array"),
                                             ((np.float64(1.0),), "array 0 is 0-d")])
def test_dataset_rejects_no_arrays_and_scalars(arrays, message):
    with pytest.raises(ShapeError, match=message):
        TensorDataset(*arrays)


# ---------------------------------------------------------------- DataLoader sizes


@pytest.mark.parametrize("n, batch, drop_last, sizes", [
    (10, 3, False, [3, 3, 3, 1]),
    (10, 3, True, [3, 3, 3]),
    (9, 3, False, [3, 3, 3]),
    (9, 3, True, [3, 3, 3]),
    (2, 5, False, [2]),
    (2, 5, True, []),
    (0, 4, False, []),
])
def test_batch_sizes_and_len(n, batch, drop_last, sizes):
    loader = DataLoader(_arrays(n), batch_size=batch, drop_last=drop_last)
    batches = list(loader)
    assert len(loader) == len(sizes)
    assert [len(xb) for xb, _ in batches] == sizes
    assert all(len(xb) == len(yb) for xb, yb in batches)


def test_unshuffled_batches_are_in_order_and_yield_tuples_of_arrays():
    x, y = _arrays(5)
    batches = list(DataLoader((x, y), batch_size=2))
    assert all(isinstance(b, tuple) and len(b) == 2 for b in batches)
    np.testing.assert_array_equal(np.concatenate([yb for _, yb in batches]), y)
    np.testing.assert_array_equal(batches[1][0], [[4.0, 5.0], [6.0, 7.0]])
    assert batches[0][0].dtype == np.float32 and batches[0][1].dtype == np.int64


def test_single_array_yields_one_tuples():
    batches = list(DataLoader(np.arange(5.0), batch_size=4))
    assert [len(b) for b in batches] == [1, 1]
    np.testing.assert_array_equal(batches[1][0], [4.0])


# ---------------------------------------------------------------- shuffling


def _epoch_labels(loader):
    return np.concatenate([yb for _, yb in loader])


def test_shuffle_covers_every_sample_once_per_epoch():
    loader = DataLoader(_arrays(103), batch_size=10, shuffle=True, seed=0)
    for _ in range(3):
        labels = _epoch_labels(loader)
        assert len(labels) == 103
        np.testing.assert_array_equal(np.sort(labels), np.arange(103))


def test_shuffle_keeps_rows_paired():
    x, y = _arrays(50)
    for xb, yb in DataLoader((x, y), batch_size=7, shuffle=True, seed=3):
        np.testing.assert_array_equal(xb[:, 0], 2 * yb)


def test_shuffle_is_reproducible_from_seed_and_differs_between_epochs():
    first = DataLoader(_arrays(40), batch_size=8, shuffle=True, seed=7)
    second = DataLoader(_arrays(40), batch_size=8, shuffle=True, seed=7)
    epochs_a = [_epoch_labels(first) for _ in range(3)]
    epochs_b = [_epoch_labels(second) for _ in range(3)]
    for a, b in zip(epochs_a, epochs_b):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(epochs_a[0], epochs_a[1])
    assert not np.array_equal(epochs_a[0], np.arange(40))
    other_seed = _epoch_labels(DataLoader(_arrays(40), batch_size=8, shuffle=True, seed=8))
    assert not np.array_equal(epochs_a[0], other_seed)


def test_shuffle_accepts_a_generator():
    a = _epoch_labels(DataLoader(_arrays(20), batch_size=6, shuffle=True,
                                 seed=np.random.default_rng(11)))
    np.testing.assert_array_equal(a, np.random.default_rng(11).permutation(20))


def test_drop_last_with_shuffle_drops_the_remainder():
    loader = DataLoader(_arrays(10), batch_size=4, shuffle=True, drop_last=True, seed=1)
    labels = _epoch_labels(loader)
    assert len(loader) == 2 and len(labels) == 8 and len(set(labels.tolist())) == 8


# ---------------------------------------------------------------- errors and repr


@pytest.mark.parametrize("batch_size", [0, -3, 2.5, True, "8"])
def test_bad_batch_size(batch_size):
    with pytest.raises(ConfigError, match=f"batch_size must be a positive int, got {batch_size!r}"):
        DataLoader(_arrays(), batch_size=batch_size)


@pytest.mark.parametrize("seed", [-1, 1.5, "0"])
def test_bad_seed(seed):
    with pytest.raises(ConfigError, match="seed must be a non-negative int"):
        DataLoader(_arrays(), shuffle=True, seed=seed)


@pytest.mark.parametrize("dataset", [42, "abc", None])
def test_bad_dataset(dataset):
    with pytest.raises(DataError, match="expected a TensorDataset, an array or a tuple of arrays"):
        DataLoader(dataset)


def test_mismatched_arrays_through_loader():
    with pytest.raises(ShapeError, match="first dimension"):
        DataLoader((np.zeros((4, 2)), np.zeros(3)))


def test_repr():
    loader = DataLoader(_arrays(10), batch_size=4, shuffle=True, seed=0)
    assert repr(loader).startswith("DataLoader(len=3, batch_size=4, shuffle=True, drop_last=False")


def test_collate_fn_turns_each_batch_into_what_the_loop_wants():
    from mgsparse import Tensor

    X, y = np.arange(10.0).reshape(5, 2), np.arange(5)
    loader = DataLoader(TensorDataset(X, y), batch_size=2,
                        collate_fn=lambda b: (Tensor(b[0]), b[1]))
    batches = list(loader)
    assert [type(xb).__name__ for xb, _ in batches] == ["Tensor"] * 3
    np.testing.assert_array_equal(batches[1][0].data, X[2:4])
    np.testing.assert_array_equal(batches[2][1], y[4:])
