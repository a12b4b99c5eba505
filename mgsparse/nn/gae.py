"""Graph auto-encoders (Kipf & Welling, "Variational Graph Auto-Encoders", 2016): `GAE`, `VGAE`.

An encoder (any graph model: GCN, GraphSAGE, GAT, GIN...) maps the features and the training
graph to node embeddings Z (N, latent); a decoder (`mgsparse.nn.decode`) scores node pairs
from Z, a logit per pair. Training pushes up the scores of edges and down those of sampled
non-edges (binary cross-entropy), as PyG's `GAE.recon_loss` does.

The variational form encodes each node as a Gaussian: a shared body H = act(body(X, A)),
then two heads μ = head_μ(H, A) and log σ = head_σ(H, A) (Kipf's code: one GCN layer of
width hidden, then two GCN layers of width latent). Training samples Z = μ + σ ⊙ ε with
ε ~ N(0, I) drawn from the model's generator (the run's, so a seed fixes the run); the
loss adds the KL divergence to N(0, I) scaled by 1/N as their code does:

    KL / N = −(1 / 2N) · mean_i Σ_j (1 + 2 log σ_ij − μ_ij² − σ_ij²)

Evaluation reads Z = μ. log σ is clipped at `MAX_LOGSTD` (PyG's 10) so σ² cannot overflow.
The models take built modules, never a config: `mgsparse.run.tasks.links` builds them.

`full_reconstruction_loss` is the loss of Kipf's code: every one of the N² entries of
A_train + I scored, positives weighted up by (N² − E) / E, as one op (see its docstring);
sampled pairs (PyG's `recon_loss`) are the task's default.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.tensor import Function
from mgsparse.errors import ShapeError
from mgsparse.nn.module import Module
from mgsparse.nn.stack import get_activation

MAX_LOGSTD = 10.0


def kl_normal(mu: Tensor, logstd: Tensor) -> Tensor:
    """KL(N(μ, σ²) ‖ N(0, I)) per node, averaged over nodes:
    −½ · mean_i Σ_j (1 + 2 log σ_ij − μ_ij² − σ_ij²)."""
    terms = 1.0 + 2.0 * logstd - mu * mu - (2.0 * logstd).exp()
    return terms.sum(axis=1).mean() * -0.5


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


class FullReconstruction(Function):
    """loss = c · [Σ_ij softplus(L_ij) + Σ_(u,v)∈P (w·(softplus(l) − l) − softplus(l))],
    L = Z Zᵀ, l = L_uv: the mean over all N² entries of weighted BCE against A_train + I (the
    positives P, each once), as Kipf's code computes it, without an N² target array.

    softplus(L) = max(L, 0) + log(1 + e), e = exp(−|L|), and Σ max(L, 0) = (Σ L + Σ |L|) / 2
    with Σ L = ‖Σ_i z_i‖²: four passes over the N² entries; L and e are kept for σ(L)."""

    @staticmethod
    def forward(ctx, z, u, v, pos_weight, scale):
        logits = z @ z.T
        e = np.abs(logits)
        total_abs = np.sum(e, dtype=np.float64)
        np.exp(np.negative(e, out=e), out=e)  # e = exp(−|L|), in place
        column = z.sum(axis=0, dtype=np.float64)
        total = (column @ column + total_abs) / 2 + np.sum(np.log1p(e), dtype=np.float64)
        lp = logits[u, v].astype(np.float64)
        total += np.sum(pos_weight * (_softplus(lp) - lp) - _softplus(lp))
        ctx.save_for_backward(z, logits, e)
        ctx.u, ctx.v, ctx.pos_weight, ctx.scale = u, v, pos_weight, scale
        return np.asarray(scale * total, dtype=z.dtype)

    @staticmethod
    def backward(ctx, g):
        """dL = c·g·(σ(L) + at P: w·(σ(l) − 1) − σ(l)); dZ = dL·Z + dLᵀ·Z."""
        z, logits, e = ctx.saved_tensors
        d = np.reciprocal(1 + e)  # σ(|L|)
        np.copyto(d, e * d, where=logits < 0)  # σ(L) = e / (1 + e) where L < 0
        sig = d[ctx.u, ctx.v]
        np.add.at(d, (ctx.u, ctx.v), ctx.pos_weight * (sig - 1) - sig)
        d *= g * ctx.scale
        return d @ z + d.T @ z, None, None, None, None


def reconstruction_weights(num_nodes: int, num_edges: int) -> tuple[float, float]:
    """(pos_weight, norm) of Kipf's loss for a graph of `num_edges` directed edges, no
    self-loops: ((N² − E) / E, N² / (2 (N² − E))), their code's `pos_weight` and `norm`."""
    n2 = num_nodes * num_nodes
    if num_edges < 1 or n2 - num_edges <= num_nodes:
        raise ShapeError(f"full_reconstruction_loss: {num_edges} edges among {num_nodes} "
                         f"nodes: needs at least one edge and one pair that is not an edge")
    return (n2 - num_edges) / num_edges, n2 / (2.0 * (n2 - num_edges))


