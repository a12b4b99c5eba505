"""Gradient-check cases of the graph-level pieces: the segment reductions (group `sparse`) and
the normalisation layers and GIN (group `nn`).

Segment cases take the dense size (n, m) of the `Size`: x (n, m) and n graph ids among
B = n + 2 graphs, never graph 1 nor the last one, so two graphs are always empty (their
readout 0, no gradient); "empty" has no rows at all. The dense equivalent runs through the
Tensor engine alone: a one-hot (B, n) matrix product for sum and mean, a masked dense `max`
for the max. The scalar references sum `Value`s row by row and pick the max on the data.

Layer cases check the output's gradient with respect to the input and every parameter (ε
included) at once, through `checks.nn.Layer`; BatchNorm1d runs in training mode (batch
statistics; the fused training op, also with its ReLU) wherever the input has two rows or
more, and in eval mode (running statistics) on a single row, where torch too refuses
training. GIN runs on the whole graph (dense equivalent: the same layer given A densified)
and on a rectangular sampled block (fanout 2, the first half of the nodes as targets).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from mgsparse.checks.case import Case, Size, each, normal
from mgsparse.checks.nn import Layer, _parameters, random_graph
from mgsparse.data.sampler import NeighborSampler
from mgsparse.engine import Tensor, Value
from mgsparse.nn.gin import GINConv, gin_block_adjacency, sum_adjacency
from mgsparse.nn.gine import GINEConv, block_scale, edge_operands
from mgsparse.nn.norm import BatchNorm1d, LayerNorm
from mgsparse.sparse import Segments, segment_max, segment_mean, segment_sum
from mgsparse.sparse import reference as ref

# ---------------------------------------------------------------- segment reductions


def _segment_inputs(shuffled: bool) -> Callable:
    """(x (n, m), batch (n,), B): ids sorted, or in shuffled row order when `shuffled`."""
    def build(rng: np.random.Generator, size: Size) -> tuple:
        n, m = size.dense
        allowed = np.array([0, *range(2, n + 1)], dtype=np.int64)
        batch = np.sort(rng.choice(allowed, n)) if n else np.zeros(0, dtype=np.int64)
        return normal(rng, (n, m)), batch[rng.permutation(n)] if shuffled else batch, n + 2
    return build


def _one_hot(batch: np.ndarray, num: int, mean: bool = False) -> Tensor:
    P = np.zeros((num, len(batch)))
    P[batch, np.arange(len(batch))] = 1.0
    counts = P.sum(axis=1, keepdims=True)
    return Tensor(P / np.maximum(counts, 1) if mean else P)


def _dense_max(x: Tensor, batch: np.ndarray, num: int) -> Tensor:
    """max over a (B, n, m) stack in which rows outside the graph sit at −1e30, times 0 for an
    empty graph (whose max is then a tie of −1e30 rows, every one multiplied by 0)."""
    if x.shape[0] == 0:
        return Tensor(np.zeros((num, x.shape[1])))
    mask = _one_hot(batch, num).data[:, :, None]  # (B, n, 1)
    stacked = x.reshape(1, *x.shape) * mask + (mask - 1.0) * 1e30
    nonempty = (mask.sum(axis=1) > 0).astype(np.float64)  # (B, 1)
    return stacked.max(axis=1) * nonempty


def _scalar_sum(x: np.ndarray, batch: np.ndarray, num: int, mean: bool = False) -> np.ndarray:
    out = np.empty((num, x.shape[1]), dtype=object)
    out.fill(0.0)
    for i, b in enumerate(batch):
        out[b] = out[b] + x[i]
    if mean:
        counts = np.bincount(batch, minlength=num)
        out = out * (1.0 / np.maximum(counts, 1))[:, None]
    return out


def _segment(name: str, shuffled: bool, fn: Callable, dense: Callable, scalar: Callable) -> Case:
    return Case(f"sparse.{name}", _segment_inputs(shuffled), fn, dense, scalar)


SEGMENT_CASES: list[Case] = [
    _segment("segment_sum", False, segment_sum,
             lambda x, b, B: _one_hot(b, B) @ x, _scalar_sum),
    _segment("segment_mean", False, segment_mean,
             lambda x, b, B: _one_hot(b, B, mean=True) @ x,
             lambda x, b, B: _scalar_sum(x, b, B, mean=True)),
    _segment("segment_max", False, segment_max, _dense_max,
             lambda x, b, B: ref.segment_max(x, Segments(b, len(b), B))),
    _segment("segment_max_unsorted", True, segment_max, _dense_max,
             lambda x, b, B: ref.segment_max(x, Segments(b, len(b), B))),
]


# ---------------------------------------------------------------- scalar layers


def _inv_sqrt(v):
    return v ** -0.5


def _scalar_batch_norm(x: np.ndarray, w, b, module: BatchNorm1d) -> np.ndarray:
    """Training: (x − μ)/√(σ² + eps) with the batch's biased σ²; eval: the running ones."""
    if module.training:
        mean = x.sum(axis=0) * (1.0 / len(x))
        centred = x - mean
        var = (centred * centred).sum(axis=0) * (1.0 / len(x))
    else:
        centred, var = x - module.running_mean.data, module.running_var.data.astype(object)
    return centred * each(_inv_sqrt)(var + module.eps) * w + b


