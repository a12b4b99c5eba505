"""Gradient-check cases of mgsparse.nn: the losses, and whole layers on a small random graph.

Losses take the dense operand size of the `Size` (at least one row: a loss of an empty batch
is refused by design) and have a scalar reference each. A layer case checks the gradient of
the layer's output with respect to its input features and every parameter (W, attention
vectors, bias, learned edge weights) at once: its last input is a `Layer`, which installs
the Tensors it is given as the module's parameters before each forward, so that the
checker's own float64 copies are the ones differentiated and perturbed.

The graph (`random_graph`) has (nodes, edges) of the Size: directed edges in shuffled order,
a node with no edges at all and a node with outgoing edges only, so zero-degree paths are
exercised too; "one" is a single node with its self loop, "empty" a graph without edges.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mgsparse.checks.case import (
    DROPOUT_P,
    Case,
    Size,
    dropout_rng,
    dropout_scale,
    each,
    leaf,
    normal,
    scalar_mean,
)
from mgsparse.checks.engine import op
from mgsparse.engine import Tensor, Value
from mgsparse.nn import functional as F
from mgsparse.nn.cheb import ChebConv, scaled_laplacian
from mgsparse.nn.gat import EdgeGATConv, GATConv
from mgsparse.nn.gcn import GCN, GCNConv, normalized_adjacency
from mgsparse.nn.gcnii import GCNIILayer
from mgsparse.nn.layers import LinearOp, dropout_linear
from mgsparse.nn.module import Module
from mgsparse.nn.sage import SAGEConv

# ---------------------------------------------------------------- losses


def _loss(name: str, inputs: Callable, fn: Callable, scalar: Callable) -> Case:
    """A loss case: inputs(rng, n, m) with n ≥ 1 rows."""
    return op(name, lambda r, n, m: inputs(r, max(n, 1), m), fn, scalar, group="nn")


def _targets(rng, n, m):
    """(logits, class ids, a boolean mask leaving the first row out when there are others)."""
    return normal(rng, (n, m)), rng.integers(0, m, n), np.arange(n) >= min(n - 1, 1)


def _scalar_cross_entropy(z: np.ndarray, t: np.ndarray, mask: np.ndarray):
    """mean over masked rows i of log Σ_c exp z_ic − z_i,t_i."""
    losses = [each(Value.exp)(z[i]).sum().log() - z[i, t[i]] for i in np.flatnonzero(mask)]
    return sum(losses[1:], losses[0]) * (1.0 / len(losses))


def _scalar_bce(x, y):
    """mean of max(x, 0) − x·y + log(1 + e^−|x|), the branches taken on the data."""
    def one(a, b):
        return a.relu() - a * b + (1 + (a if a.data < 0 else -a).exp()).log()
    return scalar_mean(each(one)(x, y))


LOSSES: list[Case] = [
    _loss("cross_entropy", _targets, F.cross_entropy, _scalar_cross_entropy),
    _loss("nll_loss",  # an index mask repeating row 0: its gradient counts twice
          lambda r, n, m: (normal(r, (n, m)), r.integers(0, m, n), np.array([0, 0, n - 1])),
          F.nll_loss, lambda a, t, rows: -scalar_mean(a[rows, t[rows]])),
    _loss("bce_with_logits", lambda r, n, m: (normal(r, (n, m)), leaf(r.random((n, m)))),
          F.binary_cross_entropy_with_logits, _scalar_bce),
    _loss("mse_loss", lambda r, n, m: (normal(r, (n, m)), normal(r, (n, m))),
          F.mse_loss, lambda a, b: scalar_mean((a - b) * (a - b))),
]


# ---------------------------------------------------------------- the graph and the layer


def random_graph(rng: np.random.Generator, num_nodes: int, num_edges: int) -> np.ndarray:
    """(2, E) distinct directed edges, shuffled. With N ≥ 3 nodes: no self loops, edges among
    nodes 0..N-3, node N-2 only sends (to node 0) and node N-1 is isolated. With fewer nodes
    any pair may be an edge, loops included (one node and one edge: its self loop)."""
    if num_edges == 0:
        return np.zeros((2, 0), dtype=np.int64)
    inner = num_nodes - 2 if num_nodes >= 3 else num_nodes
    pairs = [(i, j) for i in range(inner) for j in range(inner) if i != j or num_nodes < 3]
    extra = [(num_nodes - 2, 0)] if num_nodes >= 3 else []
    chosen = rng.choice(len(pairs), size=min(num_edges - len(extra), len(pairs)), replace=False)
    edges = np.array([pairs[k] for k in chosen] + extra, dtype=np.int64).T
    return edges[:, rng.permutation(edges.shape[1])]


class Layer:
    """The last input of a layer case: `module` called as `call(module, x, *rest)` after the
    Tensors before `rest` are installed as its parameters (dotted names walk submodules);
    `dense` is the same call given a dense operand instead, where the case has one."""

    def __init__(self, module: Module, call: Callable, dense: Callable | None, edges: int):
        self.module, self.call, self.dense_call, self.edges = module, call, dense, edges
        self.names = [name.split(".") for name, _ in module.named_parameters()]

    def _install(self, tensors: tuple) -> tuple:
        for (*path, attr), tensor in zip(self.names, tensors):
            owner = self.module
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, attr, tensor)
        return tensors[len(self.names):]

    def __call__(self, x: Tensor, *tensors: Tensor) -> Tensor:
        return self.call(self.module, x, *self._install(tensors))

    def dense(self, x: Tensor, *tensors: Tensor) -> Tensor:
        return self.dense_call(self.module, x, *self._install(tensors))

    def __repr__(self) -> str:
        return f"Layer({type(self.module).__name__}, edges={self.edges})"


def _parameters(rng: np.random.Generator, module: Module) -> tuple[Tensor, ...]:
    """Random float64 parameters (a non-zero bias, so every term is exercised); learned edge
    weights in [0.5, 1.5], so that every degree stays positive."""
    return tuple(leaf(rng.uniform(0.5, 1.5, p.shape) if name.endswith("edge_weight")
                      else rng.standard_normal(p.shape) * 0.5)
                 for name, p in module.named_parameters())


def layer(name: str, make: Callable, call: Callable, dense: Callable | None = None,
          extra: Callable | None = None) -> Case:
    """`make(rng, F_in, F_out, edges)` → module; inputs (x, *parameters, *extra, Layer), with
    extra(rng, edges) → Tensors handed to `call` after x (say, an edge weight to check)."""
    def build(rng: np.random.Generator, size: Size) -> tuple:
        (n, e), (f_in, f_out) = size.graph, size.features
        edges = random_graph(rng, n, e)
        module = make(rng, f_in, f_out, edges)
        bound = Layer(module, lambda m, x, *rest: call(m, x, edges, *rest),
                      dense and (lambda m, x, *rest: dense(m, x, edges, *rest)), edges.shape[1])
        more = extra(rng, edges) if extra else ()
        return (normal(rng, (n, f_in)), *_parameters(rng, module), *more, bound)
    dense_fn = (lambda *a: a[-1].dense(*a[:-1])) if dense else None
    return Case(f"nn.{name}", build, lambda *a: a[-1](*a[:-1]), dense_fn)


# ---------------------------------------------------------------- the layers


def _gcn(rng, f_in, f_out, edges):
    return GCNConv(f_in, f_out, rng=rng, dtype=np.float64)


def _dense_adj(m: GCNConv, x: Tensor, edges: np.ndarray) -> Tensor:
    """The same layer given Â as a dense Tensor (densified from the sparse Â)."""
    return m(x, normalized_adjacency(edges, x.shape[0], dtype=np.float64).to_tensor())


def _gat(concat: bool) -> Callable:
    return lambda rng, f_in, f_out, edges: GATConv(f_in, f_out, heads=2, concat=concat, rng=rng,
                                                   dtype=np.float64)


def _gat_edges(rng, f_in, f_out, edges):
    """GAT whose logits read 3 edge features (their own gradient checked too, `LAYERS`)."""
    return EdgeGATConv(f_in, f_out, heads=2, rng=rng, dtype=np.float64, edge_dim=3)


def _sage(normalize: bool) -> Callable:
    return lambda rng, f_in, f_out, edges: SAGEConv(f_in, f_out, normalize=normalize, rng=rng,
                                                    dtype=np.float64)


def _gcn_learning_edge_weights(rng, f_in, f_out, edges):
    """A two-layer GCN learning one weight per edge (eval mode: no dropout)."""
    return GCN(f_in, 5, f_out, rng=rng, dtype=np.float64, edge_index=edges,
               learn_edge_weight=True).eval()


def _gcnii(rng, f_in, f_out, edges):
    """A GCNII layer at depth 2 (its width is the input's: x₀ = x, the first layer's case)."""
    return GCNIILayer(f_in, alpha=0.2, theta=0.5, layer=2, rng=rng, dtype=np.float64)


def _gcnii_step(adjacency: Callable) -> Callable:
    """relu(((1 − α) Â x + α x) M): the fused op for a sparse Â, the engine's ops for dense."""
    def call(m: GCNIILayer, x: Tensor, edges: np.ndarray) -> Tensor:
        return m.step(x, x * m.alpha, adjacency(edges, x.shape[0]), relu=True)
    return call


