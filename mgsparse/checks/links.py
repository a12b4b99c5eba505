"""Gradient-check cases of link prediction: the pair score op, and whole auto-encoders.

- `nn.pair_dot`: s_k = ⟨z_{u_k}, z_{v_k}⟩ on (n, m) embeddings and 2n + 1 pairs that repeat
  a pair and include a self pair (u = v), so the scatter's repeated and diagonal paths are
  exercised, against the scalar reference;
- `nn.gae`: a two-layer GCN encoder and the inner-product decoder on a random graph, the
  gradient of the pair scores with respect to the features and every parameter;
- `nn.vgae`: the variational form in training mode, Z = μ + σ ⊙ ε with ε drawn from a
  generator reset before every call (each finite difference sees the same ε), its scores
  plus KL / N, so the KL term's gradient is checked too;
- `nn.gae_mlp_decoder`: the encoder with the MLP decoder on z_u ⊙ z_v;
- `nn.full_reconstruction`: Kipf's loss over every entry of Z Zᵀ, the graph a symmetric pair
  (the targets it and every self-loop), against the scalar reference entry by entry.
"""

from __future__ import annotations

import numpy as np

from mgsparse.checks.case import Case, Size, each, normal
from mgsparse.checks.engine import op
from mgsparse.checks.nn import Layer, _parameters, random_graph
from mgsparse.engine import Tensor
from mgsparse.nn.decode import InnerProductDecoder, MLPDecoder, pair_dot
from mgsparse.nn.gae import GAE, VGAE, full_reconstruction_loss
from mgsparse.nn.gcn import GCN

NOISE_SEED = 11


def _pairs(rng: np.random.Generator, n: int) -> np.ndarray:
    """(2, P) pairs of n nodes: random ones, the first repeated, and a self pair."""
    p = rng.integers(0, n, size=(2, 2 * n))
    return np.concatenate([p, p[:, :1], [[n - 1], [n - 1]]], axis=1)


def _scalar_pair_dot(z: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Σ_j z[u, j] · z[v, j], pair by pair, from Values."""
    return np.array([each(lambda a, b: a * b)(z[u], z[v]).sum() for u, v in pairs.T],
                    dtype=object)


def _edges(n: int) -> np.ndarray:
    """The pair {0, 1} both ways (n ≥ 3): the graph A of the full reconstruction."""
    return np.array([[0, 1], [1, 0]], dtype=np.int64)


def _scalar_full_reconstruction(z: np.ndarray, edges: np.ndarray):
    """norm · mean_ij [w·y·softplus(−L_ij) + (1 − y)·softplus(L_ij)], from Values: targets
    y = A + I, w and norm from the E edges of A, as Kipf's code weighs them."""
    n = z.shape[0]
    edge_set = set(zip(*edges.tolist()))
    pos = edge_set | {(i, i) for i in range(n)}
    weight = (n * n - len(edge_set)) / len(edge_set)
    terms = []
    for i in range(n):
        for j in range(n):
            logit = sum((z[i, k] * z[j, k] for k in range(z.shape[1])), 0.0)
            if (i, j) in pos:
                terms.append(weight * (1 + (-logit).exp()).log())
            else:
                terms.append((1 + logit.exp()).log())
    norm = n * n / (2.0 * (n * n - len(edge_set)))
    return sum(terms[1:], terms[0]) * (norm / (n * n))


def _model(kind: str):
    """`make(rng, F_in, F_out, edges)` for `layer`'s protocol: a GAE or VGAE, latent F_out."""
    def make(rng, f_in, f_out, edges):
        def gcn(a, b, layers):
            return GCN(a, 5, b, layers=layers, dropout=0.0, rng=rng, dtype=np.float64)
        if kind == "vgae":
            return VGAE(gcn(f_in, 5, 1), gcn(5, f_out, 1), gcn(5, f_out, 1),
                        InnerProductDecoder(), rng=np.random.default_rng(NOISE_SEED)).train()
        decoder = (MLPDecoder(f_out, 4, rng=rng, dtype=np.float64) if kind == "mlp"
                   else InnerProductDecoder())
        return GAE(gcn(f_in, f_out, 2), decoder).eval()
    return make


def _scores(model, x: Tensor, edges: np.ndarray, pairs: np.ndarray) -> Tensor:
    """The pair scores (+ KL / N, broadcast, for a VGAE in training)."""
    if isinstance(model, VGAE):
        model.rng = np.random.default_rng(NOISE_SEED)  # the same ε at every call
    z, regulariser = model.encode(x, edges)
    s = model.decode(z, pairs)
    return s if regulariser is None else s + regulariser


def autoencoder(name: str, kind: str) -> Case:
    """A whole auto-encoder as a layer case: inputs (x, *parameters, Layer)."""
    def build(rng: np.random.Generator, size: Size) -> tuple:
        (n, e), (f_in, f_out) = size.graph, size.features
        edges = random_graph(rng, n, e)
        pairs = _pairs(rng, n)
        module = _model(kind)(rng, f_in, f_out, edges)
        bound = Layer(module, lambda m, x: _scores(m, x, edges, pairs), None, edges.shape[1])
        return (normal(rng, (n, f_in)), *_parameters(rng, module), bound)
    return Case(f"nn.{name}", build, lambda *a: a[-1](*a[:-1]))


CASES: list[Case] = [
    op("pair_dot", lambda r, n, m: (normal(r, (max(n, 1), m)), _pairs(r, max(n, 1))),
       pair_dot, _scalar_pair_dot, group="nn"),
    autoencoder("gae", "gae"),
    autoencoder("vgae", "vgae"),
    autoencoder("gae_mlp_decoder", "mlp"),
    op("full_reconstruction", lambda r, n, m: (normal(r, (max(n, 3), m)), _edges(max(n, 3))),
       full_reconstruction_loss, _scalar_full_reconstruction, group="nn"),
]
