"""The `Graph` dataclass every loader returns, and a summary of one (`dataset_info`).

A graph here is plain arrays, never engine Tensors: the model code decides how to wrap them.

- ``x``: node features, a scipy CSR matrix (N, F) float32 for bag-of-words data, or a dense
  ndarray (N, F) float32.
- ``y``: labels (N,) int64 in ``[0, num_classes)``; ``-1`` marks a node without a label, which
  no mask ever selects.
- ``edge_index``: (2, E) int64, row 0 the source and row 1 the target of each directed edge.
  Undirected graphs store both directions, sorted by (source, target), without duplicates or
  self loops.
- ``train_mask``, ``val_mask``, ``test_mask``: (N,) bool.
- ``edge_weight``: optional (E,) float32 aligned with ``edge_index``.
- ``edge_attr``: optional (E, F_e) float32 edge features (a bond's one-hot type), and
  ``edge_type``: optional (E,) int64 edge type (a relation id), both aligned with
  ``edge_index``: row k describes edge k, wherever edges are reordered, selected or batched
  (`check_edge_data`). A self loop an operand adds has no row here; a layer that reads edge
  features and adds loops fills theirs with zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mgsparse.errors import DataError


@dataclass
class Graph:
    """Node features, labels, directed edges and the three split masks of one graph."""

    x: sp.csr_matrix | np.ndarray
    y: np.ndarray
    edge_index: np.ndarray
    num_nodes: int
    num_classes: int
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    name: str
    edge_weight: np.ndarray | None = None
    edge_attr: np.ndarray | None = None
    edge_type: np.ndarray | None = None

    def __post_init__(self) -> None:
        # Cheap O(1) shape checks: a wrong shape here would surface much later as a
        # confusing broadcasting error inside a layer.
        n = self.num_nodes
        if self.x.shape[0] != n:
            raise DataError(f"{self.name}: x has {self.x.shape[0]} rows for {n} nodes")
        if self.y.shape != (n,):
            raise DataError(f"{self.name}: y has shape {self.y.shape}, expected ({n},)")
        if self.edge_index.ndim != 2 or self.edge_index.shape[0] != 2:
            raise DataError(f"{self.name}: edge_index has shape {self.edge_index.shape}, "
                            "expected (2, E)")
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            mask = getattr(self, mask_name)
            if mask.shape != (n,) or mask.dtype != np.bool_:
                raise DataError(f"{self.name}: {mask_name} must be bool of shape ({n},), "
                                f"got {mask.dtype} {mask.shape}")
        if self.edge_weight is not None and self.edge_weight.shape != (self.num_edges,):
            raise DataError(f"{self.name}: edge_weight has shape {self.edge_weight.shape}, "
                            f"expected ({self.num_edges},)")
        check_edge_data(self.name, self.num_edges, self.edge_attr, self.edge_type)

    @property
    def num_edges(self) -> int:
        """Directed edges: an undirected edge counts twice (Cora: 10,556 = 2 x 5,278)."""
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.x)

    def split_sizes(self) -> tuple[int, int, int]:
        return (int(self.train_mask.sum()), int(self.val_mask.sum()), int(self.test_mask.sum()))

    def __repr__(self) -> str:
        kind = f"csr nnz={self.x.nnz}" if self.is_sparse else "dense"
        train, val, test = self.split_sizes()
        return (f"Graph(name={self.name!r}, num_nodes={self.num_nodes}, "
                f"num_edges={self.num_edges}, num_features={self.num_features}, "
                f"num_classes={self.num_classes}, x={kind} {self.x.dtype}, "
                f"split={train}/{val}/{test})")


def check_edge_data(name: str, num_edges: int, edge_attr: np.ndarray | None,
                    edge_type: np.ndarray | None) -> None:
    """Edge features (E, F_e) of a float type and edge types (E,) of an integer type, one row
    per edge, or None: a DataError naming the array and the mismatch otherwise. Checked
    where edges are built, because a row too few would only surface as a broadcasting error
    deep inside a layer, or silently pair edge k with edge k+1's bond."""
    if edge_attr is not None:
        a = np.asarray(edge_attr)
        if a.ndim != 2 or a.shape[0] != num_edges or a.dtype.kind != "f":
            raise DataError(f"{name}: edge_attr is {a.dtype} of shape {a.shape}; expected "
                            f"float of shape ({num_edges}, F_e), one row per edge")
    if edge_type is not None:
        t = np.asarray(edge_type)
        if t.shape != (num_edges,) or t.dtype.kind not in "iu":
            raise DataError(f"{name}: edge_type is {t.dtype} of shape {t.shape}; expected "
                            f"integers of shape ({num_edges},), one per edge")
        if t.size and int(t.min()) < 0:
            raise DataError(f"{name}: edge_type holds {int(t.min())}; types are ids >= 0")