def _scalar_layer_norm(x: np.ndarray, w, b, module: LayerNorm) -> np.ndarray:
    f = x.shape[-1]
    centred = x - x.sum(axis=-1, keepdims=True) * (1.0 / f)
    var = (centred * centred).sum(axis=-1, keepdims=True) * (1.0 / f)
    return centred * each(_inv_sqrt)(var + module.eps) * w + b


def _scalar_gin(x, eps, w1, b1, gamma, beta, w2, b2, bound: Layer) -> np.ndarray:
    """MLP((1 + ε)·x[:T] + A·x) entry by entry, A the dense sum operand the case stored."""
    adj = bound.adj_dense
    h = np.dot(adj, x) + x[:adj.shape[0]] * (eps[0] + 1.0)
    z = _scalar_batch_norm(np.dot(h, w1) + b1, gamma, beta, bound.module.mlp[1])
    return np.dot(each(Value.relu)(z), w2) + b2


# ---------------------------------------------------------------- layer cases


def _norm_case(name: str, make: Callable, scalar: Callable, eval_mode: bool = False,
               call: Callable = lambda m, x: m(x)) -> Case:
    """inputs (x, weight, bias, Layer) with x of (nodes, F_in) of the Size's graph."""
    def build(rng: np.random.Generator, size: Size) -> tuple:
        n, f = size.graph[0], size.features[0]
        module = make(f).train(not eval_mode and n >= 2)
        if eval_mode:
            module.running_mean.data[...] = rng.standard_normal(f)
            module.running_var.data[...] = rng.uniform(0.5, 2.0, f)
        bound = Layer(module, call, None, 0)
        return (normal(rng, (n, f)), *_parameters(rng, module), bound)
    return Case(f"nn.{name}", build, lambda *a: a[-1](*a[:-1]),
                scalar=lambda x, w, b, bound: scalar(x, w, b, bound.module))


def _gin_module(rng: np.random.Generator, size: Size, rows: int) -> GINConv:
    f_in, f_out = size.features
    module = GINConv(f_in, f_out, hidden=f_out + 1, train_eps=True, rng=rng, dtype=np.float64)
    return module.train(rows >= 2)


def _gin_whole(rng: np.random.Generator, size: Size) -> tuple:
    n, e = size.graph
    edges = random_graph(rng, n, e)
    module = _gin_module(rng, size, n)
    adj = Tensor(sum_adjacency(edges, n, np.float64).to_dense())
    bound = Layer(module, lambda m, x: m(x, edges), lambda m, x: m(x, adj), edges.shape[1])
    bound.adj_dense = adj.data
    return (normal(rng, (n, size.features[0])), *_parameters(rng, module), bound)