def full_reconstruction_loss(z: Tensor, edges: np.ndarray) -> Tensor:
    """Kipf & Welling's reconstruction loss: norm · mean_ij BCE_w(L_ij, Y_ij) with targets
    Y = A + I, A the graph `edges` (2, E) (the training graph both ways, each edge once; a
    self-loop in it is dropped), weighted as their code weights it, from A *without* the
    self-loops: pos_weight w = (N² − E) / E, norm = N² / (2 (N² − E)) (their `adj.sum()` is
    taken before `sp.eye` is added to the labels; on Cora's split w = 816.0, where counting
    the N self-loops would give 626.6). Costs N² per step: small graphs."""
    n = z.shape[0]
    e = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    e = e[:, e[0] != e[1]]
    pos_weight, norm = reconstruction_weights(n, e.shape[1])
    loops = np.arange(n, dtype=np.int64)
    positives = np.concatenate([e, np.stack([loops, loops])], axis=1)
    return FullReconstruction.apply(z, positives[0], positives[1], pos_weight,
                                    norm / (n * n))


class GAE(Module):
    """Z = encoder(X, A); scores = decoder(Z, pairs). `forward` is the encoder."""

    def __init__(self, encoder: Module, decoder: Module):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, x: Any, *graph: Any) -> Tensor:
        return self.encode(x, *graph)[0]

    def encode(self, x: Any, *graph: Any) -> tuple[Tensor, Tensor | None]:
        """(Z, the regulariser to add to the loss: None for a plain auto-encoder)."""
        return self.encoder(x, *graph), None

    def decode(self, z: Tensor, pairs: Any) -> Tensor:
        """(P,) logits of the pairs (2, P)."""
        return self.decoder(z, pairs)

    def embed(self, x: Any, *graph: Any) -> Tensor:
        """The node embeddings Z (μ for the variational form): what a picture projects."""
        return self(x, *graph)


class VGAE(GAE):
    """Z = μ + σ ⊙ ε while training (ε from `rng`), μ otherwise; `encode` also returns KL / N.

    `body` is a graph model giving H (N, hidden) before its activation; `mu` and `logstd`
    are graph models of one layer, hidden -> latent, reading H and the same graph operand.
    """

    def __init__(self, body: Module, mu: Module, logstd: Module, decoder: Module,
                 activation: str = "relu", rng: np.random.Generator | None = None):
        super().__init__(body, decoder)
        self.mu, self.logstd = mu, logstd
        self.act_name, self.act = activation, get_activation(activation)
        self.rng = rng if rng is not None else np.random.default_rng()

    def gaussian(self, x: Any, *graph: Any) -> tuple[Tensor, Tensor]:
        """(μ, log σ) of every node."""
        h = self.act(self.encoder(x, *graph))
        return self.mu(h, *graph), self.logstd(h, *graph).clip(None, MAX_LOGSTD)

    def encode(self, x: Any, *graph: Any) -> tuple[Tensor, Tensor | None]:
        mu, logstd = self.gaussian(x, *graph)
        if not self.training:
            return mu, None
        eps = self.rng.standard_normal(mu.shape).astype(mu.dtype)
        z = mu + logstd.exp() * Tensor(eps, dtype=mu.dtype)
        return z, kl_normal(mu, logstd) * (1.0 / mu.shape[0])

    def extra_repr(self) -> str:
        return f"activation={self.act_name}"
