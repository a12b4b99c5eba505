"""Gradient-check cases for mgsparse.nn: the losses, and whole layers on a small random graph.

`LOSS_CASES` maps a loss name to an `mgsparse.engine.cases.OpCase`: float64 logits (and
targets, masks) built at a dense size, the loss of `mgsparse.nn.functional`, and its scalar
decomposition over micrograd `Value`s.

`LAYER_CASES` maps a case name to `build(rng) -> (fn, inputs)`; then
`mgsparse.gradcheck(fn, inputs)` compares the analytic gradient of the whole layer with
finite differences for every input that requires grad: the input features and each
parameter (W, the attention vectors, the bias, learned edge weights). `fn` binds the Tensors
it is given as the layer's parameters before each forward, so the checker's float64 copies
are the ones differentiated and perturbed.

The graph (`random_graph`) has directed edges in shuffled order, a node with no edges at
all and a node with outgoing edges only, so zero-degree paths are exercised too.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mgsparse.engine import Tensor, Value
from mgsparse.engine.cases import OpCase, by_name, each, leaf, normal, op_case, scalar_mean
from mgsparse.nn import functional as F
from mgsparse.nn.conv import GCNConv
from mgsparse.nn.gat import GATConv
from mgsparse.nn.module import Module
from mgsparse.nn.sage import SAGEConv

NUM_NODES, NUM_EDGES, IN_FEATURES, OUT_FEATURES = 7, 16, 4, 3

LayerCase = Callable[[np.random.Generator], tuple[Callable[..., Tensor], tuple]]


# ---------------------------------------------------------------- losses


def _targets(rng, n, m):
    """(logits, class ids, a boolean mask leaving the first row out)."""
    return normal(rng, (n, m)), rng.integers(0, m, n), np.arange(n) > 0


def _scalar_cross_entropy(z: np.ndarray, t: np.ndarray, mask: np.ndarray):
    """mean over masked rows i of log Σ_c exp z_ic − z_i,t_i."""
    losses = [each(Value.exp)(z[i]).sum().log() - z[i, t[i]] for i in np.flatnonzero(mask)]
    return sum(losses[1:], losses[0]) * (1.0 / len(losses))


def _scalar_bce(x, y):
    """mean of max(x, 0) − x·y + log(1 + e^−|x|), the branches taken on the data."""
    def one(a, b):
        return a.relu() - a * b + (1 + (a if a.data < 0 else -a).exp()).log()
    return scalar_mean(each(one)(x, y))


LOSS_CASES: dict[str, OpCase] = by_name([
    op_case("cross_entropy", _targets, F.cross_entropy, _scalar_cross_entropy),
    op_case("nll_loss",  # an index mask repeating row 0: its gradient counts twice
            lambda r, n, m: (normal(r, (n, m)), r.integers(0, m, n), np.array([0, 0, n - 1])),
            F.nll_loss, lambda a, t, rows: -scalar_mean(a[rows, t[rows]])),
    op_case("bce_with_logits", lambda r, n, m: (normal(r, (n, m)), leaf(r.random((n, m)))),
            F.binary_cross_entropy_with_logits, _scalar_bce),
    op_case("mse_loss", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, m))),
            F.mse_loss, lambda a, b: scalar_mean((a - b) * (a - b))),
])


# ---------------------------------------------------------------- layers


def random_graph(rng: np.random.Generator, num_nodes: int = NUM_NODES,
                 num_edges: int = NUM_EDGES) -> np.ndarray:
    """(2, E) distinct directed edges without self loops among nodes 0..N-3, shuffled; node
    N-2 only sends (to node 0) and node N-1 is isolated."""
    inner = num_nodes - 2
    pairs = [(i, j) for i in range(inner) for j in range(inner) if i != j]
    chosen = rng.choice(len(pairs), size=min(num_edges - 1, len(pairs)), replace=False)
    edges = np.array([pairs[k] for k in chosen] + [(num_nodes - 2, 0)], dtype=np.int64).T
    return edges[:, rng.permutation(edges.shape[1])]


def _bind(layer: Module, names: tuple[str, ...], call: Callable[..., Tensor]):
    """fn(x, *tensors): the first len(names) tensors become the layer's named parameters, the
    rest are handed to `call(layer, x, *rest)` (e.g. learned edge weights)."""
    def fn(x: Tensor, *tensors: Tensor) -> Tensor:
        for name, value in zip(names, tensors):
            setattr(layer, name, value)
        return call(layer, x, *tensors[len(names):])
    return fn


def _inputs(rng: np.random.Generator, layer: Module, names: tuple[str, ...]) -> tuple:
    """Random float64 features and parameters (non-zero bias, so every term is exercised)."""
    x = Tensor(rng.standard_normal((NUM_NODES, IN_FEATURES)), requires_grad=True)
    params = tuple(Tensor(rng.standard_normal(getattr(layer, n).shape) * 0.5, requires_grad=True)
                   for n in names)
    return (x, *params)


def gat_case(concat: bool) -> LayerCase:
    def build(rng: np.random.Generator):
        edges = random_graph(rng)
        layer = GATConv(IN_FEATURES, OUT_FEATURES, heads=2, concat=concat, rng=rng,
                        dtype=np.float64)
        names = ("weight", "att_src", "att_dst", "bias")
        return _bind(layer, names, lambda m, x: m(x, edges)), _inputs(rng, layer, names)
    return build


def sage_case(normalize: bool) -> LayerCase:
    def build(rng: np.random.Generator):
        edges = random_graph(rng)
        layer = SAGEConv(IN_FEATURES, OUT_FEATURES, normalize=normalize, rng=rng,
                         dtype=np.float64)
        names = ("weight_neighbors", "weight_root", "bias")
        return _bind(layer, names, lambda m, x: m(x, edges)), _inputs(rng, layer, names)
    return build


def gcn_edge_weight_case(rng: np.random.Generator):
    """GCNConv with one learned weight per edge: the gradient crosses gcn_norm's degrees."""
    edges = random_graph(rng)
    layer = GCNConv(IN_FEATURES, OUT_FEATURES, rng=rng, dtype=np.float64)
    names = ("weight", "bias")
    x, weight, bias = _inputs(rng, layer, names)
    edge_weight = Tensor(rng.uniform(0.5, 1.5, edges.shape[1]), requires_grad=True)  # degrees > 0
    fn = _bind(layer, names, lambda m, x, ew: m(x, edges, ew))
    return fn, (x, weight, bias, edge_weight)


LAYER_CASES: dict[str, LayerCase] = {
    "gat_conv": gat_case(concat=True),
    "gat_conv_mean": gat_case(concat=False),
    "sage_conv": sage_case(normalize=False),
    "sage_conv_normalize": sage_case(normalize=True),
    "gcn_conv_edge_weight": gcn_edge_weight_case,
}
