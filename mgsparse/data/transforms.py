"""Feature normalisation and the three node splits (public, full, random), as pure functions.

Every split returns three disjoint (N,) bool masks ``(train, val, test)``; nodes labelled
``-1`` (no label, e.g. CiteSeer's isolated test nodes) are never selected by any of them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from mgsparse.errors import ConfigError, DataError

SPLITS = ("public", "full", "random")
SPLIT_OPTIONS = ("num_train_per_class", "num_val", "num_test", "seed")
Masks = tuple[np.ndarray, np.ndarray, np.ndarray]


def normalize_features(x: sp.spmatrix | np.ndarray) -> sp.csr_matrix | np.ndarray:
    """Row-normalise: ``x_ij / sum_k x_ik``, so each bag-of-words row sums to 1.

    This is the usual ``NormalizeFeatures`` (Kipf's ``preprocess_features``) for
    non-negative features; an all-zero row (CiteSeer's padded nodes) stays zero instead of
    becoming NaN. Keeps the storage (CSR stays CSR) and returns float32.
    """
    if sp.issparse(x):
        x = sp.csr_matrix(x, dtype=np.float32)
        row_sum = np.asarray(x.sum(axis=1), dtype=np.float64).ravel()
        scale = np.divide(1.0, row_sum, out=np.zeros_like(row_sum), where=row_sum != 0)
        return sp.csr_matrix(sp.diags(scale.astype(np.float32)) @ x, dtype=np.float32)
    x = np.asarray(x, dtype=np.float32)
    row_sum = x.sum(axis=1, keepdims=True, dtype=np.float64)
    scale = np.divide(1.0, row_sum, out=np.zeros_like(row_sum), where=row_sum != 0)
    return (x * scale).astype(np.float32)


def index_to_mask(index: np.ndarray, num_nodes: int) -> np.ndarray:
    mask = np.zeros(num_nodes, dtype=bool)
    mask[index] = True
    return mask


def public_split(num_nodes: int, num_train: int, test_index: np.ndarray,
                 num_val: int = 500) -> Masks:
    """Planetoid's fixed split: nodes ``[0, num_train)`` train, the next ``num_val`` validate,
    ``test_index`` test (Cora: 140/500/1000)."""
    train = index_to_mask(np.arange(num_train), num_nodes)
    val = index_to_mask(np.arange(num_train, num_train + num_val), num_nodes)
    return train, val, index_to_mask(test_index, num_nodes)


def full_split(y: np.ndarray, val_mask: np.ndarray, test_mask: np.ndarray) -> Masks:
    """Keep val and test; every other labelled node trains (Cora: 1208/500/1000)."""
    train = ~(val_mask | test_mask) & (y >= 0)
    return train, val_mask.copy(), test_mask.copy()


def random_split(y: np.ndarray, num_train_per_class: int = 20, num_val: int = 500,
                 num_test: int = 1000, seed: int = 0) -> Masks:
    """``num_train_per_class`` random labelled nodes of every class train; of the labelled
    rest, ``num_val`` random nodes validate and the next ``num_test`` test. Seeded.

    Raises DataError instead of silently returning a smaller split than asked for.
    """
    rng = np.random.default_rng(seed)
    num_nodes = y.shape[0]
    num_classes = int(y.max()) + 1 if y.size and y.max() >= 0 else 0
    train = np.zeros(num_nodes, dtype=bool)
    for c in range(num_classes):  # a loop over classes, not nodes
        members = np.flatnonzero(y == c)
        if members.size < num_train_per_class:
            raise DataError(f"random split: class {c} has {members.size} labelled nodes, "
                            f"fewer than num_train_per_class={num_train_per_class}")
        train[rng.choice(members, size=num_train_per_class, replace=False)] = True
    rest = rng.permutation(np.flatnonzero(~train & (y >= 0)))
    if rest.size < num_val + num_test:
        raise DataError(f"random split: {rest.size} labelled nodes left after training, "
                        f"fewer than num_val + num_test = {num_val + num_test}")
    val = index_to_mask(rest[:num_val], num_nodes)
    test = index_to_mask(rest[num_val:num_val + num_test], num_nodes)
    return train, val, test


def default_split_sizes(y: np.ndarray) -> dict:
    """Split sizes that fit any labelled graph: Planetoid's 20/500/1000 when there are enough
    nodes, otherwise about a fifth of the smallest class per class for training and the
    rest shared one third validation, two thirds test."""
    labelled = y[y >= 0]
    if labelled.size == 0:
        raise DataError("cannot split a graph without labels")
    counts = np.bincount(labelled)
    counts = counts[counts > 0]
    per_class = int(min(20, max(1, counts.min() // 5)))
    rest = labelled.size - per_class * counts.size
    num_val = int(min(500, rest // 3))
    return {"num_train_per_class": per_class, "num_val": num_val,
            "num_test": int(min(1000, rest - num_val))}


def apply_split(graph, split: str = "public", **split_kwargs):
    """A copy of ``graph`` with its masks replaced by ``split``.

    'public' keeps the dataset's own split, 'full' trains on every labelled node outside
    val/test, 'random' calls `random_split` with ``split_kwargs`` (missing sizes from
    `default_split_sizes`). As in PyG, the size options are accepted and ignored by
    'public' and 'full', so one config can switch splits by changing one word.
    """
    unknown = sorted(set(split_kwargs) - set(SPLIT_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown split option(s) {', '.join(unknown)}; expected "
                          f"{', '.join(SPLIT_OPTIONS)}")
    if split == "public":
        return graph
    if split == "full":
        masks = full_split(graph.y, graph.val_mask, graph.test_mask)
    elif split == "random":
        masks = random_split(graph.y, **{**default_split_sizes(graph.y), **split_kwargs})
    else:
        raise ConfigError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    train, val, test = masks
    return dataclasses.replace(graph, train_mask=train, val_mask=val, test_mask=test)


def apply_normalize(graph):
    """A copy of ``graph`` with row-normalised features."""
    return dataclasses.replace(graph, x=normalize_features(graph.x))


def coalesce(edge_index: np.ndarray, weights: np.ndarray | None, num_nodes: int,
             undirected: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Sorted by (source, target), self loops dropped, repeats merged (first weight wins)."""
    row, col = edge_index
    if undirected:
        row, col = np.concatenate([row, col]), np.concatenate([col, row])
        weights = None if weights is None else np.concatenate([weights, weights])
    keep = np.flatnonzero(row != col)  # may be empty: a list of self loops only
    keys = row[keep] * num_nodes + col[keep]
    order = np.argsort(keys, kind="stable")  # stable: the first occurrence leads its run
    sorted_keys = keys[order]
    first = np.ones(keys.size, dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]
    chosen = keep[order[first]]
    merged = np.stack([row[chosen], col[chosen]]).astype(np.int64)
    return merged, (None if weights is None else weights[chosen])
