"""SGC, simplifying graph convolution (Wu et al., ICML 2019): a K-layer GCN with its
non-linearities removed collapses to one linear model on propagated features.

    logits = Âᴷ X W + b,   Â = D^-1/2 (A + I) D^-1/2

Âᴷ X has no parameters, so it is computed once (`sgc_features`) and cached by the layer: every
epoch is then one (N, F) × (F, C) product, logistic regression on smoothed features. Wu et al.
report 81.0 % on Cora with K = 2.

The cache is per model; a full-batch task (run/tasks/nodes.py) computes Âᴷ X with the
first model of a series and hands it to the others (`set_propagated`): one propagation for
`--runs 10`. A cached product is kept with the operands it came from (the same features
object and the same Â object, or an edge list equal by value) and never used for others.
With features that require a gradient, the propagation is recorded instead (nothing
cached), so gradients reach X too.

No block form: the product reads K hops of the whole graph (`nn.block.block_support`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor, is_grad_enabled
from mgsparse.nn.appnp import GCNOperator, check_steps
from mgsparse.nn.layers import Linear
from mgsparse.nn.module import ModuleList
from mgsparse.nn.stack import StackedModel
from mgsparse.sparse import SparseTensor, as_operand

DENSE_ABOVE = 0.1  # propagated features denser than this are kept as a dense array


def sgc_features(x: Tensor | SparseTensor, norm_adj: Any, k: int) -> Tensor | SparseTensor:
    """Âᴷ X. Constant inputs give a constant: sparse × sparse products in scipy while the
    result stays sparse (kept sparse if its density is at most 0.1), dense products after.
    An input that requires a gradient is propagated with recorded ops (differentiable)."""
    needs_grad = is_grad_enabled() and (getattr(x, "requires_grad", False)
                                        or getattr(norm_adj, "requires_grad", False))
    if needs_grad:
        for _ in range(k):
            x = norm_adj @ x
        return x
    z = x.to_scipy() if isinstance(x, SparseTensor) else np.asarray(x.data)
    a = norm_adj.to_scipy() if isinstance(norm_adj, SparseTensor) else np.asarray(norm_adj.data)
    for _ in range(k):
        z = a @ z
    return as_operand(z, DENSE_ABOVE, dtype=x.dtype)


class SGC(StackedModel):
    """Âᴷ X (computed once per model, see the module) then one Linear layer, dropout on its
    input. `forward(x, adj)`: `adj` an edge list or an already-normalised Â.

    Reads `k`, `dropout`; `hidden`, `layers` and `activation` are accepted so every model is
    built alike, and unused: SGC has one layer and no activation.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 1,
                 dropout: float = 0.0, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 k: int | None = 2):
        super().__init__(dropout, activation, rng)
        self.k = check_steps(k, "SGC", 2)
        self.linears = ModuleList([Linear(in_features, num_classes, rng=self.rng, dtype=dtype)])
        self._norm_adj = GCNOperator("SGC")
        self._cache: tuple | None = None  # (x, x's version, Â, Âᴷ x)

    def propagated(self, x: Tensor | SparseTensor, adj: Any) -> Tensor | SparseTensor:
        """Âᴷ x, from the cache when x and Â are the operands it was computed from."""
        norm_adj = self._norm_adj(adj, x.shape[0], x.dtype)
        version = getattr(x, "_version", 0)  # a sanctioned in-place write misses
        hit = self._cache
        if hit is not None and hit[0] is x and hit[1] == version and hit[2] is norm_adj:
            return hit[3]
        out = sgc_features(x, norm_adj, self.k)
        if not (getattr(x, "requires_grad", False) or getattr(norm_adj, "requires_grad", False)):
            self._cache = (x, version, norm_adj, out)  # constants only are cached
        return out

    def set_propagated(self, x: Tensor | SparseTensor, adj: Any,
                       value: Tensor | SparseTensor) -> None:
        """Take `value` as Âᴷ x for these operands: a run layer that keeps one product for
        every run of a series (`sgc_features(x, Â, k)`) hands it to each new model."""
        norm_adj = self._norm_adj(adj, x.shape[0], x.dtype)
        self._cache = (x, getattr(x, "_version", 0), norm_adj, value)

    def forward(self, x: Tensor | SparseTensor, adj: Any) -> Tensor:
        return self.stack(self.linears, self.propagated(x, adj))

    def extra_repr(self) -> str:
        return f"k={self.k}, " + super().extra_repr()
