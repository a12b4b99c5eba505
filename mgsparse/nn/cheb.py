"""Chebyshev spectral graph convolution (Defferrard, Bresson & Vandergheynst, NeurIPS 2016):
`ChebConv`, the scaled Laplacian it reads (`scaled_laplacian`), the `ChebNet` model.

    H' = Σ_{k<K} T_k(L̃) H Θ_k + b,   L̃ = 2 L / λ_max − I,   L = I − D^-1/2 A D^-1/2

with the Chebyshev polynomials T_0(L̃) = I, T_1(L̃) = L̃, T_k(L̃) = 2 L̃ T_{k−1}(L̃) − T_{k−2}(L̃).
A filter of K terms is a polynomial of degree K − 1 in L̃, so it reads K − 1 hops: K = 1 is a
Linear layer, K = 2 is H Θ_0 + L̃ H Θ_1 (Kipf & Welling's first-order model before their
renormalisation trick). L is the symmetric-normalised Laplacian without self loops and
λ_max = 2 (PyG's default: the bound of that Laplacian's spectrum), so that

    L̃ = L − I = −D^-1/2 A D^-1/2

with A[target, source] = 1 per edge source → target and D the in-degree, as for GCN's Â
(`nn/gcn.py`); for an undirected graph that is PyG's operator. A self loop of the input is
dropped (L has none) and an isolated node has a zero row. L̃ stays a `SparseTensor` and is
built once per graph: by the run as the model's placed operand (catalog operand "cheb_lap"),
or here from an edge list and cached (`GraphCache`), as GCN's Â is.

The products run on F_out columns, weights first. `Y_k = H Θ_k` (K products, each N × F_in by
F_in × F_out, sparse features kept sparse), then Σ T_k(L̃) Y_k by Clenshaw's recurrence

    b_K = 0,  b_{K−1} = Y_{K−1},  b_k = Y_k + 2 L̃ b_{k+1} − b_{k+2},  H' = Y_0 + L̃ b_1 − b_2

which is the same sum (each b_k is a polynomial in L̃ applied to the Y's) in K − 1 sparse
products on F_out columns. The textbook order — stack [T_0 H | … | T_{K−1} H] and take one
(N, K·F_in) × (K·F_in, F_out) product — runs its K − 1 sparse products on F_in columns and
cannot be cached across epochs (the stack's dropout redraws H every step). On Cora's first
layer (F_in 1,433, K = 3; the layer on the placed operands of configs/cora-cheb.yaml, then
`.sum().backward()`, median of 15, float32, one thread) a forward and backward takes 1.5 ms
this way against 58 ms for the stacked order at F_out 16, and 5.6 against 91 ms at F_out 64
(the stacked T_k H are dense (2708 × 1433) arrays, 15.5 MB each). Both orders are recorded
ops of the engine: the sparse product carries its own backward (dX = L̃ᵀ G), so no
hand-written backward is needed.

No block form: a layer reads K − 1 hops, two layers 2(K − 1), beyond the one-hop blocks a
receptive field or a sampled batch holds per layer; the model trains on the whole graph
(`nn.block.block_support` names ChebConv).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.edges import GraphCache, check_edge_index
from mgsparse.nn.layers import Linear
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import StackedModel, layer_widths
from mgsparse.sparse import SparseTensor, gcn_norm

CHEB_K = 2  # K when the config says null: Kipf & Welling's best Chebyshev filter on Cora


def scaled_laplacian(edge_index: np.ndarray, num_nodes: int,
                     dtype: Any = np.float32) -> SparseTensor:
    """L̃ = −D^-1/2 A D^-1/2 (= 2L/λ_max − I with λ_max = 2), A[target, source] = 1 per edge
    source → target without self loops, D the in-degree (0^-1/2 read as 0: an isolated node
    has a zero row). Same pattern as A: for Cora 10,556 stored values."""
    edges = np.asarray(edge_index, dtype=np.int64)
    edges = edges[:, edges[0] != edges[1]]
    A = SparseTensor.from_edge_index(edges, num_nodes, dtype=dtype).T
    return -gcn_norm(A, add_loops=False)


def check_terms(k: int | None, who: str) -> int:
    """K, the Chebyshev terms T_0 .. T_{K−1}: None is the default (2), else an integer >= 1."""
    k = CHEB_K if k is None else k
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise HyperparameterError(f"{who}: k (Chebyshev terms) must be an integer >= 1, got {k}")
    return int(k)


def chebyshev_sum(lap: Any, ys: list[Tensor]) -> Tensor:
    """Σ_k T_k(L̃) Y_k by Clenshaw's recurrence (the module docstring): K − 1 products by L̃."""
    if len(ys) == 1:
        return ys[0]
    b1, b2 = ys[-1], None  # b_{k+1}, b_{k+2}
    for y in reversed(ys[1:-1]):
        b = y + (lap @ b1) * 2.0
        b1, b2 = (b if b2 is None else b - b2), b1
    out = ys[0] + lap @ b1
    return out if b2 is None else out - b2


