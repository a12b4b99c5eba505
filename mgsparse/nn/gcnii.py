"""GCNII (Chen, Wei, Huang, Ding & Li, ICML 2020): deep graph convolution with an initial
residual and an identity mapping (`GCNIILayer`, the `GCNII` model).

    H⁽ˡ⁺¹⁾ = σ( ((1 − α) Â H⁽ˡ⁾ + α H⁽⁰⁾) ((1 − βₗ) I + βₗ W⁽ˡ⁾) ),   βₗ = log(λ / l + 1)

H⁽⁰⁾ = σ(X W_in) is the input layer's output, Â = D^-1/2 (A + I) D^-1/2. The initial residual
α H⁽⁰⁾ keeps a fraction of every node's own representation at every depth (a GCN's repeated
smoothing would make all rows alike); the identity mapping shrinks each weight's part as
depth grows (βₗ → 0), so a 64-layer stack starts close to APPNP's propagation. The paper
reports 85.5 % on Cora with 64 layers, hidden 64, α = 0.1, λ = 0.5, dropout 0.6.

Memory: Â stays a `SparseTensor` (Cora: 13,264 stored values, never densified, where dense
it would be 29 MB), and the mixing matrix (1 − β) I + β W is formed once per layer at (F, F)
instead of mixing (N, F) rows twice. What remains is the (N, F) intermediates each layer keeps
for the backward (dropout, Â H, the two scaled terms, their sum, the product, the
activation): on Cora with 64 layers of 64, held memory plus one training step's traced peak
is 343.70 MB (`mgsparse train configs/cora-gcnii.yaml --memory-report --set train.epochs=3`,
float32; the budget's estimate: 311.75 MB).

No block form: 64 layers reach the whole graph anyway (`nn.block.block_support`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.appnp import GCNOperator, check_alpha
from mgsparse.nn.layers import Linear, glorot_
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import StackedModel, dropout
from mgsparse.sparse import SparseTensor


class GCNIILayer(Module):
    """One GCNII layer at depth `layer` (1-based), without its activation:
    ((1 − α) Â x + α x₀) ((1 − β) I + β W), β = log(θ / layer + 1) (θ is the paper's λ).

    `forward(x, x0, adj)`: x and x0 (N, channels); `adj` an edge list (normalised here, cached
    per graph) or an already-normalised Â. W is (channels, channels), no bias, as the paper's.
    Not one of `nn.GRAPH_LAYERS` (hence not named *Conv): it reads x₀ besides (x, edge_index)
    and has no block form.
    """

    def __init__(self, channels: int, alpha: float = 0.1, theta: float = 0.5, layer: int = 1,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        if layer < 1 or theta <= 0:
            raise HyperparameterError(f"GCNIILayer: layer must be >= 1 and theta > 0, got "
                                      f"layer={layer}, theta={theta}")
        self.channels, self.alpha = int(channels), check_alpha(alpha, "GCNII")
        self.theta, self.layer = float(theta), int(layer)
        self.beta = math.log(self.theta / self.layer + 1.0)
        self.weight = Parameter(glorot_((channels, channels), rng, dtype), dtype=dtype)
        self._norm_adj = GCNOperator("GCNIILayer")
        self._identity = (1.0 - self.beta) * np.eye(channels, dtype=dtype)

    def forward(self, x: Tensor, x0: Tensor, adj: Any) -> Tensor:
        norm_adj = self._norm_adj(adj, x.shape[0], self.weight.dtype)
        mixed = (norm_adj @ x) * (1.0 - self.alpha) + x0 * self.alpha  # (N, F)
        return mixed @ (self.weight * self.beta + self._identity)  # (F, F) formed once

    def extra_repr(self) -> str:
        return (f"{self.channels}, alpha={self.alpha}, theta={self.theta}, layer={self.layer}, "
                f"beta={self.beta:.4f}")


class GCNII(StackedModel):
    """Linear(in → hidden) and σ, `layers` GCNIILayers (σ after each), Linear(hidden → classes);
    dropout before every layer but on x₀ inside the convs, as the paper's code.

    Parameters: `convs` (the paper decays them with 0.01) and `linears` (5e-4).
    `forward(x, adj)`: `adj` as for `GCNIILayer`; `embed` gives what the output Linear reads.
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, layers: int = 64,
                 dropout: float = 0.6, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 alpha: float = 0.1, theta: float = 0.5):
        super().__init__(dropout, activation, rng)
        if min(in_features, hidden, num_classes, layers) < 1:
            raise HyperparameterError("model sizes and layer count must be positive")
        self.linears = ModuleList([Linear(in_features, hidden, rng=self.rng, dtype=dtype),
                                   Linear(hidden, num_classes, rng=self.rng, dtype=dtype)])
        self.convs = ModuleList(GCNIILayer(hidden, alpha, theta, layer, rng=self.rng, dtype=dtype)
                                for layer in range(1, layers + 1))

    def _drop(self, x: Tensor | SparseTensor) -> Tensor | SparseTensor:
        return dropout(x, self.p, self.training, self.rng, self.buffers)

    def forward(self, x: Tensor | SparseTensor, adj: Any) -> Tensor:
        x0 = self.act(self.linears[0](self._drop(x)))  # (N, hidden)
        h = x0
        for conv in self.convs:
            h = self.act(conv(self._drop(h), x0, adj))
        return h if self._before_last else self.linears[1](self._drop(h))
