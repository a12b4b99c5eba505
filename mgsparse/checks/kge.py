"""Gradient-check cases of the knowledge-graph scorers (`mgsparse.nn.kge`) and the R-GCN layer.

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
from mgsparse.nn import kge


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


CASES: list[Case] = [
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
