"""The model stack every architecture shares: dropout before each layer, an activation between
them (`StackedModel`), the edge-list-bound variant (`EdgeListModel`), and the plain `MLP`.

An architecture module (`gcn.py`, `gat.py`, `sage.py`) defines its layer and a model that builds
`self.convs` and calls `stack`; models take plain arguments, never a config object.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.buffers import Buffers
from mgsparse.errors import HyperparameterError
from mgsparse.nn.keyed_dropout import keyed_dropout, stream_key
from mgsparse.nn.layers import Linear
from mgsparse.nn.module import Module, ModuleList
from mgsparse.sparse import SparseTensor, sparse_dropout

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": lambda x: x.relu(),
    "elu": lambda x: x.elu(),
    "tanh": lambda x: x.tanh(),
    "leaky_relu": lambda x: x.leaky_relu(0.2),
}


def get_activation(name: str) -> Callable[[Tensor], Tensor]:
    if name not in ACTIVATIONS:
        raise HyperparameterError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def dropout(x: Tensor | SparseTensor, p: float, training: bool, rng: np.random.Generator,
            buffers: Buffers | None = None):
    """Dropout that keeps sparse features sparse (it drops stored values only); a dense
    input's output is written into a buffer reused from epoch to epoch. A sparse operand that
    fell back from dense mid-training draws the dense mask (`SparseTensor.dense_stream`)."""
    if isinstance(x, SparseTensor):
        return sparse_dropout(x, p, training, rng, x.dense_stream)
    return x.dropout(p, training, rng, buffers)


def layer_widths(in_features: int, hidden: int, out_features: int, layers: int) -> list[int]:
    """[in, hidden, ..., hidden, out]: the input and output width of each of `layers` layers."""
    if min(in_features, hidden, out_features, layers) < 1:
        raise HyperparameterError("model sizes and layer count must be positive")
    return [in_features] + [hidden] * (layers - 1) + [out_features]


class StackedModel(Module):
    """The shape every model here shares: dropout before each layer, an activation between them.

    Subclasses build their layers and call `stack(layers, x, *args)` in `forward`; each layer
    is called as `layer(dropout(x), *args)`.

    Dropout masks are drawn from `rng` in order, the cheapest way. With `keyed_masks=True`
    they are keyed instead (`keyed_dropout`): entry (node, feature) of layer i in the t-th
    training forward is kept or dropped by a hash of (key, t, i, node_ids[node], feature), so
    a graph split over ranks — each rank's model given its rows' global `node_ids` — draws
    the same masks as one process. The key is drawn from `rng` at the first training forward
    (after the initialisation, which is therefore unchanged). Hashing costs several times
    what drawing random bytes does, hence not the default.
    """

    def __init__(self, dropout: float, activation: str, rng: np.random.Generator | None,
                 keyed_masks: bool = False):
        super().__init__()
        self.rng = rng if rng is not None else np.random.default_rng()
        self.p, self.act_name = float(dropout), activation
        self.act = get_activation(activation)
        self.keyed_masks, self.node_ids = keyed_masks, None  # node_ids: x's global row ids
        self.dropout_key: int | None = None
        self.dropout_step = 0  # training forwards so far
        self._before_last = False
        self.buffers = Buffers()  # dropout outputs, reused once the last step let go of them

    def embed(self, *args: Any, **kwargs: Any) -> Tensor:
        """What the last layer reads: the model's learned representation of each input
        (N, hidden), the one a picture of the embedding projects. Same arguments as forward."""
        self._before_last = True
        try:
            return self(*args, **kwargs)
        finally:
            self._before_last = False

    def stack(self, layers: ModuleList, x: Tensor | SparseTensor, *args: Any) -> Tensor:
        last = len(layers) - 1
        drawing = self.training and self.p > 0
        if drawing and self.keyed_masks and self.dropout_key is None:
            self.dropout_key = int(self.rng.integers(2**63))
        step, self.dropout_step = self.dropout_step, self.dropout_step + drawing
        for i, layer in enumerate(layers):
            if i == last and self._before_last:
                return x
            x = layer(self._dropout(x, step, i), *args)
            if i < last:
                x = self.act(x)
        return x

    def _dropout(self, x: Tensor | SparseTensor, step: int,
                 layer: int) -> Tensor | SparseTensor:
        if not self.keyed_masks:
            return dropout(x, self.p, self.training, self.rng, self.buffers)
        key = stream_key(self.dropout_key or 0, step, layer)
        return keyed_dropout(x, self.p, self.training, key, self.node_ids)

    def extra_repr(self) -> str:
        return f"dropout={self.p}, activation={self.act_name}"


class EdgeListModel(StackedModel):
    """A stacked model whose layers read the edge list itself (GAT, GraphSAGE).

    Built with an `edge_index`, the model is bound to that graph (transductive training) and
    the `adj` argument of `forward` is ignored, so the trainer calls every model alike;
    otherwise `adj` must be the edge_index.
    """

    def __init__(self, dropout: float, activation: str, rng: np.random.Generator | None,
                 edge_index: np.ndarray | None):
        super().__init__(dropout, activation, rng)
        self.edge_index = None if edge_index is None else np.asarray(edge_index)

    def forward(self, x: Tensor | SparseTensor, adj: Any = None) -> Tensor:
        edge_index = self.edge_index if self.edge_index is not None else adj
        return self.stack(self.convs, x, edge_index)

    def extra_repr(self) -> str:
        bound = "" if self.edge_index is None else f", edges={self.edge_index.shape[1]}"
        return super().extra_repr() + bound


class MLP(StackedModel):
    """Linear layers with an activation between them; returns logits (no output activation)."""

    def __init__(self, in_features: int, hidden: int, out_features: int, layers: int = 2,
                 dropout: float = 0.0, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__(dropout, activation, rng)
        widths = layer_widths(in_features, hidden, out_features, layers)
        self.linears = ModuleList(Linear(a, b, rng=self.rng, dtype=dtype)
                                  for a, b in itertools.pairwise(widths))

    def forward(self, x: Tensor | SparseTensor, *_: Any) -> Tensor:
        return self.stack(self.linears, x)
