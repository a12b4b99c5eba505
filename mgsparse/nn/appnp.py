"""APPNP (Klicpera, Bojchevski & Günnemann, ICLR 2019): predict with an MLP, then propagate the
predictions by personalised PageRank (`APPNPProp`, the `APPNP` model).

    H = MLP(X),   Z⁰ = H,   Zᵏ⁺¹ = (1 − α) Â Zᵏ + α H,   logits = Zᴷ

with the GCN operator Â = D^-1/2 (A + I) D^-1/2. K power-iteration steps approximate the
personalised-PageRank fixed point Z = α (I − (1 − α) Â)⁻¹ H; unrolled, Zᴷ = Σ_{i<K} α(1 − α)ⁱ
Âⁱ H + (1 − α)ᴷ Âᴷ H. The propagation has no weights, so K can be large (the paper uses
K = 10, α = 0.1) without the oversmoothing of a K-layer GCN: the teleport term α H keeps every
node's own prediction. Â stays a `SparseTensor`; each step is one sparse-dense product on
C columns (the class count), so the propagation costs K · nnz(Â) · C.

No block form: K steps reach K hops, beyond the `layers` blocks a receptive field holds, so
the model trains on the whole graph (`nn.block.block_support` says so).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.edges import GraphCache, check_edge_index
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.nn.layers import Linear
from mgsparse.nn.module import Module, ModuleList
from mgsparse.nn.stack import StackedModel, layer_widths
from mgsparse.sparse import SparseTensor


class GCNOperator:
    """Â for a layer without weights on the edges (APPNP, SGC, GCNII): an edge list normalised
    by `normalized_adjacency` once per graph (compared by value, `GraphCache`), or an already
    normalised operand (SparseTensor, dense Tensor, anything with `@`) used as is."""

    def __init__(self, who: str, cached: bool = True):
        self.who, self._cache = who, GraphCache(cached)

    def __call__(self, adj: Any, num_nodes: int, dtype: Any) -> Any:
        if isinstance(adj, (SparseTensor, Tensor)) or (hasattr(adj, "__matmul__")
                                                       and not isinstance(adj, np.ndarray)):
            return adj
        edges = check_edge_index(adj, num_nodes, self.who)
        norm_adj = self._cache.get(edges, num_nodes)
        if norm_adj is None:
            norm_adj = self._cache.put(edges, num_nodes,
                                       normalized_adjacency(edges, num_nodes, dtype=dtype))
        return norm_adj


def check_alpha(alpha: float, who: str) -> float:
    if not 0.0 <= alpha <= 1.0:
        raise HyperparameterError(f"{who}: alpha must be in [0, 1], got {alpha}")
    return float(alpha)


def check_steps(k: int | None, who: str, default: int) -> int:
    """K, propagation steps: None is the model's own default."""
    k = default if k is None else k
    if int(k) != k or k < 0:
        raise HyperparameterError(f"{who}: k (propagation steps) must be an integer >= 0, "
                                  f"got {k}")
    return int(k)


class APPNPProp(Module):
    """K steps of personalised-PageRank propagation, Zᵏ⁺¹ = (1 − α) Â Zᵏ + α H (no weights).

    `forward(h, adj)`: `h` (N, C) dense, `adj` an edge list (normalised here and cached per
    graph) or an already-normalised Â. Differentiable with respect to h (and Â's values).
    """

    def __init__(self, k: int | None = 10, alpha: float = 0.1, cached: bool = True):
        super().__init__()
        self.k, self.alpha = check_steps(k, "APPNP", 10), check_alpha(alpha, "APPNP")
        self._norm_adj = GCNOperator("APPNP", cached)

    def forward(self, h: Tensor, adj: Any) -> Tensor:
        norm_adj = self._norm_adj(adj, h.shape[0], h.dtype)
        teleport = h * self.alpha  # (N, C), shared by every step
        z = h
        for _ in range(self.k):
            z = (norm_adj @ z) * (1.0 - self.alpha) + teleport
        return z

    def extra_repr(self) -> str:
        return f"k={self.k}, alpha={self.alpha}"


class APPNP(StackedModel):
    """An MLP of `layers` Linear layers (dropout before each, an activation between them), its
    logits propagated by `APPNPProp` (k steps, teleport probability alpha).

    The paper's Cora recipe: 2 layers, hidden 64, dropout 0.5, K = 10, α = 0.1, Adam lr 0.01,
    L2 5e-3 on the first layer's weights; 83.3 ± 0.5 % in PyG's benchmark (public split).
    `forward(x, adj)`: `adj` as for `APPNPProp`. `embed` gives what the last Linear reads.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 2,
                 dropout: float = 0.5, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 k: int | None = 10, alpha: float = 0.1):
        super().__init__(dropout, activation, rng)
        widths = layer_widths(in_features, hidden, num_classes, layers)
        self.linears = ModuleList(Linear(a, b, rng=self.rng, dtype=dtype)
                                  for a, b in itertools.pairwise(widths))  # first: decayed
        self.prop = APPNPProp(k, alpha)

    def forward(self, x: Tensor | SparseTensor, adj: Any) -> Tensor:
        h = self.stack(self.linears, x)
        return h if self._before_last else self.prop(h, adj)
