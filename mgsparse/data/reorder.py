"""Node orderings applied once at load (`dataset.reorder`), so the SpMM's gathers hit cache.

A sparse product Y = Â·X reads, for output row i, the rows X[j] of i's neighbours j. When
neighbours carry nearby numbers, those rows sit near each other in memory and the gather
reads cache lines it has just loaded; when the numbering is random (a shuffled file, a
generator that numbers nodes at random) every gather is a cache miss once X outgrows the
cache. A permutation of the node ids changes no result beyond rounding: Â' = P·Â·Pᵀ and
X' = P·X give Y' = P·Y.

- ``rcm``: reverse Cuthill–McKee on the symmetrised pattern of A (scipy.sparse.csgraph), a
  breadth-first numbering that keeps every edge's two ends close (a small bandwidth).
- ``degree``: nodes by descending in-degree (stable, ties in the file's order): the rows read
  most often, the hubs', share the first cache lines.

A permutation ``perm`` here is "new node i is old node perm[i]"; its inverse maps the user's
ids to the run's (`inverse`). Runs map every output back (`mgsparse predict`'s node ids,
rows and embeddings), so the user only ever sees the file's numbering.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from mgsparse.data.graph import Graph
from mgsparse.errors import ConfigError

ORDERS = ("none", "rcm", "degree")


def node_order(edge_index: np.ndarray, num_nodes: int, method: str) -> np.ndarray | None:
    """The permutation (N,) int64 of `method` (None for "none": the file's own order)."""
    if method not in ORDERS:
        raise ConfigError(f"dataset.reorder must be one of {', '.join(ORDERS)} (got {method!r})")
    if method == "none":
        return None
    src, dst = np.asarray(edge_index[0], np.int64), np.asarray(edge_index[1], np.int64)
    if method == "degree":
        in_degree = np.bincount(dst, minlength=num_nodes)
        return np.argsort(-in_degree, kind="stable").astype(np.int64)
    # A + Aᵀ: RCM needs a symmetric pattern (a directed graph's edges count both ways)
    ones = np.ones(2 * src.size, dtype=np.int8)
    a = sp.csr_matrix((ones, (np.r_[src, dst], np.r_[dst, src])), shape=(num_nodes, num_nodes))
    return reverse_cuthill_mckee(a, symmetric_mode=True).astype(np.int64)


def inverse(perm: np.ndarray) -> np.ndarray:
    """inv with inv[perm[i]] = i: the run's id of each of the user's nodes."""
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv


def permute_graph(graph: Graph, perm: np.ndarray) -> Graph:
    """`graph` with node i of the result being node perm[i] of `graph`: features, labels and
    the three split masks gathered by `perm`, edges relabelled by its inverse and put back in
    canonical (source, target) order, each edge weight kept with its edge."""
    n = graph.num_nodes
    inv = inverse(perm)
    src, dst = inv[graph.edge_index[0]], inv[graph.edge_index[1]]
    by_pair = np.argsort(src * n + dst, kind="stable")  # exact while N² < 2⁶³
    weight = None if graph.edge_weight is None else graph.edge_weight[by_pair]
    return dataclasses.replace(
        graph, x=graph.x[perm], y=graph.y[perm],
        edge_index=np.stack([src[by_pair], dst[by_pair]]),
        train_mask=graph.train_mask[perm], val_mask=graph.val_mask[perm],
        test_mask=graph.test_mask[perm], edge_weight=weight)


def reordered(graph: Graph, method: str) -> tuple[Graph, np.ndarray | None]:
    """`graph` in `method`'s order and the permutation applied (None: unchanged)."""
    perm = node_order(graph.edge_index, graph.num_nodes, method)
    return (graph, None) if perm is None else (permute_graph(graph, perm), perm)
