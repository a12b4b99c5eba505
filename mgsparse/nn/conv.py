"""Graph convolutions on the sparse engine: the adjacency stays a `SparseTensor` end to end.

`GCNConv` (Kipf & Welling, 2017):  H' = Â · (H W) + b,  Â = D^-1/2 (A + I) D^-1/2.
The normalisation is a free function (`mgsparse.sparse.gcn_norm`) that the layer calls once
and caches (`cached=True`, transductive training: the graph never changes between epochs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.nn.layers import glorot_
from mgsparse.nn.module import Module, Parameter
from mgsparse.sparse import SparseTensor, as_operand, gcn_norm

Adjacency = Any  # an edge_index (2, E) array, a normalised SparseTensor or a dense Tensor


def normalized_adjacency(
    edge_index: np.ndarray,
    num_nodes: int,
    edge_weight: Tensor | None = None,
    sparsity_threshold: float | None = None,
    dtype: Any = np.float32,
) -> SparseTensor | Tensor:
    """Â = D^-1/2 (A + I) D^-1/2 built from an edge list; kept sparse unless it is dense enough.

    Differentiable with respect to `edge_weight` (the degrees depend on it).
    """
    A = SparseTensor.from_edge_index(edge_index, num_nodes, values=edge_weight, dtype=dtype)
    norm_adj = gcn_norm(A)
    return norm_adj if sparsity_threshold is None else as_operand(norm_adj, sparsity_threshold)


class GCNConv(Module):
    """One graph convolution, H' = Â (H W) + b.

    `forward(x, adj, edge_weight=None)`: `x` is a dense Tensor (N, F_in) or a SparseTensor of
    features; `adj` an `edge_index` (normalised here and cached) or an already-normalised
    operand (SparseTensor or dense Tensor), used as is. W is applied first, so the sparse
    product runs on F_out columns rather than F_in.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 cached: bool = True, sparsity_threshold: float | None = None,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.cached, self.sparsity_threshold = cached, sparsity_threshold
        self.weight = Parameter(glorot_((in_features, out_features), rng, dtype), dtype=dtype)
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None
        self._norm_adj: SparseTensor | Tensor | None = None

    def norm_adj(self, adj: Adjacency, num_nodes: int, edge_weight: Tensor | None = None):
        if not isinstance(adj, np.ndarray):
            return adj  # already normalised
        if self._norm_adj is not None:
            return self._norm_adj
        learned = edge_weight is not None and edge_weight.requires_grad
        norm_adj = normalized_adjacency(adj, num_nodes, edge_weight, self.sparsity_threshold,
                                        self.weight.dtype)
        if self.cached and not learned:  # a learned weight changes Â every step
            self._norm_adj = norm_adj
        return norm_adj

    def forward(self, x: Tensor | SparseTensor, adj: Adjacency,
                edge_weight: Tensor | None = None) -> Tensor:
        h = x @ self.weight  # (N, F_out)
        out = self.norm_adj(adj, h.shape[0], edge_weight) @ h
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, cached={self.cached}"