class ChebConv(Module):
    """One Chebyshev convolution of K terms, H' = Σ_{k<K} T_k(L̃) H Θ_k + b (see the module).

    `forward(x, adj)`: `x` (N, F_in) dense or a SparseTensor of features; `adj` an edge list
    (2, E) (L̃ built here, cached per graph with `cached`) or an already-scaled L̃ (SparseTensor,
    dense Tensor, anything with `@`) used as is. Θ_k is `lins[k].weight` (F_in, F_out),
    Glorot-initialised each, as PyG's `lins`; b starts at zero.
    """

    def __init__(self, in_features: int, out_features: int, k: int | None = CHEB_K,
                 bias: bool = True, cached: bool = True,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.k, self.cached = check_terms(k, "ChebConv"), cached
        self.lins = ModuleList(Linear(in_features, out_features, bias=False, rng=rng, dtype=dtype)
                               for _ in range(self.k))
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None
        self._lap = GraphCache(cached)

    def laplacian(self, adj: Any, num_nodes: int) -> Any:
        """L̃ for `adj`: an operand as it is, an edge list scaled once per graph."""
        if isinstance(adj, (SparseTensor, Tensor)) or (hasattr(adj, "__matmul__")
                                                       and not isinstance(adj, np.ndarray)):
            return adj
        edges = check_edge_index(adj, num_nodes, "ChebConv")
        lap = self._lap.get(edges, num_nodes)
        if lap is None:
            dtype = self.lins[0].weight.dtype
            lap = self._lap.put(edges, num_nodes, scaled_laplacian(edges, num_nodes, dtype))
        return lap

    def forward(self, x: Tensor | SparseTensor, adj: Any) -> Tensor:
        lap = self.laplacian(adj, x.shape[0])
        out = chebyshev_sum(lap, [lin(x) for lin in self.lins])  # (N, F_out)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, k={self.k}, cached={self.cached}"


class ChebNet(StackedModel):
    """`layers` ChebConvs of K terms with dropout before each and an activation between them.

    Defferrard et al.'s model as Kipf & Welling ran it on Cora (their Table 3: K = 2, 81.2%;
    K = 3, 79.5%) and PyG's benchmark/citation/cheb.py: 2 layers, hidden 16, dropout 0.5,
    Adam lr 0.01, weight decay 5e-4. `forward(x, adj)`: `adj` as for `ChebConv`.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 2,
                 dropout: float = 0.5, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 k: int | None = CHEB_K):
        super().__init__(dropout, activation, rng)
        self.k = check_terms(k, "ChebNet")
        widths = layer_widths(in_features, hidden, num_classes, layers)
        self.convs = ModuleList(ChebConv(a, b, self.k, rng=self.rng, dtype=dtype)
                                for a, b in itertools.pairwise(widths))

    def forward(self, x: Tensor | SparseTensor, adj: Any) -> Tensor:
        lap = self.convs[0].laplacian(adj, x.shape[0])  # scaled once, shared by the layers
        return self.stack(self.convs, x, lap)