def _sparse_adj(edges: np.ndarray, n: int):
    return normalized_adjacency(edges, n, dtype=np.float64)


def _cheb(rng, f_in, f_out, edges):
    """Three Chebyshev terms: Clenshaw's recurrence runs its loop once (K = 2 would not)."""
    return ChebConv(f_in, f_out, k=3, rng=rng, dtype=np.float64)


def _dense_lap(m: ChebConv, x: Tensor, edges: np.ndarray) -> Tensor:
    """The same layer given L̃ as a dense Tensor (densified from the sparse L̃)."""
    return m(x, scaled_laplacian(edges, x.shape[0], np.float64).to_tensor())


def _call(m: Module, x: Tensor, edges: np.ndarray, *rest: Tensor) -> Tensor:
    return m(x, edges, *rest)


def _undirected(m: Module, x: Tensor, edges: np.ndarray) -> Tensor:
    """The layer on the graph with every edge both ways: a symmetric Â (its product scatters
    through its own CSR read as CSC, `kernels.csr.matmul`)."""
    return m(x, np.unique(np.concatenate([edges, edges[::-1]], axis=1), axis=1))


def _gcn2(rng, f_in, f_out, edges):
    """A two-layer GCN on a fixed Â (eval mode: no dropout)."""
    return GCN(f_in, 5, f_out, rng=rng, dtype=np.float64).eval()


