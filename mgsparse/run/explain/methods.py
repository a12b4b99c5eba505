"""Three ways to say which edges and feature columns a node's prediction used.

Each scores the computation edges (E_c,) and the feature columns (F,) of one node's
computation subgraph (`field.Computation`) for the class c the model predicts there, through
the model's own log-probability  out = log softmax(Z[v])_c:

- **saliency**: |∂ out / ∂ Â_e| at the trained weights, the gradient w.r.t. Â's stored value
  on each computation edge (the sparse product's backward to the values), and
  Σ_i |∂ out / ∂ X_ij| per feature column j;
- **integrated gradients** (Sundararajan et al., 2017): along the path from an all-zero edge
  and feature mask to all-ones, IG = ∫₀¹ ∂ out(α·1) / ∂ m dα, a midpoint Riemann sum of
  `steps` terms, scored |IG| per edge and per column;
- **GNNExplainer** (Ying et al., 2019): masks σ(m) over the edges and σ(f) over the columns,
  trained with Adam to keep the prediction while staying small and decided:

      L = −log p_c(σ(m), σ(f)) + a·Σ σ(m) + b·mean H(σ(m)) + c·mean σ(f) + d·mean H(σ(f))

  with H the binary entropy and PyG's defaults a = 0.005 (edge_size), b = 1 (edge_ent),
  c = 1 (node_feat_size), d = 0.1 (node_feat_ent); m ~ N(0, 2/N), f ~ N(0, 0.01); 100
  epochs at lr 0.01. As PyG, the first step finds which entries get a gradient at all (the
  others score 0 and pay no penalty).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.optim import Adam
from mgsparse.run.explain.field import Computation

METHODS = ("saliency", "ig", "gnnexplainer")
ENTROPY_CLIP = 1e-6  # σ(m) kept inside [ε, 1 − ε]: log 0 would make H NaN in float32


@dataclass(frozen=True)
class Options:
    """Every method's settings (PyG's GNNExplainer defaults); checked by `check`."""

    steps: int = 50  # integrated gradients: Riemann terms
    epochs: int = 100  # GNNExplainer: Adam steps
    lr: float = 0.01
    edge_size: float = 0.005
    edge_ent: float = 1.0
    node_feat_size: float = 1.0
    node_feat_ent: float = 0.1
    seed: int = 0  # GNNExplainer's initial masks
    # GNNExplainer: learn the feature mask too (False: edges only, features kept whole; the
    # planted-answer sets' constant features carry nothing a mask could find)
    feature_mask: bool = True
    symmetric: bool = False  # GNNExplainer: one mask entry per undirected edge (the paper's)

    def check(self) -> Options:
        for name in ("steps", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "edge_size", "edge_ent", "node_feat_size", "node_feat_ent"):
            value = getattr(self, name)
            if not value > 0 or not np.isfinite(value):
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {value}")
        return self


@contextlib.contextmanager
def frozen(model: Any) -> Iterator[None]:
    """The model's parameters need no gradient while it is explained (only the masks do):
    their flags are restored afterwards, whatever happens."""
    params = model.parameters()
    flags = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad = False
        yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad = flag


def log_prob(model: Any, comp: Computation, cls: int, edge_mask: Any = None,
             feature_mask: Any = None, edge_values: Tensor | None = None,
             x: Tensor | None = None) -> Tensor:
    """log softmax(Z[center])_cls on the (masked) subgraph: the center is row 0."""
    x = comp.features(feature_mask) if x is None else x
    logits = model(x, comp.operand(edge_mask, edge_values))
    return logits[0].log_softmax(axis=-1)[cls]


def predict(model: Any, comp: Computation, edge_mask: Any = None) -> int:
    """The class predicted at the center, the computation edges weighted by `edge_mask`."""
    with no_grad():
        return int(np.argmax(model(comp.features(), comp.operand(edge_mask))[0].data))


def saliency(model: Any, comp: Computation, cls: int,
             options: Options) -> tuple[np.ndarray, np.ndarray]:
    values = Tensor(comp.edge_values, requires_grad=True)
    x = Tensor(comp.x, requires_grad=True)
    log_prob(model, comp, cls, edge_values=values, x=x).backward()
    edge = np.zeros(comp.num_edges) if values.grad is None else np.abs(values.grad)
    feat = np.zeros(comp.num_features) if x.grad is None else np.abs(x.grad).sum(axis=0)
    return edge.astype(np.float64), feat.astype(np.float64)


def integrated_gradients(model: Any, comp: Computation, cls: int,
                         options: Options) -> tuple[np.ndarray, np.ndarray]:
    edge, feat = np.zeros(comp.num_edges), np.zeros(comp.num_features)
    dtype = comp.x.dtype
    for k in range(options.steps):
        alpha = (k + 0.5) / options.steps  # the midpoint of the k-th interval
        m = Tensor(np.full(comp.num_edges, alpha, dtype), requires_grad=True)
        f = Tensor(np.full((1, comp.num_features), alpha, dtype), requires_grad=True)
        log_prob(model, comp, cls, m, f).backward()
        edge += 0.0 if m.grad is None else m.grad
        feat += 0.0 if f.grad is None else f.grad[0]
    return np.abs(edge / options.steps), np.abs(feat / options.steps)


def entropy(s: np.ndarray) -> np.ndarray:
    """The binary entropy H(s) = −s log s − (1 − s) log(1 − s), s clipped into (0, 1)."""
    s = np.clip(s, ENTROPY_CLIP, 1 - ENTROPY_CLIP)
    return -(s * np.log(s) + (1 - s) * np.log1p(-s))


def penalty(logits: np.ndarray, hard: np.ndarray, size: float, ent: float,
            reduce: str) -> tuple[float, np.ndarray]:
    """(P, dP/dlogits) of  P = size·R(σ) + ent·mean H(σ)  over the `hard` entries (R: sum or
    mean), in closed form: with s = σ(z), ds/dz = s(1 − s) and dH/ds = log((1 − s)/s). A
    function of the mask alone, so computed beside the graph, not through it (a third of a
    step's time in ops otherwise); tests hold it to the engine's gradient of the same P."""
    z = np.asarray(logits, np.float64).ravel()
    count = max(int(hard.sum()), 1)
    s = 1.0 / (1.0 + np.exp(-z))
    clipped = np.clip(s, ENTROPY_CLIP, 1 - ENTROPY_CLIP)
    scale = 1.0 if reduce == "sum" else 1.0 / count
    value = size * scale * s[hard].sum() + ent * entropy(s[hard]).sum() / count
    inside = (s > ENTROPY_CLIP) & (s < 1 - ENTROPY_CLIP)  # the clip's gradient is 0 outside
    dH = np.where(inside, np.log((1 - clipped) / clipped), 0.0)
    grad = (size * scale + ent * dH / count) * s * (1 - s)
    return float(value), np.where(hard, grad, 0.0).reshape(np.shape(logits))


def gnnexplainer(model: Any, comp: Computation, cls: int, options: Options,
                 num_nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """σ(m), σ(f) after `options.epochs` Adam steps (see the module); `num_nodes` (the whole
    graph's, as PyG) sets the spread of the initial edge mask."""
    rng = np.random.default_rng(options.seed)
    dtype, n = comp.x.dtype, num_nodes or comp.nodes.size
    std = np.sqrt(2.0) * np.sqrt(2.0 / (2 * n))  # PyG: gain('relu') · √(2 / 2N)
    m = Tensor(rng.normal(0.0, std, comp.num_edges).astype(dtype), requires_grad=True)
    f = Tensor(rng.normal(0.0, 0.1, (1, comp.num_features)).astype(dtype), requires_grad=True)
    optimizer = Adam([m, f], lr=options.lr)
    partner = comp.reverse()
    hard_e = hard_f = None
    for _ in range(options.epochs):
        optimizer.zero_grad()
        features = f.sigmoid() if options.feature_mask else None
        edges = m.sigmoid()
        if options.symmetric:  # j → i and i → j share one entry: the mean of theirs
            edges = (edges + edges[partner]) * 0.5
        (-log_prob(model, comp, cls, edges, features)).backward()
        grad_m = np.zeros(m.shape, dtype) if m.grad is None else m.grad
        grad_f = np.zeros(f.shape, dtype) if f.grad is None else f.grad
        if hard_e is None:  # PyG: the entries that get a gradient at all (its first step
            hard_e, hard_f = grad_m != 0, grad_f[0] != 0  # pays no penalty)
        else:
            grad_m = grad_m + penalty(m.data, hard_e, options.edge_size, options.edge_ent,
                                      "sum")[1].astype(dtype)
            grad_f = grad_f + penalty(f.data, hard_f, options.node_feat_size,
                                      options.node_feat_ent, "mean")[1].astype(dtype)
        m.grad, f.grad = grad_m, grad_f  # our own leaves: the step reads these
        optimizer.step()
    edge = np.where(hard_e, 1.0 / (1.0 + np.exp(-m.data.astype(np.float64))), 0.0)
    if options.symmetric:
        edge = (edge + edge[partner]) / 2
    feat = np.where(hard_f, 1.0 / (1.0 + np.exp(-f.data[0].astype(np.float64))), 0.0)
    return edge, feat if options.feature_mask else np.zeros(comp.num_features)


def scores(method: str, model: Any, comp: Computation, cls: int, options: Options,
           num_nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(edge scores (E_c,), feature scores (F,)), each >= 0, higher = more used."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    with frozen(model):
        if method == "saliency":
            return saliency(model, comp, cls, options)
        if method == "ig":
            return integrated_gradients(model, comp, cls, options)
        return gnnexplainer(model, comp, cls, options, num_nodes)
