"""`GraphSet`: many small graphs (molecules, proteins) as one set of CSR-like arrays.

Graph classification trains on sets of graphs, one label each. Storing them as one list of
`Graph` objects would make every batch a Python loop over graphs; here all graphs share
flat arrays and two offset vectors, so a subset or a batch is a handful of numpy calls:

- ``x``: (N, F) float32, the node features of every graph, graph after graph;
- ``edge_index``: (2, E) int64 with *global* node ids, edges sorted by graph (within a graph
  by (source, target), the canonical undirected form of `graph.undirected_edges`);
- ``node_ptr``: (G+1,) int64 offsets: graph g owns nodes ``node_ptr[g]:node_ptr[g+1]``;
- ``edge_ptr``: (G+1,) int64 offsets: graph g owns edges ``edge_ptr[g]:edge_ptr[g+1]``;
- ``y``: (G,) int64 graph labels in ``[0, num_classes)``;
- ``edge_attr``: optional (E, F_e) float32 edge features, ``edge_type``: optional (E,) int64
  edge types, row k of each for edge k (a bond's one-hot order; its order as an id).

Invariants, checked on construction: both pointers start at 0, never decrease and end at N
and E; every edge joins two nodes of the graph that owns it; the edge data has one row per
edge. A graph may have no nodes (its readout is then 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgsparse.data.graph import check_edge_data
from mgsparse.errors import DataError


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without the loop:
    each output position minus the start of its block, plus that block's ``start``."""
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], counts)
    return np.repeat(np.asarray(starts, dtype=np.int64), counts) + within