def _gin_block(rng: np.random.Generator, size: Size) -> tuple:
    """A fanout-2 block of the first half of the nodes: T < S where the graph allows it."""
    n, e = size.graph
    edges = random_graph(rng, n, e)
    block = NeighborSampler(edges, n, [2]).block(np.arange(max(n // 2, 1)), 2, rng)
    module = _gin_module(rng, size, block.num_targets)
    adj = gin_block_adjacency(block, np.float64)
    bound = Layer(module, lambda m, x: m.on_block(block)(x),
                  lambda m, x: m.aggregate(x, Tensor(adj.to_dense())), block.nnz)
    bound.adj_dense = adj.to_dense()
    return (normal(rng, (len(block.n_id), size.features[0])), *_parameters(rng, module), bound)


def _gin_case(name: str, build: Callable) -> Case:
    return Case(f"nn.{name}", build, lambda *a: a[-1](*a[:-1]),
                lambda *a: a[-1].dense(*a[:-1]), _scalar_gin)


EDGE_DIM = 3  # width of a GINE case's edge features


def _scalar_gine(x, eps, w1, b1, gamma, beta, w2, b2, we, be, e, bound: Layer) -> np.ndarray:
    """MLP((1 + ε)·x[:T] + S·ReLU(G·x + e·W + b)) entry by entry, G and S the dense gather
    and scatter the case stored."""
    gather, scatter = bound.dense_ops
    messages = each(Value.relu)(np.dot(gather, x) + np.dot(e, we) + be)
    h = np.dot(scatter, messages) + x[:scatter.shape[0]] * (eps[0] + 1.0)
    z = _scalar_batch_norm(np.dot(h, w1) + b1, gamma, beta, bound.module.mlp[1])
    return np.dot(each(Value.relu)(z), w2) + b2


def _gine(rng: np.random.Generator, size: Size, block: bool) -> tuple:
    """GINE on the Size's graph, or on a fanout-2 block of its first half (as `_gin_block`);
    the edge features are an input, so their gradient is checked too. Dense equivalent: the
    same layer on the densified gather and scatter."""
    n, e = size.graph
    edges = random_graph(rng, n, e)
    f_in, f_out = size.features
    if block:
        blk = NeighborSampler(edges, n, [2], edge_ids=True).block(np.arange(max(n // 2, 1)),
                                                                  2, rng)
        rows, nnz = len(blk.n_id), blk.nnz
    else:
        rows, nnz = n, edges.shape[1]
    module = GINEConv(f_in, f_out, EDGE_DIM, hidden=f_out + 1, train_eps=True, rng=rng,
                      dtype=np.float64).train(n >= 2)
    attr = normal(rng, (nnz, EDGE_DIM))
    if block:
        def call(m, x, a):
            return m.on_block(dataclasses.replace(blk, edge_attr=a))(x)
        ops = edge_operands(blk.col, blk.row, blk.shape, attr.data, np.float64,
                            block_scale(blk))
    else:
        def call(m, x, a):
            return m(x, edges, a)
        ops = edge_operands(edges[0], edges[1], (n, n), attr.data, np.float64)
    dense = tuple(Tensor(op.to_dense()) for op in ops[:2])
    bound = Layer(module, call, lambda m, x, a: m.aggregate(x, (*dense, a)), nnz)
    bound.dense_ops = tuple(d.data for d in dense)
    return (normal(rng, (rows, f_in)), *_parameters(rng, module), attr, bound)


def _gine_case(name: str, block: bool) -> Case:
    return Case(f"nn.{name}", lambda rng, size: _gine(rng, size, block),
                lambda *a: a[-1](*a[:-1]), lambda *a: a[-1].dense(*a[:-1]), _scalar_gine)


NN_CASES: list[Case] = [
    _norm_case("batch_norm", lambda f: BatchNorm1d(f, dtype=np.float64), _scalar_batch_norm),
    _norm_case("batch_norm_eval", lambda f: BatchNorm1d(f, dtype=np.float64),
               _scalar_batch_norm, eval_mode=True),
    _norm_case("batch_norm_relu", lambda f: BatchNorm1d(f, dtype=np.float64),  # fused ReLU
               lambda *a: each(Value.relu)(_scalar_batch_norm(*a)),
               call=lambda m, x: m(x, relu=True)),
    _norm_case("layer_norm", lambda f: LayerNorm(f, dtype=np.float64), _scalar_layer_norm),
    _gin_case("gin_conv", _gin_whole),
    _gin_case("gin_conv_block", _gin_block),
    _gine_case("gine_conv", block=False),
    _gine_case("gine_conv_block", block=True),
]
