"""Gradient-check cases of the knowledge-graph scorers (`mgsparse.nn.kge`) and the R-GCN layer
(`mgsparse.nn.rgcn`: with bases and without, on a random typed graph with repeated edges,
against a dense reference written relation by relation, D_r⁻¹·A_r·X·W_r summed, + X·W_0 + b).

Each scorer is checked twice: against every entity, E (N, D) shared by the batch (1-N
scoring), and against each query's own candidates, T (B, K, D) (sampled negatives). The
dense size (n, m) of a `Size` gives n queries, m columns (complex scorers: m complex numbers,
2m reals) and n + 2 entities, so a shared E has rows no query reads. `kge_lookup` reads a
repeated row (its gradients must add); `n3` and `weighted_softplus` are the regulariser and
the negative-sampling loss. TransE runs both norms: p = 2 through the one-product fast path
(shared E) and through the difference (per query), p = 1 through the difference.
"""

from __future__ import annotations

import numpy as np

from mgsparse.checks.case import Case, normal
from mgsparse.checks.nn import Layer, _parameters
from mgsparse.engine import Tensor
from mgsparse.nn import kge
from mgsparse.nn.rgcn import RGCNConv, relation_operand

NUM_RELATIONS = 3


def _scorer_case(name: str, fn, complex_: bool, per_query: bool, **kw) -> Case:
    def build(rng: np.random.Generator, size) -> tuple:
        n, m = size.dense
        width = 2 * m if complex_ else m
        rel = m if name == "rotate" else width  # RotatE: one phase per complex entry
        h, r = normal(rng, (n, width)), normal(rng, (n, rel))
        cands = normal(rng, (n, 3, width)) if per_query else normal(rng, (n + 2, width))
        return (h, r, cands)
    suffix = "_sampled" if per_query else ""
    return Case(f"nn.{name}{kw.get('tag', '')}{suffix}", build, fn)


def _lookup(rng: np.random.Generator, size) -> tuple:
    n, m = size.dense
    idx = np.r_[np.arange(n), 0][: n + 1] if n else np.zeros(0, np.int64)
    return (normal(rng, (max(n, 1), m)), idx.astype(np.int64))


def _n3(complex_: bool):
    def build(rng: np.random.Generator, size) -> tuple:
        n, m = size.dense
        return (normal(rng, (n, 2 * m if complex_ else m), kinks=(0.0,)),)
    return build


def _softplus(rng: np.random.Generator, size) -> tuple:
    n, m = size.dense
    return (normal(rng, (n, m)), np.abs(rng.standard_normal((n, m))))


def dense_rgcn(layer: RGCNConv, x: Tensor, edges: np.ndarray, types: np.ndarray) -> Tensor:
    """The R-GCN layer relation by relation: Σ_r (D_r⁻¹ A_r)·X·W_r + X·W_0 + b, A_r[i, j] the
    number of edges j → i of relation r and D_r its row sums (a row of zeros stays zero)."""
    n = x.shape[0]
    w = layer.relation_weights()
    out = x @ layer.root
    for r in range(layer.num_relations):
        a = np.zeros((n, n))
        np.add.at(a, (edges[1][types == r], edges[0][types == r]), 1.0)
        deg = a.sum(1, keepdims=True)
        out = out + Tensor(a / np.where(deg > 0, deg, 1.0)) @ (x @ w[r])
    return out + layer.bias


def rgcn_case(name: str, bases: int | None) -> Case:
    def build(rng: np.random.Generator, size) -> tuple:
        (n, e), (f_in, f_out) = size.graph, size.features
        edges = rng.integers(0, n, (2, e)) if n else np.zeros((2, 0), np.int64)
        edges = np.concatenate([edges, edges[:, :1]], axis=1) if e else edges  # a repeat
        types = rng.integers(0, NUM_RELATIONS, edges.shape[1])
        layer = RGCNConv(f_in, f_out, NUM_RELATIONS, bases, rng=rng, dtype=np.float64)
        m = relation_operand(edges, types, n, NUM_RELATIONS, np.float64)
        bound = Layer(layer, lambda mod, x: mod(x, m),
                      lambda mod, x: dense_rgcn(mod, x, edges, types), edges.shape[1])
        return (normal(rng, (n, f_in)), *_parameters(rng, layer), bound)
    return Case(f"nn.{name}", build, lambda *a: a[-1](*a[:-1]),
                dense=lambda *a: a[-1].dense(*a[:-1]))


CASES: list[Case] = [
    rgcn_case("rgcn_bases", 2),
    rgcn_case("rgcn", None),
    Case("nn.kge_lookup", _lookup, lambda w, idx: kge.Lookup.apply(w, idx)),
    *(_scorer_case("distmult", kge.DistMult.apply, False, pq) for pq in (False, True)),
    *(_scorer_case("complex", kge.ComplEx.apply, True, pq) for pq in (False, True)),
    *(_scorer_case("transe", lambda h, r, e: kge.TransE.apply(h, r, e, 2), False, pq,
                   tag="_l2") for pq in (False, True)),
    _scorer_case("transe", lambda h, r, e: kge.TransE.apply(h, r, e, 1), False, False,
                 tag="_l1"),
    *(_scorer_case("rotate", kge.RotatE.apply, True, pq) for pq in (False, True)),
    Case("nn.n3", _n3(False), lambda x: kge.N3.apply(x, False)),
    Case("nn.n3_complex", _n3(True), lambda x: kge.N3.apply(x, True)),
    Case("nn.weighted_softplus", _softplus, lambda x, w: kge.WeightedSoftplus.apply(x, w)),
]