@dataclass
class GraphSet:
    """G small graphs in flat arrays (see the module docstring for the layout)."""

    x: np.ndarray
    edge_index: np.ndarray
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    y: np.ndarray
    num_classes: int
    name: str
    edge_attr: np.ndarray | None = None
    edge_type: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._check_shapes()
        self._check_pointers()
        self._check_edges()
        check_edge_data(self.name, self.num_edges, self.edge_attr, self.edge_type)

    def _check_shapes(self) -> None:
        if self.x.ndim != 2:
            raise DataError(f"{self.name}: x has shape {self.x.shape}, expected (N, F)")
        if self.edge_index.ndim != 2 or self.edge_index.shape[0] != 2:
            raise DataError(f"{self.name}: edge_index has shape {self.edge_index.shape}, "
                            "expected (2, E)")
        g = self.y.shape[0] if self.y.ndim == 1 else -1
        for ptr in ("node_ptr", "edge_ptr"):
            if getattr(self, ptr).shape != (g + 1,):
                raise DataError(f"{self.name}: {ptr} has shape {getattr(self, ptr).shape} for "
                                f"y of shape {self.y.shape}; expected ({g + 1},)")
        bad = np.flatnonzero((self.y < 0) | (self.y >= self.num_classes))
        if bad.size:
            raise DataError(f"{self.name}: graph {bad[0]} has label {self.y[bad[0]]}, not a "
                            f"class id in [0, {self.num_classes})")

    def _check_pointers(self) -> None:
        for ptr, total in (("node_ptr", self.num_nodes), ("edge_ptr", self.num_edges)):
            p = getattr(self, ptr)
            if p[0] != 0 or p[-1] != total or np.any(np.diff(p) < 0):
                raise DataError(f"{self.name}: {ptr} must rise from 0 to {total} without "
                                f"decreasing (got {p[0]} ... {p[-1]})")

    def _check_edges(self) -> None:
        """Every edge inside the graph that owns it (which also keeps ids in [0, N))."""
        owner = np.repeat(np.arange(self.num_graphs), self.edges_per_graph)
        lo, hi = self.node_ptr[owner], self.node_ptr[owner + 1]
        outside = np.flatnonzero(((self.edge_index < lo) | (self.edge_index >= hi)).any(axis=0))
        if outside.size:
            k = outside[0]
            raise DataError(f"{self.name}: edge {k} ({self.edge_index[0, k]} -> "
                            f"{self.edge_index[1, k]}) leaves graph {owner[k]}, which owns "
                            f"nodes [{lo[k]}, {hi[k]})")

    # --- sizes -----------------------------------------------------------------------------

    @property
    def num_graphs(self) -> int:
        return int(self.y.shape[0])

    def __len__(self) -> int:
        return self.num_graphs

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Directed edges: each undirected bond counts twice (MUTAG: 7,442)."""
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def num_edge_features(self) -> int:
        """F_e, the width of edge_attr (0 without edge features)."""
        return 0 if self.edge_attr is None else int(self.edge_attr.shape[1])

    @property
    def nodes_per_graph(self) -> np.ndarray:
        return np.diff(self.node_ptr)

    @property
    def edges_per_graph(self) -> np.ndarray:
        return np.diff(self.edge_ptr)

    def graph_of_node(self) -> np.ndarray:
        """(N,) int64: the graph each node belongs to (PyG's ``batch`` vector)."""
        return np.repeat(np.arange(self.num_graphs, dtype=np.int64), self.nodes_per_graph)

    def class_counts(self) -> np.ndarray:
        return np.bincount(self.y, minlength=self.num_classes)

    # --- selection ---------------------------------------------------------------------------

    def subset(self, idx) -> GraphSet:
        """The graphs ``idx`` (int indices in any order, repeats allowed, or a (G,) bool
        mask) as a new GraphSet, in that order, node ids renumbered from 0. Vectorised:
        the kept nodes and edges are `ranges` over the pointers, and each kept edge moves
        by its graph's shift ``new_node_ptr[g'] - node_ptr[g]``; its features and type go
        with it."""
        idx = np.asarray(idx)
        idx = np.flatnonzero(idx) if idx.dtype == np.bool_ else idx.astype(np.int64).ravel()
        if idx.size and (idx.min() < -self.num_graphs or idx.max() >= self.num_graphs):
            raise IndexError(f"{self.name}: graph index out of range for {self.num_graphs} "
                             "graphs")
        idx = idx % max(self.num_graphs, 1)
        n_counts, e_counts = self.nodes_per_graph[idx], self.edges_per_graph[idx]
        node_ptr = np.concatenate([[0], np.cumsum(n_counts)]).astype(np.int64)
        edge_ptr = np.concatenate([[0], np.cumsum(e_counts)]).astype(np.int64)
        nodes = ranges(self.node_ptr[idx], n_counts)
        edges = ranges(self.edge_ptr[idx], e_counts)
        shift = np.repeat(node_ptr[:-1] - self.node_ptr[idx], e_counts)
        attr, kind = (None if a is None else a[edges] for a in (self.edge_attr, self.edge_type))
        return GraphSet(x=self.x[nodes], edge_index=self.edge_index[:, edges] + shift,
                        node_ptr=node_ptr, edge_ptr=edge_ptr, y=self.y[idx],
                        num_classes=self.num_classes, name=self.name, edge_attr=attr,
                        edge_type=kind)

    # --- description ------------------------------------------------------------------------

    def info(self) -> dict:
        """What `mgsparse datasets info` shows for a set of graphs."""
        def spread(counts: np.ndarray) -> dict:
            if not counts.size:
                return {"mean": 0.0, "min": 0, "max": 0}
            return {"mean": float(counts.mean()), "min": int(counts.min()),
                    "max": int(counts.max())}

        counts = self.class_counts()
        return {
            "name": self.name, "graphs": self.num_graphs, "nodes": self.num_nodes,
            "edges": self.num_edges, "features": self.num_features,
            "edge_features": self.num_edge_features,
            "classes": self.num_classes,
            "nodes_per_graph": spread(self.nodes_per_graph),
            "edges_per_graph": spread(self.edges_per_graph),
            "class_counts": [int(c) for c in counts],
            "class_balance": [float(c) / max(self.num_graphs, 1) for c in counts],
        }

    def __repr__(self) -> str:
        edges = f"num_edge_features={self.num_edge_features}, " if self.edge_attr is not None else ""
        return (f"GraphSet(name={self.name!r}, num_graphs={self.num_graphs}, "
                f"num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"num_features={self.num_features}, {edges}num_classes={self.num_classes}, "
                f"x=dense {self.x.dtype})")
