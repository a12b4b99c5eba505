"""The gradient path of an explanation's edge mask: σ(m) multiplies each edge's entry of Â
(after the normalisation, self loops kept at 1/d), and a 2-layer GCN reads that Â; the
gradient reaches m through the sparse product's backward to the stored values, x through
the dense one (`mgsparse.run.explain.field` builds the same operand)."""

from __future__ import annotations

import numpy as np

from mgsparse.checks.case import Case, Size, normal
from mgsparse.checks.nn import random_graph
from mgsparse.engine import Tensor, concatenate
from mgsparse.nn.gcn import GCN
from mgsparse.sparse import SparseTensor


def _masked_logits(m: Tensor, x: Tensor, edges: np.ndarray, model: GCN) -> Tensor:
    n = x.shape[0]
    src, dst = edges
    d = np.bincount(dst, minlength=n) + 1.0  # in-degree of A + I
    norm = Tensor(1.0 / np.sqrt(d[dst] * d[src]), dtype=np.float64)
    loops = np.arange(n)
    indices = np.stack([np.r_[dst, loops], np.r_[src, loops]])
    values = concatenate([norm * m.sigmoid(), Tensor(1.0 / d, dtype=np.float64)])
    return model(x, SparseTensor(indices, values, (n, n)))


def _build(rng: np.random.Generator, size: Size) -> tuple:
    (n, e), (f_in, f_out) = size.graph, size.features
    edges = random_graph(rng, n, e)
    model = GCN(f_in, 5, f_out, layers=2, dropout=0.0, rng=rng, dtype=np.float64).eval()
    return normal(rng, (edges.shape[1],)), normal(rng, (n, f_in)), edges, model


CASES: list[Case] = [Case("nn.explain_edge_mask", _build, _masked_logits)]