def _loss_rows(m: GCN, x: Tensor, edges: np.ndarray) -> Tensor:
    """The output at one node, as a loss on a few training nodes reads it (node N-2, which
    only sends): every gradient below is zero outside a few rows, and says so (`mark_rows`)."""
    return m(x, edges)[np.array([max(x.shape[0] - 2, 0)])]


LAYERS: list[Case] = [
    layer("gcn_conv", _gcn, _call, dense=_dense_adj),
    layer("gcn_conv_undirected", _gcn, _undirected),
    layer("gcn_loss_rows", _gcn2, _loss_rows),
    layer("gcn_conv_edge_weight", _gcn, _call,  # the weights' gradient crosses the degrees
          extra=lambda rng, edges: (leaf(rng.uniform(0.5, 1.5, edges.shape[1])),)),
    layer("gcn_learn_edge_weight", _gcn_learning_edge_weights, lambda m, x, edges: m(x, None)),
    layer("gat_conv", _gat(concat=True), _call),
    layer("gat_conv_mean", _gat(concat=False), _call),
    layer("gat_conv_edge_attr", _gat_edges, _call,
          extra=lambda rng, edges: (normal(rng, (edges.shape[1], 3)),)),
    layer("sage_conv", _sage(normalize=False), _call),
    layer("sage_conv_normalize", _sage(normalize=True), _call),
    layer("gcnii_layer", _gcnii, _gcnii_step(_sparse_adj),
          dense=_gcnii_step(lambda edges, n: _sparse_adj(edges, n).to_tensor())),
    layer("cheb_conv", _cheb, _call, dense=_dense_lap),
]

LINEAR = op("linear", lambda r, n, m: (normal(r, (n, m)), normal(r, (m, 3)), normal(r, (3,))),
            LinearOp.apply, lambda a, w, b: np.dot(a, w) + b, group="nn")  # x·W + b, fused

DROPOUT_LINEAR = op(  # (x·keep·scale)·W, fused: x needs its gradient here too
    "dropout_linear", lambda r, n, m: (normal(r, (n, m)), normal(r, (m, 3))),
    lambda x, w: dropout_linear(x, w, DROPOUT_P, dropout_rng()),
    lambda a, w: np.dot(a * dropout_scale(a.shape), w), group="nn")

CASES: list[Case] = [*LOSSES, LINEAR, DROPOUT_LINEAR, *LAYERS]
