"""Models on sampled blocks: full-neighbourhood mini-batch equal to full batch (loss and every
gradient), exact layer-wise inference, one-line errors. Each layer's own block operand is tested
beside the layer (test_gcn.py, test_sage.py), and every layer's block form is held to the
contract in test_layer_contract.py."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor
from mgsparse.data import sbm
from mgsparse.data.sampler import NeighborSampler
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import GAT, GCN, MLP, GraphSAGE
from mgsparse.nn import functional as F
from mgsparse.nn.block import bind_blocks, forward_blocks, gather_rows, layerwise_inference
from mgsparse.sparse import SparseTensor
from tests.data.test_sampler import random_digraph

N = 60


@pytest.fixture
def digraph(rng):
    return random_digraph(rng, N, 300)


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
    with pytest.raises(HyperparameterError, match="learned edge weights rebuild the whole graph's "
                       "Â every step; set train.receptive_field: false and train.batch_size: null"):
        forward_blocks(GCN(4, 3, 2, edge_index=digraph, learn_edge_weight=True), x, batch.blocks)
    with pytest.raises(ShapeError, match="GCN has 2 layers but the receptive field has 1 blocks"):
        bind_blocks(GCN(4, 3, 2), batch.blocks, "the receptive field")
    assert len(bind_blocks(GCN(4, 3, 2, layers=1), batch.blocks)) == 1
