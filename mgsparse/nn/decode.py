"""Pair decoders: a score (a logit) for each node pair (u, v) from the node embeddings Z.

- `InnerProductDecoder`: s(u, v) = ⟨z_u, z_v⟩ (Kipf & Welling's GAE, PyG's default);
- `MLPDecoder`: s(u, v) = MLP(z_u ⊙ z_v), the Hadamard product keeping the score symmetric
  in u and v (OGB's link predictor).

Scoring P pairs is a gathered row-wise dot product, `pair_dot`: one op, because written with
the primitives it would gather two (P, d) copies of Z and scatter each back through a
repeated-index add. Its backward is the transpose of the gather, an SDDMM-like scatter:
dZ = M·Z + Mᵀ·Z with M the (N, N) sparse matrix holding g_k at (u_k, v_k).
Pairs are (2, P) integer arrays, row 0 the first endpoint; they are never differentiable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.engine.tensor import Function
from mgsparse.errors import ShapeError
from mgsparse.nn.module import Module
from mgsparse.nn.stack import MLP


class PairDot(Function):
    """s_k = Σ_j Z[u_k, j] · Z[v_k, j] for each pair k."""

    @staticmethod
    def forward(ctx, z, u, v):
        ctx.save_for_backward(z)
        ctx.u, ctx.v = u, v
        return np.einsum("ij,ij->i", z[u], z[v])

    @staticmethod
    def backward(ctx, g):
        """dZ = M·Z + Mᵀ·Z, M = Σ_k g_k e_{u_k} e_{v_k}ᵀ (repeated pairs add up)."""
        z, = ctx.saved_tensors
        n = z.shape[0]
        m = sp.csr_matrix((g, (ctx.u, ctx.v)), shape=(n, n))
        return np.asarray(m @ z + m.T @ z, dtype=z.dtype), None, None


def check_pairs(pairs: Any, num_nodes: int) -> np.ndarray:
    """`pairs` as a (2, P) int64 array of node ids in [0, num_nodes), or a ShapeError."""
    p = np.asarray(pairs)
    if p.ndim != 2 or p.shape[0] != 2 or (p.size and p.dtype.kind not in "iu"):
        raise ShapeError(f"pairs must be a (2, P) integer array, got {p.dtype} {p.shape}")
    p = p.astype(np.int64, copy=False)
    if p.size and (p.min() < 0 or p.max() >= num_nodes):
        raise ShapeError(f"pairs name nodes {p.min()}..{p.max()} outside the "
                         f"{num_nodes} rows of the embedding")
    return p


def pair_dot(z: Tensor, pairs: Any) -> Tensor:
    """(P,) ⟨z_u, z_v⟩ for each column (u, v) of `pairs`."""
    p = check_pairs(pairs, z.shape[0])
    return PairDot.apply(z, p[0], p[1])


class InnerProductDecoder(Module):
    """s(u, v) = ⟨z_u, z_v⟩: no parameters; σ(s) is the probability of the edge."""

    def forward(self, z: Tensor, pairs: Any) -> Tensor:
        return pair_dot(z, pairs)


class MLPDecoder(Module):
    """s(u, v) = MLP(z_u ⊙ z_v): `layers` linear layers of width `hidden`, one logit out."""

    def __init__(self, latent: int, hidden: int, layers: int = 2, dropout: float = 0.0,
                 activation: str = "relu", rng: np.random.Generator | None = None,
                 dtype: Any = np.float32):
        super().__init__()
        self.mlp = MLP(latent, hidden, 1, layers=layers, dropout=dropout,
                       activation=activation, rng=rng, dtype=dtype)

    def forward(self, z: Tensor, pairs: Any) -> Tensor:
        p = check_pairs(pairs, z.shape[0])
        return self.mlp(z[p[0]] * z[p[1]]).reshape(-1)


DECODERS = {"inner": InnerProductDecoder, "mlp": MLPDecoder}
