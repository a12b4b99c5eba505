"""benchmarks/floor_gin.py computes the epoch it claims to: its hand-written gradients, the
running statistics it keeps and its folded evaluation equal mgsparse's GraphClassifier (GIN,
mean readout) given the same parameters and batch. No timing is asserted."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from mgsparse.data.graph import undirected_edges
from mgsparse.data.graphset import GraphSet
from mgsparse.engine import no_grad
from mgsparse.nn import functional as F
from mgsparse.nn.graphnet import GraphClassifier
from mgsparse.run.tasks.graphs import graph_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import floor_gin  # a benchmark script, found through the path above

LAYERS, HIDDEN, FEATURES, CLASSES = 2, 8, 5, 3


def random_graphs(num_graphs: int = 12, seed: int = 0) -> GraphSet:
    """Random undirected graphs of 3-9 nodes (a path plus random chords), random features."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 10, num_graphs)
    node_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    src, dst = [], []
    for lo, hi in itertools.pairwise(node_ptr):
        nodes = np.arange(lo, hi)
        chords = rng.integers(lo, hi, (2, 2))
        src += [nodes[:-1], chords[0]]
        dst += [nodes[1:], chords[1]]
    src, dst = np.concatenate(src), np.concatenate(dst)
    keep = src != dst
    edge_index = undirected_edges(src[keep], dst[keep], int(node_ptr[-1]))
    edge_ptr = np.searchsorted(edge_index[0], node_ptr).astype(np.int64)
    x = rng.standard_normal((int(node_ptr[-1]), FEATURES)).astype(np.float32)
    return GraphSet(x=x, edge_index=edge_index, node_ptr=node_ptr, edge_ptr=edge_ptr,
                    y=rng.integers(0, CLASSES, num_graphs), num_classes=CLASSES, name="random")


@pytest.fixture
def pair(monkeypatch):
    """(graphs, floor, model): the same parameters on both sides, dropout off."""
    monkeypatch.setitem(floor_gin.RECIPE, "layers", LAYERS)
    monkeypatch.setitem(floor_gin.RECIPE, "hidden", HIDDEN)
    monkeypatch.setitem(floor_gin.RECIPE, "dropout", 0.0)
    graphs = random_graphs()
    ids = np.arange(graphs.num_graphs)
    floor = floor_gin.FloorGIN(graphs, (ids, ids, ids), seed=1)
    model = GraphClassifier(FEATURES, HIDDEN, CLASSES, layers=LAYERS, dropout=0.0,
                            readout="mean", rng=np.random.default_rng(2))
    for param, value in zip(mgsparse_params(model), floor.params, strict=True):
        assert param.shape == value.shape
        param.data[...] = value + np.float32(0.1) * (param.ndim == 1)  # β, b ≠ 0 too
        value[...] = param.data
    return graphs, floor, model


def mgsparse_params(model: GraphClassifier) -> list:
    """The model's parameters in the floor's order: per layer W1 b1 γ1 β1 W2 b2 γ2 β2, then
    each level's head W b."""
    out = []
    for conv, norm in zip(model.convs, model.norms):
        lin1, bn1, _, lin2 = conv.mlp
        out += [lin1.weight, lin1.bias, bn1.weight, bn1.bias, lin2.weight, lin2.bias,
                norm.weight, norm.bias]
    for head in model.heads:
        out += [head.weight, head.bias]
    return out


def test_the_floor_gradients_are_mgsparse_autograd_gradients(pair):
    graphs, floor, model = pair
    idx = np.array([3, 0, 7, 5, 11, 2])
    grads = floor.gradients(floor_gin.Batch(graphs, idx))
    batch = graph_batch(graphs, idx)
    model.train()
    F.cross_entropy(model(batch), batch.y).backward()
    params = mgsparse_params(model)
    scale = max(float(np.abs(p.grad).max()) for p in params)
    for i, (param, grad) in enumerate(zip(params, grads, strict=True)):
        np.testing.assert_allclose(grad, param.grad, rtol=1e-3, atol=1e-5 * scale,
                                   err_msg=f"parameter {i}")


def test_the_floor_evaluation_is_mgsparse_eval_mode(pair):
    """After a training step (running statistics moved on both sides), the floor's folded
    evaluation gives mgsparse's eval-mode logits."""
    graphs, floor, model = pair
    idx = np.arange(graphs.num_graphs)
    floor.gradients(floor_gin.Batch(graphs, idx))
    batch = graph_batch(graphs, idx)
    model.train()
    model(batch)
    running = [(bn.running_mean.data, bn.running_var.data) for conv, norm in
               zip(model.convs, model.norms) for bn in (conv.mlp[1], norm)]
    for (mean, var), (floor_mean, floor_var) in zip(running, floor.running, strict=True):
        np.testing.assert_allclose(floor_mean, mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(floor_var, var, rtol=1e-5, atol=1e-6)
    model.eval()
    with no_grad():
        expected = model(batch).data
    np.testing.assert_allclose(floor.logits(floor_gin.Batch(graphs, idx)), expected,
                               rtol=1e-4, atol=1e-5)
