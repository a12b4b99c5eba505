"""GAT with edge features in its logits (PyG's ``edge_dim``): the layer against a reference
written here pair by pair, PyG's self loops (the mean of a node's other in-edges, an existing
loop replaced), and the graph classifier's `gat_edge` kind reading a batch's bonds."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.gat import EdgeGATConv, GATConv
from mgsparse.nn.graphnet import GraphBatch, GraphClassifier


def reference(layer: GATConv, x: np.ndarray, edges: np.ndarray, attr: np.ndarray) -> np.ndarray:
    """PyG's GATConv(edge_dim) on one graph, by its definition, target by target."""
    H, C = layer.heads, layer.out_features
    W, We = layer.weight.data, layer.lin_edge.data
    a_s, a_d, a_e = layer.att_src.data, layer.att_dst.data, layer.att_edge.data
    h = (x @ W).reshape(len(x), H, C)
    keep = edges[0] != edges[1]
    src, dst, attr = edges[0][keep], edges[1][keep], attr[keep]
    out = np.zeros((len(x), H, C))
    for i in range(len(x)):
        incoming = np.flatnonzero(dst == i)
        loop = attr[incoming].mean(axis=0) if len(incoming) else np.zeros(attr.shape[1])
        js = [*src[incoming], i]
        feats = [*attr[incoming], loop]
        for head in range(H):
            logits = np.array([a_d[head] @ h[i, head] + a_s[head] @ h[j, head]
                               + a_e[head] @ (e @ We).reshape(H, C)[head]
                               for j, e in zip(js, feats)])
            logits = np.where(logits > 0, logits, 0.2 * logits)
            alpha = np.exp(logits - logits.max())
            alpha /= alpha.sum()
            out[i, head] = sum(a * h[j, head] for a, j in zip(alpha, js))
    return out.reshape(len(x), H * C) + layer.bias.data


@pytest.fixture
def graph():
    rng = np.random.default_rng(3)
    edges = np.array([[0, 1, 2, 3, 1, 2, 4], [1, 0, 1, 1, 2, 3, 0]])  # node 5: no in-edges
    return rng.standard_normal((6, 5)), edges, rng.standard_normal((7, 3))


def test_the_edge_features_join_the_logits_as_pyg_defines(graph):
    x, edges, attr = graph
    layer = GATConv(5, 4, heads=2, edge_dim=3, rng=np.random.default_rng(0), dtype=np.float64)
    layer.bias.data[:] = np.linspace(-1, 1, 8)
    out = layer(Tensor(x), edges, attr).data
    np.testing.assert_allclose(out, reference(layer, x, edges, attr), atol=1e-12)
    plain = GATConv(5, 4, heads=2, rng=np.random.default_rng(0), dtype=np.float64)
    assert np.abs(plain(Tensor(x), edges).data - out).max() > 1e-3  # the bonds change α


def test_an_existing_self_loop_gives_way_to_the_mean_of_the_in_edges(graph):
    x, edges, attr = graph
    layer = GATConv(5, 4, heads=2, edge_dim=3, rng=np.random.default_rng(1), dtype=np.float64)
    looped = np.concatenate([edges, [[1], [1]]], axis=1)
    out = layer(Tensor(x), looped, np.concatenate([attr, [[9.0, -9.0, 9.0]]])).data
    np.testing.assert_allclose(out, layer(Tensor(x), edges, attr).data, atol=1e-12)


def test_edge_features_of_the_wrong_shape_or_none_are_refused(graph):
    x, edges, attr = graph
    layer = GATConv(5, 4, heads=2, edge_dim=3, rng=np.random.default_rng(0))
    with pytest.raises(ShapeError, match=r"edge_attr must be \(7, 3\) for 7 edges, got \(7, 2\)"):
        layer(Tensor(x.astype(np.float32)), edges, attr[:, :2])
    with pytest.raises(ShapeError, match="reads edge features; edge_attr is None"):
        layer(Tensor(x.astype(np.float32)), edges)


def test_a_graph_classifier_of_gat_edge_reads_the_batchs_bonds(graph):
    x, edges, attr = graph
    model = GraphClassifier(5, 8, 2, layers=2, dropout=0.0, layer=EdgeGATConv, edge_dim=3,
                            rng=np.random.default_rng(0), dtype=np.float64, heads=2).eval()
    assert all(type(c) is EdgeGATConv and c.edge_dim == 3 for c in model.convs)
    batch = np.array([0, 0, 0, 1, 1, 1])
    one = model(GraphBatch(x, edges, batch, 2, dtype=np.float64, edge_attr=attr)).data
    other = model(GraphBatch(x, edges, batch, 2, dtype=np.float64, edge_attr=-attr)).data
    assert np.abs(one - other).max() > 1e-4
    with pytest.raises(HyperparameterError, match="EdgeGATConv reads edge features"):
        GraphClassifier(5, 8, 2, layer=EdgeGATConv, edge_dim=0)


def test_a_block_with_every_in_edge_gives_the_whole_graphs_rows(graph):
    """On a sampled block at fanout -1 the softmax runs over the same in-edges, the self
    loop reads the same mean: the targets' rows are the whole graph's."""
    from mgsparse.data.sampler import NeighborSampler

    x, edges, attr = graph
    layer = GATConv(5, 4, heads=2, edge_dim=3, rng=np.random.default_rng(2), dtype=np.float64)
    whole = layer(Tensor(x), edges, attr).data
    block = NeighborSampler(edges, 6, [-1], edge_attr=attr).block(np.array([1, 0, 3]), -1,
                                                                  np.random.default_rng(0))
    out = layer.on_block(block)(Tensor(x[block.n_id])).data
    np.testing.assert_allclose(out, whole[[1, 0, 3]], atol=1e-12)
    bare = NeighborSampler(edges, 6, [-1]).block(np.array([1]), -1, np.random.default_rng(0))
    with pytest.raises(ShapeError, match="this block carries no edge_attr"):
        layer.on_block(bare)
