"""The computation subgraph of one node's prediction, and the model run on it under a mask.

A model that reads Â (GCN, SGC, APPNP, GCNII) computes node v's logits from v's L-hop
in-neighbourhood only (L: its layers, or its propagation steps), so an explanation computes
that and nothing else, as training's receptive fields do:

- the nodes within L hops of v (following edges backwards, source → target);
- the *computation edges*: every edge j → i whose target i is within L − 1 hops (its source
  is then within L); an edge into a node L hops away feeds only rows no later layer reads;
- Â's entries on those edges and on every subgraph node's self loop, read from the run's
  whole-graph Â, so the degrees are the whole graph's and the logits of v on the subgraph are
  bitwise those of the whole graph up to summation order (tests hold it to 1e-5).

The mask multiplies each computation edge's entry of Â, after the normalisation, as PyG's
explain hooks multiply each message (self loops stay 1):

    Â_m[i, j] = Â[i, j] · m_(j→i),    X_f = X · f   (f: one factor per feature column)

Gradients reach m through the sparse product's backward to the stored values (only at the
nonzeros) and f through the dense product's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor, concatenate
from mgsparse.errors import ConfigError
from mgsparse.sparse import SparseTensor


def hops_of(model: Any, kind: str) -> int:
    """How far a node's logits reach: the model's propagation steps (SGC, APPNP) or its
    graph layers (GCN, GCNII)."""
    steps = getattr(model, "k", None) or getattr(getattr(model, "prop", None), "k", None)
    return int(steps) if kind in ("sgc", "appnp") else len(model.convs)


def in_hops(edge_index: np.ndarray, num_nodes: int, center: int, hops: int) -> np.ndarray:
    """(N,) int64: each node's distance to `center` along edges source → target, taken
    backwards (how far its features travel to reach the center), -1 beyond `hops`. One
    sparse product per hop."""
    src, dst = edge_index
    out_of = sp.csr_matrix((np.ones(src.size, np.int32), (src, dst)), shape=(num_nodes,) * 2)
    dist = np.full(num_nodes, -1, dtype=np.int64)
    dist[center] = 0
    frontier = np.zeros(num_nodes, dtype=np.int32)
    frontier[center] = 1
    for h in range(1, hops + 1):
        new = (out_of @ frontier > 0) & (dist < 0)  # the sources of edges into the frontier
        if not new.any():
            break
        dist[new] = h
        frontier = new.astype(np.int32)
    return dist


def _entries(norm_adj: Any, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Â[rows, cols] of a SparseTensor or a dense Tensor, float64."""
    if rows.size == 0:
        return np.zeros(0)
    if isinstance(norm_adj, SparseTensor):
        return np.asarray(norm_adj.to_scipy("csr")[rows, cols], np.float64).ravel()
    return np.asarray(norm_adj.data, np.float64)[rows, cols]


def _dense_rows(features: Any, nodes: np.ndarray) -> np.ndarray:
    if isinstance(features, SparseTensor):
        return features.to_scipy("csr")[nodes].toarray()
    if isinstance(features, Tensor):
        return np.asarray(features.data)[nodes]
    return (features[nodes].toarray() if sp.issparse(features) else np.asarray(features)[nodes])


@dataclass
class Computation:
    """Node `center`'s computation subgraph: `nodes` (S,) whole-graph ids (the center first),
    `edges` (E_c,) positions in the whole graph's edge_index of the computation edges, their
    local ends `row` (target) and `col` (source), Â on them (`edge_values`) and on the self
    loops (`loop_values`), and the subgraph's dense features `x` (S, F)."""

    center: int
    nodes: np.ndarray
    edges: np.ndarray
    row: np.ndarray
    col: np.ndarray
    edge_values: np.ndarray
    loop_values: np.ndarray
    x: np.ndarray
    _pattern: SparseTensor | None = field(default=None, repr=False)

    @property
    def num_edges(self) -> int:
        return int(self.edges.size)

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def operand(self, edge_mask: Tensor | np.ndarray | None = None,
                edge_values: Tensor | None = None) -> SparseTensor:
        """Â of the subgraph (S, S), each computation edge's entry times `edge_mask` (E_c,),
        or replaced by `edge_values` (a leaf, for the gradient w.r.t. Â's values)."""
        dtype = self.x.dtype
        values = edge_values if edge_values is not None else Tensor(self.edge_values, dtype=dtype)
        if edge_mask is not None:
            values = values * (edge_mask if isinstance(edge_mask, Tensor)
                               else Tensor(np.asarray(edge_mask), dtype=dtype))
        if self._pattern is None:  # the pattern (and its CSR views) once, for every step
            loops = np.arange(self.nodes.size, dtype=np.int64)
            indices = np.stack([np.r_[self.row, loops], np.r_[self.col, loops]])
            self._pattern = SparseTensor(indices, np.r_[self.edge_values, self.loop_values],
                                         (self.nodes.size, self.nodes.size))
        return self._pattern.with_values(concatenate([values, Tensor(self.loop_values,
                                                                     dtype=dtype)]))

    def reverse(self) -> np.ndarray:
        """(E_c,) the position of each computation edge's reverse among them (itself when the
        reverse is not a computation edge)."""
        n = self.nodes.size
        keys = self.row * n + self.col
        order = np.argsort(keys)
        back = self.col * n + self.row
        at = np.minimum(np.searchsorted(keys[order], back), max(keys.size - 1, 0))
        found = keys[order][at] == back if keys.size else np.zeros(0, bool)
        return np.where(found, order[at], np.arange(keys.size))

    def features(self, feature_mask: Tensor | None = None) -> Tensor:
        x = Tensor(self.x)
        return x if feature_mask is None else x * feature_mask


def computation(edge_index: np.ndarray, norm_adj: Any, features: Any, center: int,
                hops: int, dtype: Any = np.float32) -> Computation:
    """The computation subgraph of `center` (see the module) in the run's numbering."""
    num_nodes = int(features.shape[0])
    if not 0 <= center < num_nodes:
        raise ConfigError(f"node {center} is outside the graph (0..{num_nodes - 1})")
    dist = in_hops(edge_index, num_nodes, center, hops)
    inside = np.flatnonzero(dist >= 0)
    nodes = np.r_[center, inside[inside != center]]
    local = np.full(num_nodes, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    src, dst = edge_index
    edges = np.flatnonzero((dist[dst] >= 0) & (dist[dst] <= hops - 1) & (dist[src] >= 0))
    return Computation(
        center=center, nodes=nodes, edges=edges, row=local[dst[edges]], col=local[src[edges]],
        edge_values=_entries(norm_adj, dst[edges], src[edges]).astype(dtype),
        loop_values=_entries(norm_adj, nodes, nodes).astype(dtype),
        x=_dense_rows(features, nodes).astype(dtype))
