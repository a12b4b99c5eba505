"""Mini-batches over arrays: `TensorDataset` pairs arrays row by row, `DataLoader` slices them.

`data` is a leaf of the package (numpy + `mgsparse.errors` only), so batches come out as
tuples of numpy arrays, not `Tensor`s: the trainer wraps each batch into Tensors of the dtype
it trains in. Keeping the loader engine-free lets it feed any consumer (the Tensor engine,
the scalar `Value` engine, plain numpy metrics) and keeps the import rule one-way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mgsparse.errors import ConfigError, DataError, ShapeError


class TensorDataset:
    """Arrays that share their first dimension; item i is the tuple of every array's row i.

    Anything with a `.shape` and numpy-style row indexing is kept as is (so a scipy CSR
    feature matrix stays sparse); other sequences go through `np.asarray`.
    """

    def __init__(self, *arrays: Any):
        if not arrays:
            raise ShapeError("TensorDataset needs at least one array")
        arrays = tuple(a if hasattr(a, "shape") else np.asarray(a) for a in arrays)
        for i, a in enumerate(arrays):
            if len(a.shape) == 0:
                raise ShapeError(f"TensorDataset: array {i} is 0-d (no first dimension)")
        lengths = [a.shape[0] for a in arrays]
        if any(n != lengths[0] for n in lengths):
            shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
            raise ShapeError(f"TensorDataset: arrays differ in their first dimension ({shapes})")
        self.arrays = arrays

    def __len__(self) -> int:
        return int(self.arrays[0].shape[0])

    def __getitem__(self, index: Any) -> tuple:
        """Rows `index` (an int, a slice or an integer array) of every array, as a tuple."""
        return tuple(a[index] for a in self.arrays)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{tuple(a.shape)} {a.dtype}" for a in self.arrays)
        return f"TensorDataset(len={len(self)}, arrays=[{shapes}])"


class DataLoader:
    """Iterate a dataset in mini-batches of `batch_size` rows, one tuple of arrays per batch.

    `dataset` is a `TensorDataset`, a single array, or a tuple/list of arrays (wrapped into a
    `TensorDataset`). With `shuffle=True` every pass draws a fresh permutation from one
    generator built once from `seed` (an int, `None` for fresh entropy, or a
    `np.random.Generator`): each epoch sees every sample exactly once, epochs differ from one
    another, and the whole sequence of epochs is reproducible from the seed.
    `drop_last=True` skips the final short batch. `collate_fn`, as in PyTorch, turns each batch
    tuple into what the loop wants, e.g. ``lambda b: (Tensor(b[0]), b[1])`` for Tensor inputs
    and integer targets (the loader itself stays engine-free).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 32,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | np.random.Generator | None = None,
        collate_fn: Callable[[tuple], Any] | None = None,
    ):
        if not _is_count(batch_size) or batch_size < 1:
            raise ConfigError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        self.dataset = _as_dataset(dataset)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.rng = _as_generator(seed)
        self.collate_fn = collate_fn

    def __len__(self) -> int:
        """Batches per epoch: ⌊n / b⌋ with drop_last, ⌈n / b⌉ otherwise."""
        n, b = len(self.dataset), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self) -> Iterator[tuple]:
        n, b = len(self.dataset), self.batch_size
        order = self.rng.permutation(n) if self.shuffle else None
        for start in range(0, len(self) * b, b):
            stop = min(start + b, n)
            # unshuffled batches are slices: numpy views, no copy
            batch = self.dataset[slice(start, stop) if order is None else order[start:stop]]
            yield batch if self.collate_fn is None else self.collate_fn(batch)

    def __repr__(self) -> str:
        return (f"DataLoader(len={len(self)}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}, dataset={self.dataset!r})")


def _as_dataset(dataset: Any) -> Any:
    if isinstance(dataset, np.ndarray):
        return TensorDataset(dataset)
    if isinstance(dataset, (tuple, list)):
        return TensorDataset(*dataset)
    indexable = hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")
    if indexable and not isinstance(dataset, (str, bytes)):
        return dataset  # a TensorDataset or any dataset taking an index array
    raise DataError(f"DataLoader: expected a TensorDataset, an array or a tuple of arrays, "
                    f"got {type(dataset).__name__}")


def _as_generator(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (_is_count(seed) and seed >= 0):
        return np.random.default_rng(seed)
    raise ConfigError("DataLoader: seed must be a non-negative int, a numpy Generator or None, "
                      f"got {seed!r}")


def _is_count(x: Any) -> bool:
    """An int (Python or numpy) that is not a bool."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


__all__ = ["DataLoader", "TensorDataset"]
