"""Edge lists at a layer's door: one check with a one-line error, and a per-graph cache.

GCNConv, GATConv and SAGEConv each turn an `edge_index` into an operand (Â, an attention
pattern, D⁻¹A) worth building once per graph; `GraphCache` keeps it with the graph it came from.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse import SparseTensor


def check_edge_index(edge_index: Any, num_nodes: int, who: str) -> np.ndarray:
    """The (2, E) int64 edge list, or a one-line ShapeError naming the layer."""
    if isinstance(edge_index, (SparseTensor, Tensor)):
        raise ShapeError(f"{who}: needs the graph's edge_index (2, E) array, got a "
                         f"{type(edge_index).__name__}; pass edge_index to the model")
    edge_index = np.asarray(edge_index)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or edge_index.dtype.kind not in "iu":
        raise ShapeError(f"{who}: edge_index must be an integer array of shape (2, E), "
                         f"got {edge_index.dtype} {edge_index.shape}")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        bad = int(edge_index.min()) if edge_index.min() < 0 else int(edge_index.max())
        raise ShapeError(f"{who}: edge_index refers to node {bad} "
                         f"but the features have {num_nodes} rows")
    return edge_index.astype(np.int64, copy=False)


class GraphCache:
    """One operand derived from a graph (Â, D⁻¹A, an attention pattern), kept with that graph.

    A hit needs the same node count and an equal edge list and edge weights, compared by value:
    O(E), cheap beside the product the operand feeds, and never stale — an array changed in
    place misses, an equal copy hits. Disabled (`enabled=False`) it stores nothing.
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._entry: tuple | None = None  # (edges copy, num_nodes, weights copy | None, value)

    def get(self, edges: np.ndarray, num_nodes: int, weights: np.ndarray | None = None) -> Any:
        entry = self._entry
        if entry is None or entry[1] != num_nodes or (entry[2] is None) != (weights is None):
            return None
        if not np.array_equal(entry[0], edges):
            return None
        return entry[3] if weights is None or np.array_equal(entry[2], weights) else None

    def put(self, edges: np.ndarray, num_nodes: int, value: Any,
            weights: np.ndarray | None = None) -> Any:
        if self.enabled:
            self._entry = (edges.copy(), num_nodes, None if weights is None else weights.copy(),
                           value)
        return value
