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
- ``metis``: METIS k-way parts (`partition.metis_parts`, pymetis: the ``distributed`` extra),
  numbered part after part, each part's nodes in the file's order (`metis_order`).

A permutation ``perm`` here is "new node i is old node perm[i]"; its inverse maps the user's
ids to the run's (`inverse`). Runs map every output back (`mgsparse predict`'s node ids,
rows and embeddings), so the user only ever sees the file's numbering.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from mgsparse.data.graph import Graph
from mgsparse.data.partition import metis_parts
from mgsparse.errors import ConfigError

ORDERS = ("none", "rcm", "degree", "metis")
METIS_BLOCK = 4096  # nodes per METIS part: see `metis_order`


def node_order(edge_index: np.ndarray, num_nodes: int, method: str) -> np.ndarray | None:
    """The permutation (N,) int64 of `method` (None for "none": the file's own order)."""
    if method not in ORDERS:
        raise ConfigError(f"dataset.reorder must be one of {', '.join(ORDERS)} (got {method!r})")
    if method == "none":
        return None
    if method == "degree":
        in_degree = np.bincount(np.asarray(edge_index[1], np.int64), minlength=num_nodes)
        return np.argsort(-in_degree, kind="stable").astype(np.int64)
    if method == "metis":
        return metis_order(edge_index, num_nodes, METIS_BLOCK)  # read at call: tests shrink it
    # csgraph loads scipy.linalg: 60 ms of every command's start, for this one call
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    a = symmetric_pattern(edge_index, num_nodes)
    return reverse_cuthill_mckee(a, symmetric_mode=True).astype(np.int64)


def symmetric_pattern(edge_index: np.ndarray, num_nodes: int) -> sp.csr_matrix:
    """A + Aᵀ as an int8 CSR pattern: RCM and METIS read an undirected graph, so a directed
    graph's edges count both ways."""
    src, dst = np.asarray(edge_index[0], np.int64), np.asarray(edge_index[1], np.int64)
    ones = np.ones(2 * src.size, dtype=np.int8)
    return sp.csr_matrix((ones, (np.r_[src, dst], np.r_[dst, src])),
                         shape=(num_nodes, num_nodes))


def metis_order(edge_index: np.ndarray, num_nodes: int, block: int = METIS_BLOCK,
                seed: int = 0) -> np.ndarray:
    """Nodes part by part over ceil(N / `block`) METIS parts, each part's nodes in the file's
    order (a stable sort by part).

    METIS keeps as many edges as it can inside a part, and a part's nodes become one run of
    at most `block` rows: 4,096 rows of a 128-wide float32 layer are 2 MB, this machine's L2,
    so a node's neighbours in its own part are read from a block that stays in cache. Smaller
    parts cost more to compute for no gain, and METIS's nested dissection order did no better
    (docs/speed.md, "Node order"). Within a part the file's order is kept, so a file already numbered with locality keeps
    it. `seed` is METIS's, fixed: the order depends on the graph alone, so every run of a
    config numbers its nodes the same way.
    """
    try:
        import pymetis  # noqa: F401  (asked first: a one-part graph fails the same way)
    except ImportError:
        raise ConfigError("dataset.reorder: metis needs pymetis, which is not installed: "
                          "pip install pymetis (or pip install -e '.[distributed]' in the "
                          "mgsparse checkout)") from None
    parts = -(-num_nodes // max(int(block), 1))
    if parts <= 1:
        return np.arange(num_nodes, dtype=np.int64)
    membership = metis_parts(symmetric_pattern(edge_index, num_nodes), parts, seed)
    return np.argsort(membership, kind="stable").astype(np.int64)


def inverse(perm: np.ndarray) -> np.ndarray:
    """inv with inv[perm[i]] = i: the run's id of each of the user's nodes."""
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv


def permute_graph(graph: Graph, perm: np.ndarray) -> Graph:
    """`graph` with node i of the result being node perm[i] of `graph`: features, labels and
    the three split masks gathered by `perm`, edges relabelled by its inverse and put back in
    canonical (source, target) order, each edge weight, feature row and type kept with its
    edge."""
    n = graph.num_nodes
    inv = inverse(perm)
    src, dst = inv[graph.edge_index[0]], inv[graph.edge_index[1]]
    by_pair = np.argsort(src * n + dst, kind="stable")  # exact while N² < 2⁶³
    weight, attr, kind = (None if a is None else a[by_pair]
                          for a in (graph.edge_weight, graph.edge_attr, graph.edge_type))
    return dataclasses.replace(
        graph, x=graph.x[perm], y=graph.y[perm],
        edge_index=np.stack([src[by_pair], dst[by_pair]]),
        train_mask=graph.train_mask[perm], val_mask=graph.val_mask[perm],
        test_mask=graph.test_mask[perm], edge_weight=weight,
        edge_attr=attr, edge_type=kind)


def reordered(graph: Graph, method: str) -> tuple[Graph, np.ndarray | None]:
    """`graph` in `method`'s order and the permutation applied (None: unchanged)."""
    perm = node_order(graph.edge_index, graph.num_nodes, method)
    return (graph, None) if perm is None else (permute_graph(graph, perm), perm)
