"""The model stack every architecture shares: dropout before each layer, an activation between
them (`StackedModel`), the edge-list-bound variant (`EdgeListModel`), and the plain `MLP`.

An architecture module (`gcn.py`, `gat.py`, `sage.py`) defines its layer and a model that builds
`self.convs` and calls `stack`; models take plain arguments, never a config object.

Three options of the stack (`StackedModel.stack_options`, after the layers are built), each
making deeper stacks trainable:

- `norm` ("batch" | "layer"): BatchNorm1d or LayerNorm on every hidden layer's output, before
  its activation (a stack of layers whose scale drifts from layer to layer trains slowly);
- `residual`: h ← σ(N(layer(h))) + h where the layer keeps the width (He et al. 2016; Li et al.
  2019 for GCNs), so a deep stack starts near the identity;
- `jk` ("cat" | "max" | "sum"): jumping knowledge (Xu et al., ICML 2018). Every layer outputs
  hidden features, and a final Linear reads their concatenation, element-wise maximum or sum,
  so each node picks its own depth of neighbourhood. As in PyG's `BasicGNN`, each layer's
  output is dropped out once (the last one's too), and the next layer and the jump read that
  same dropped tensor; no dropout sits between the jump and its Linear.

On a block (a receptive field, a sampled batch: `nn/block.py`) a layer returns the first T of
its S input rows, the targets, so the residual and the layers kept for jk read those rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from mgsparse.engine import Tensor, concatenate
from mgsparse.engine import stack as stack_tensors
from mgsparse.errors import HyperparameterError
from mgsparse.kernels import Buffers
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
NORMS = ("batch", "layer")
JUMPING_KNOWLEDGE = ("cat", "max", "sum")


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


def stack_widths(in_features: int, hidden: int, out_features: int, layers: int,
                 jk: str | None = None) -> list[int]:
    """`layer_widths`, the last layer hidden too when jumping knowledge adds a Linear after."""
    last = out_features if jk in (None, "none") else hidden
    return layer_widths(in_features, hidden, last, layers)


def make_norm(kind: str, width: int, dtype: Any) -> Module:
    """BatchNorm1d ("batch") or LayerNorm ("layer") over `width` features."""
    from mgsparse.nn.norm import BatchNorm1d, LayerNorm  # norm imports module, not stack

    return BatchNorm1d(width, dtype=dtype) if kind == "batch" else LayerNorm(width, dtype=dtype)


def check_stack_options(jk: str | None, norm: str | None) -> tuple[str | None, str | None]:
    """jk and norm with "none" read as None, or a one-line error naming the known values."""
    jk, norm = (None if v in (None, "none") else v for v in (jk, norm))
    if jk is not None and jk not in JUMPING_KNOWLEDGE:
        raise HyperparameterError(f"unknown jumping knowledge {jk!r}; known: "
                                  f"{', '.join(JUMPING_KNOWLEDGE)}")
    if norm is not None and norm not in NORMS:
        raise HyperparameterError(f"unknown norm {norm!r}; known: {', '.join(NORMS)}")
    return jk, norm


def _rows(x: Tensor, n: int) -> Tensor:
    """The first n rows of x: the targets of a block (all of x on the whole graph)."""
    return x if x.shape[0] == n else x[:n]


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
        # training forwards so far, counted for keyed masks (their only reader): a step
        # otherwise changes no attribute, so it may run from a tape (`run.replay`)
        self.dropout_step = 0
        self._before_last = False
        self.buffers = Buffers()  # dropout outputs, reused once the last step let go of them

    # the stack options; set by stack_options after the layers, so they are registered after
    # them (the first layer's parameters stay the first child's: its weight decay reads them)
    residual: bool = False
    jk: str | None = None
    norms: ModuleList | None = None
    jk_linear: Linear | None = None

    def stack_options(self, out_widths: list[int], num_classes: int, residual: bool = False,
                      jk: str | None = None, norm: str | None = None,
                      dtype: Any = np.float32) -> None:
        """Add the norms, residuals and jumping knowledge (see the module) to a stack whose
        layers output `out_widths` features: with `jk` every layer is a hidden one (the model
        built its last layer to hidden width too) and a Linear maps to `num_classes`."""
        jk, norm = check_stack_options(jk, norm)
        hidden = out_widths if jk else out_widths[:-1]
        if jk in ("max", "sum") and len(set(out_widths)) > 1:
            raise HyperparameterError(f"jk {jk!r} needs equal layer widths, got {out_widths}")
        self.residual, self.jk = bool(residual), jk
        if norm is not None:
            self.norms = ModuleList(make_norm(norm, w, dtype) for w in hidden)
        if jk is not None:
            width = sum(out_widths) if jk == "cat" else out_widths[-1]
            self.jk_linear = Linear(width, num_classes, rng=self.rng, dtype=dtype)

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
        step = self.dropout_step
        self.dropout_step += drawing and self.keyed_masks
        fuse = drawing and self._relu_feeds_dropout()
        outputs = []  # every layer's, for jumping knowledge
        dropped = False  # x is the last layer's relu_dropout output: dropped out already
        for i, layer in enumerate(layers):
            if i == last and self._before_last and self.jk is None:
                return x
            if dropped:
                y = layer(x, *args)
            elif drawing and self._layer_drops(layer, x):  # its dropout fused with its product
                y = layer(x, *args, dropout=(self.p, self.rng, self.buffers))
            else:
                y = layer(self._dropout(x, step, i), *args)
            dropped = fuse and i < last and isinstance(y, Tensor)
            if dropped:  # the activation and the next layer's dropout as one op, same bits
                y = y.relu_dropout(self.p, True, self.rng, self.buffers)
            elif i < last or self.jk is not None:
                y = self._hidden(i, y, x)
                if self.jk is not None:  # PyG's BasicGNN: each layer's output dropped out,
                    y = self._dropout(y, step, i + 1)  # what the next layer and jk read
                    dropped = True
                    outputs.append(y)
            x = y
        if self.jk is None:
            return x
        h = self._jump([_rows(o, x.shape[0]) for o in outputs])
        return h if self._before_last else self.jk_linear(h)

    def _layer_drops(self, layer: Any, x: Tensor | SparseTensor) -> bool:
        """Whether `layer` takes the dropout of its dense input itself (`fuses_input_dropout`:
        GCNConv, which may fuse it with x·W), masks drawn from `rng` as here."""
        return (getattr(layer, "fuses_input_dropout", False) and not self.keyed_masks
                and isinstance(x, Tensor))

    def _relu_feeds_dropout(self) -> bool:
        """Whether a hidden layer's ReLU output is read by the next layer's dropout only (no
        norm, residual or jumping knowledge reads it, masks drawn from `rng`), so that the two
        may run as one op (`Tensor.relu_dropout`)."""
        return (self.act_name == "relu" and self.norms is None and not self.residual
                and self.jk is None and not self.keyed_masks and not self._before_last)

    def _hidden(self, i: int, y: Tensor, x: Tensor | SparseTensor) -> Tensor:
        """A hidden layer's output y from its input x: norm, activation, residual."""
        if self.norms is not None:
            y = self.norms[i](y)
        y = self.act(y)
        if self.residual and isinstance(x, Tensor) and x.shape[1] == y.shape[1]:
            y = y + _rows(x, y.shape[0])
        return y

    def _jump(self, outputs: list[Tensor]) -> Tensor:
        if self.jk == "cat":
            return concatenate(outputs, axis=1)  # (T, Σ widths)
        stacked = stack_tensors(outputs, axis=0)  # (L, T, hidden)
        return stacked.max(axis=0) if self.jk == "max" else stacked.sum(axis=0)

    def _dropout(self, x: Tensor | SparseTensor, step: int,
                 layer: int) -> Tensor | SparseTensor:
        if not self.keyed_masks:
            return dropout(x, self.p, self.training, self.rng, self.buffers)
        key = stream_key(self.dropout_key or 0, step, layer)
        return keyed_dropout(x, self.p, self.training, key, self.node_ids)

    def extra_repr(self) -> str:
        options = "".join(f", {name}={value}" for name, value in
                          (("residual", self.residual), ("jk", self.jk)) if value)
        return f"dropout={self.p}, activation={self.act_name}" + options


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
    """Linear layers with an activation between them; returns logits (no output activation).
    `residual`, `jk`, `norm`: the stack options (see the module)."""

    def __init__(self, in_features: int, hidden: int, out_features: int, layers: int = 2,
                 dropout: float = 0.0, activation: str = "relu",
                 rng: np.random.Generator | None = None, dtype: Any = np.float32,
                 residual: bool = False, jk: str | None = None, norm: str | None = None):
        super().__init__(dropout, activation, rng)
        widths = stack_widths(in_features, hidden, out_features, layers, jk)
        self.linears = ModuleList(Linear(a, b, rng=self.rng, dtype=dtype)
                                  for a, b in itertools.pairwise(widths))
        self.stack_options(widths[1:], out_features, residual, jk, norm, dtype)

    def forward(self, x: Tensor | SparseTensor, *_: Any) -> Tensor:
        return self.stack(self.linears, x)
