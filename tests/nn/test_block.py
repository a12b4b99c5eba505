"""Layers on sampled blocks: the block operands by hand, full-neighbourhood mini-batch equal to
full batch (loss and every gradient), gradcheck on a sampled block, exact layer-wise inference."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.data import sbm
from mgsparse.data.sampler import NeighborSampler
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import GAT, GraphSAGE
from mgsparse.nn import functional as F
from mgsparse.nn.block import (
    forward_blocks,
    gather_rows,
    layerwise_inference,
    on_block,
)
from mgsparse.nn.conv import gcn_block_adjacency
from mgsparse.nn.gat import GATConv
from mgsparse.nn.models import GCN, MLP
from mgsparse.nn.sage import SAGEConv, mean_adjacency, sage_block_mean
from mgsparse.sparse import SparseTensor
from tests.data.test_sampler import random_digraph

N = 60


@pytest.fixture
def digraph(rng):
    return random_digraph(rng, N, 300)


def dense_in_adjacency(edge_index, n) -> np.ndarray:
    """A_in[i, j] = number of edges j → i."""
    A = np.zeros((n, n))
    np.add.at(A, (edge_index[1], edge_index[0]), 1.0)
    return A


def test_gcn_block_with_all_neighbours_is_rows_of_the_in_degree_gcn_norm(digraph, rng):
    A = dense_in_adjacency(digraph, N) + np.eye(N)
    d = A.sum(axis=1) ** -0.5
    norm = d[:, None] * A * d[None, :]  # D^-1/2 (A_in + I) D^-1/2, D the in-degree + 1
    targets = rng.permutation(N)[:25]
    block = NeighborSampler(digraph, N, [-1]).block(targets, -1)
    got = gcn_block_adjacency(block, np.float64).to_dense()
    np.testing.assert_allclose(got, norm[np.ix_(targets, block.n_id)], atol=1e-15)


def test_gcn_block_is_unbiased_under_sampling(digraph):
    """E[Â_block] = Â: each neighbour is kept with probability k/deg and scaled by deg/k."""
    sampler, rng, draws = NeighborSampler(digraph, N, [2]), np.random.default_rng(5), 1500
    total = np.zeros((N, N))
    for _ in range(draws):
        b = sampler.block(np.arange(N), 2, rng)
        A = gcn_block_adjacency(b, np.float64)
        np.add.at(total, (A.row, b.n_id[A.col]), A.values.data)  # targets are 0..N-1
    A_in = dense_in_adjacency(digraph, N)
    d = (A_in.sum(axis=1) + 1) ** -0.5
    want = d[:, None] * (A_in + np.eye(N)) * d[None, :]
    # one draw of a neighbour entry is a·deg/k with probability k/deg: variance a²(deg/k − 1)
    deg = A_in.sum(axis=1, keepdims=True)
    sd = want * (A_in > 0) * np.sqrt(np.maximum(deg / np.clip(deg, 1, 2) - 1, 0) / draws)
    assert np.all(np.abs(total / draws - want) <= 5.5 * sd + 1e-12)
    assert np.abs(total / draws - want).max() > 0  # sampled, not exact


def test_sage_block_mean_is_the_mean_over_sampled_neighbours(digraph, rng):
    block = NeighborSampler(digraph, N, [3]).block(np.arange(N), 3, rng)
    dense = sage_block_mean(block, np.float64).to_dense()
    k = block.num_sampled
    np.testing.assert_allclose(dense.sum(axis=1), (k > 0).astype(float))
    assert np.all(dense[block.row, block.col] == 1.0 / k[block.row])
    full = NeighborSampler(digraph, N, [-1]).block(np.arange(N), -1)
    np.testing.assert_allclose(sage_block_mean(full, np.float64).to_dense()[:, np.argsort(full.n_id)],
                               mean_adjacency(digraph, N, np.float64).to_dense(), atol=1e-15)


# ---------------------------------------------------------------- mini-batch = full batch


def undirected_graph():
    g = sbm(120, num_classes=3, avg_degree=6, num_features=20, seed=3)
    x = g.x.toarray().astype(np.float64) + 0.1
    return g.edge_index, x, g.y, g.num_classes


MODELS = {
    "gcn": lambda f, c: GCN(f, 8, c, layers=2, dropout=0.0, rng=np.random.default_rng(1),
                            dtype=np.float64),
    "sage": lambda f, c: GraphSAGE(f, 8, c, layers=3, dropout=0.0, normalize=True,
                                   rng=np.random.default_rng(1), dtype=np.float64),
    "gat": lambda f, c: GAT(f, 4, c, heads=2, layers=2, dropout=0.0, attn_dropout=0.0,
                            rng=np.random.default_rng(1), dtype=np.float64),
}


def loss_and_grads(model, run) -> tuple[float, dict[str, np.ndarray]]:
    model.zero_grad()
    loss = run()
    loss.backward()
    return loss.item(), {name: p.grad.copy() for name, p in model.named_parameters()}


def directed_graph():
    edge_index = random_digraph(np.random.default_rng(7), N, 300)
    return edge_index, np.random.default_rng(2).standard_normal((N, 5)), np.arange(N) % 3, 3


GRAPHS = {"undirected": undirected_graph, "directed": directed_graph}


@pytest.mark.parametrize(("kind", "graph"), [("gcn", "undirected"), ("gcn", "directed"),
                                             ("sage", "undirected"),
                                             ("sage", "directed"), ("gat", "directed")])
def test_full_neighbourhood_in_one_batch_equals_full_batch(kind, graph):
    """Fanouts -1 and one batch of all training nodes: the same loss and the same gradient of
    every parameter as full-batch training, on an undirected graph and on a directed one
    (messages flow source → target, normalised by the target's in-degree, in both paths)."""
    edges, feats, labels, classes = GRAPHS[graph]()
    n = len(feats)
    model = MODELS[kind](feats.shape[1], classes)
    train = np.random.default_rng(0).permutation(n)[: n // 3]
    full = loss_and_grads(model, lambda: F.cross_entropy(model(Tensor(feats), edges),
                                                         labels, train))
    batch = NeighborSampler(edges, n, [-1] * len(model.convs)).sample(train, None)
    x = gather_rows(feats, batch.n_id)
    mini = loss_and_grads(model, lambda: F.cross_entropy(forward_blocks(model, x, batch.blocks),
                                                         labels[batch.seeds]))
    assert np.array_equal(batch.seeds, train)
    assert mini[0] == pytest.approx(full[0], rel=1e-12)
    for name, g in full[1].items():
        np.testing.assert_allclose(mini[1][name], g, rtol=1e-9, atol=1e-12, err_msg=name)


# ---------------------------------------------------------------- gradcheck on a block


@pytest.mark.parametrize("layer", ["sage", "gat", "gcn"])
def test_gradcheck_of_a_layer_on_a_sampled_block(layer, digraph, rng):
    block = NeighborSampler(digraph, N, [2]).block(rng.permutation(N)[:6], 2, rng)
    assert block.shape[1] > block.shape[0]  # rectangular: sources beyond the targets
    conv = {"sage": lambda: SAGEConv(3, 2, normalize=True, rng=rng, dtype=np.float64),
            "gat": lambda: GATConv(3, 2, heads=2, rng=rng, dtype=np.float64),
            "gcn": lambda: GCN(3, 2, 2, layers=1, rng=rng, dtype=np.float64).convs[0]}[layer]()
    names = [name for name, _ in conv.named_parameters()]

    def fn(x, *params):
        for name, p in zip(names, params):
            setattr(conv, name, p)
        return on_block(conv, block)(x)

    params = [Tensor(rng.standard_normal(p.shape) * 0.5, requires_grad=True)
              for p in conv.parameters()]
    x = Tensor(rng.standard_normal((block.shape[1], 3)), requires_grad=True)
    assert gradcheck(fn, [x, *params]).passed


# ---------------------------------------------------------------- layer-wise inference


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("chunk", [7, 1000])
def test_layerwise_inference_equals_the_full_forward(kind, chunk):
    edge_index, x, _, c = undirected_graph()
    model = MODELS[kind](x.shape[1], c)
    sampler = NeighborSampler(edge_index, len(x), [3] * len(model.convs))
    sparse_x = SparseTensor.from_dense(x)
    got = layerwise_inference(model, sparse_x, sampler, chunk_size=chunk)
    assert model.training  # restored
    want = model.eval()(Tensor(x), edge_index).data
    np.testing.assert_allclose(got.data, want, rtol=1e-10, atol=1e-12)


def test_block_errors_are_one_clear_line(digraph):
    sampler = NeighborSampler(digraph, N, [2])
    batch = sampler.sample(np.arange(5), np.random.default_rng(0))
    x = gather_rows(np.ones((N, 4)), batch.n_id)
    with pytest.raises(ShapeError, match="has 2 layers but the batch has 1 blocks"):
        forward_blocks(GraphSAGE(4, 3, 2, rng=np.random.default_rng(0)), x, batch.blocks)
    with pytest.raises(HyperparameterError, match="MLP has no graph layers"):
        forward_blocks(MLP(4, 3, 2), x, batch.blocks)
    keyed = GraphSAGE(4, 3, 2, layers=1, rng=np.random.default_rng(0))
    keyed.keyed_masks = True
    with pytest.raises(HyperparameterError, match="keyed dropout keys masks by whole-graph rows"):
        forward_blocks(keyed, x, batch.blocks)
    with pytest.raises(HyperparameterError, match="learned edge weights rebuild"):
        forward_blocks(GCN(4, 3, 2, edge_index=digraph, learn_edge_weight=True), x, batch.blocks)