def undirected_edges(row: np.ndarray, col: np.ndarray, num_nodes: int) -> np.ndarray:
    """Both directions of every pair, self loops dropped, duplicates merged, sorted by
    (source, target): the canonical form of an undirected ``edge_index``.

    Each edge becomes one int64 key ``source * N + target`` (exact while N^2 < 2^63, i.e.
    N < 3e9), so a single sort orders and deduplicates them.
    """
    keep = row != col
    row, col = row[keep], col[keep]
    keys = sorted_unique(np.concatenate([row * num_nodes + col, col * num_nodes + row]))
    edge_index = np.empty((2, keys.size), dtype=np.int64)
    np.divmod(keys, num_nodes, out=(edge_index[0], edge_index[1]))
    return edge_index


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique`` by sort and neighbour compare: on 10M int64 keys this takes 0.8 s where
    numpy 2's hash-based ``np.unique`` takes 12 s."""
    keys = np.sort(keys)
    if keys.size:
        repeated = keys[1:] == keys[:-1]
        if repeated.any():
            keys = keys[np.concatenate([[True], ~repeated])]
    return keys


def undirected_edges_from(row: np.ndarray, col: np.ndarray, num_nodes: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """`undirected_edges`, and for each of its edges the input position it comes from, so
    per-edge data (a bond's label) can follow: (edge_index (2, E'), origin (E',) int64).

    Edge i → j takes the data of the first input pair (i, j) when one is listed, else of the
    first pair (j, i): a file that lists both directions (TU's) keeps each direction's own
    line; one that lists each pair once gives both directions its line. The keys of both
    directions, input pairs first, are sorted stably, so the first of equal keys is the
    listed direction."""
    keep = np.flatnonzero(row != col)
    row, col = row[keep], col[keep]
    keys = np.concatenate([row * num_nodes + col, col * num_nodes + row])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first = np.concatenate([[True], keys[1:] != keys[:-1]]) if keys.size else keys.astype(bool)
    keys, origin = keys[first], np.concatenate([keep, keep])[order[first]]
    edge_index = np.empty((2, keys.size), dtype=np.int64)
    np.divmod(keys, num_nodes, out=(edge_index[0], edge_index[1]))
    return edge_index, origin.astype(np.int64)


def dataset_info(graph: Graph) -> dict:
    """The numbers `mgsparse datasets info` shows.

    nnz ratios are the stored fraction of each matrix: adjacency ``E / N^2`` and features
    ``nnz(X) / (N * F)`` -- what decides whether a sparse kernel pays off.
    """
    n, f = graph.num_nodes, graph.num_features
    feature_nnz = graph.x.nnz if graph.is_sparse else int(np.count_nonzero(graph.x))
    labeled = graph.y[graph.y >= 0]
    counts = np.bincount(labeled, minlength=graph.num_classes) if labeled.size else []
    train, val, test = graph.split_sizes()
    return {
        "name": graph.name,
        "nodes": n,
        "edges": graph.num_edges,
        "features": f,
        "classes": graph.num_classes,
        "adjacency_nnz_ratio": graph.num_edges / float(n * n) if n else 0.0,
        "feature_nnz_ratio": feature_nnz / float(n * f) if n * f else 0.0,
        "feature_storage": "sparse CSR" if graph.is_sparse else "dense",
        "train": train,
        "val": val,
        "test": test,
        "unlabeled": int((graph.y < 0).sum()),
        "label_counts": [int(c) for c in counts],
    }
