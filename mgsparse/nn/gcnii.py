"""GCNII (Chen, Wei, Huang, Ding & Li, ICML 2020): deep graph convolution with an initial
residual and an identity mapping (`GCNIILayer`, the `GCNII` model).

    H⁽ˡ⁺¹⁾ = σ( ((1 − α) Â H⁽ˡ⁾ + α H⁽⁰⁾) ((1 − βₗ) I + βₗ W⁽ˡ⁾) ),   βₗ = log(λ / l + 1)

H⁽⁰⁾ = σ(X W_in) is the input layer's output, Â = D^-1/2 (A + I) D^-1/2. The initial residual
α H⁽⁰⁾ keeps a fraction of every node's own representation at every depth (a GCN's repeated
smoothing would make all rows alike); the identity mapping shrinks each weight's part as
depth grows (βₗ → 0), so a 64-layer stack starts close to APPNP's propagation. The paper
reports 85.5 % on Cora with 64 layers, hidden 64, α = 0.1, λ = 0.5, dropout 0.6.

Cost: each layer is one op (`GCNIIStep`): a sparse product, the mixing, one (N, F) × (F, F)
product with M = (1 − β) I + β W formed at (F, F), and the relu, with α H⁽⁰⁾ formed once per
forward for all 64 layers. Â stays a `SparseTensor` (Cora: 13,264 stored values, never
densified, where dense it would be 29 MB), looked up once per forward, not once per layer.
The backward keeps, per layer, the mixed rows (N, F) and two boolean masks (the dropout's and
the relu's), not the seven intermediates the engine's ops would record: on Cora with 64
layers of 64, float32, `mgsparse train configs/cora-gcnii.yaml --epochs 4` prints a peak
traced memory of 164 MB (333 MB as composed ops). A training step is then about 115 ms of CPU
on one core, ~40 % of it the three dense products per layer (forward, and the backward's
two), ~20 % the sparse products; an epoch adds the evaluation's forward (~33 ms).

No block form: 64 layers reach the whole graph anyway (`nn.block.block_support`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mgsparse import kernels
from mgsparse.engine import Function, Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.appnp import GCNOperator, check_alpha
from mgsparse.nn.layers import Linear, glorot_
from mgsparse.nn.module import Module, ModuleList, Parameter
from mgsparse.nn.stack import StackedModel, dropout
from mgsparse.sparse import SparseTensor


class GCNIIStep(Function):
    """One GCNII layer as one op: y = ((1 − α) Â x + a₀) M, M = β W + (1 − β) I, a₀ = α x₀
    (formed once per forward, for every layer), then relu(y) if `relu`. Â is a constant
    sparse pattern and values (its CSR views cached by the structure). Composed of the
    engine's ops the layer records seven nodes and keeps five (N, F) arrays for the backward;
    this keeps one, Â x mixed, and the relu's boolean mask."""

    @staticmethod
    def forward(ctx, x, a0, weight, values, structure, alpha, beta, relu):
        one = x.dtype.type
        mixed = structure.csr().matmul(values, x, constant=True)  # Â x, a fresh (N, F) array
        mixed *= one(1.0 - alpha)
        mixed += a0
        mix = weight * one(beta)  # (F, F): β W + (1 − β) I
        mix.flat[::mix.shape[0] + 1] += one(1.0 - beta)
        y = kernels.matmul(mixed, mix)
        keep = y > 0 if relu else None
        if relu:
            np.maximum(y, 0, out=y)
        ctx.save_for_backward(mixed, mix, keep)
        ctx.structure, ctx.values, ctx.alpha, ctx.beta = structure, values, alpha, beta
        return y

    @staticmethod
    def backward(ctx, g):
        """G = g·[y > 0] (relu) or g; da₀ = G Mᵀ, dx = (1 − α) Âᵀ G Mᵀ, dW = β mixedᵀ G."""
        mixed, mix, keep = ctx.saved_tensors
        need_x, need_a0, need_w = ctx.needs_input_grad[:3]
        if keep is not None:
            g = g * keep
        d_mixed = kernels.matmul(g, mix.T)
        dx = None
        if need_x:
            dx = ctx.structure.t_matmul(ctx.values, d_mixed, constant=True)
            dx *= dx.dtype.type(1.0 - ctx.alpha)
        dw = None
        if need_w:
            dw = kernels.matmul_tn(mixed, g)
            dw *= dw.dtype.type(ctx.beta)
        return dx, d_mixed if need_a0 else None, dw, None, None, None, None, None


def fusable(norm_adj: Any, x: Tensor) -> bool:
    """Whether `GCNIIStep` serves: a SparseTensor Â whose values need no gradient, float x."""
    return (isinstance(norm_adj, SparseTensor) and isinstance(x, Tensor)
            and not norm_adj.values.requires_grad and norm_adj.dtype == x.dtype)


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
        return self.step(x, x0 * self.alpha, norm_adj)

    def step(self, x: Tensor, a0: Tensor, norm_adj: Any, relu: bool = False) -> Tensor:
        """The layer given a₀ = α x₀ (a model forms it once for all its layers) and Â, then
        relu if asked: one `GCNIIStep` for a constant sparse Â, the engine's ops otherwise
        (a dense Â, or Â's values learned)."""
        if fusable(norm_adj, x):
            return GCNIIStep.apply(x, a0, self.weight, norm_adj.values.data,
                                   norm_adj._structure, self.alpha, self.beta, relu)
        mixed = (norm_adj @ x) * (1.0 - self.alpha) + a0  # (N, F)
        y = mixed @ (self.weight * self.beta + self._identity)  # (F, F) formed once
        return y.relu() if relu else y

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
        first, relu = self.convs[0], self.act_name == "relu"
        norm_adj = first._norm_adj(adj, x0.shape[0], x0.dtype)  # normalised once, shared
        a0 = x0 * first.alpha  # the initial residual, formed once for every layer
        h = x0
        for conv in self.convs:
            h = conv.step(self._drop(h), a0, norm_adj, relu)
            h = h if relu else self.act(h)
        return h if self._before_last else self.linears[1](self._drop(h))

    def param_groups(self, weight_decay: float, conv_weight_decay: float) -> list[dict]:
        """The paper's two optimizer groups: the convolutions decayed with
        `conv_weight_decay` (0.01), the input and output Linear layers with `weight_decay`
        (5e-4)."""
        return [{"params": self.convs.parameters(), "weight_decay": conv_weight_decay},
                {"params": self.linears.parameters(), "weight_decay": weight_decay}]
