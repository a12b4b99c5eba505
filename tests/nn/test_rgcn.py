"""The R-GCN layer against a dense per-relation reference, and its normalisation by hand."""

from __future__ import annotations

import numpy as np

from mgsparse.checks.kge import dense_rgcn
from mgsparse.engine import Tensor
from mgsparse.nn.rgcn import RGCNConv, relation_operand


def test_the_operand_divides_by_each_relations_in_degree():
    """Node 0 receives two edges of relation 0 (from 1 and 2) and one of relation 1 (from 2):
    weights 1/2, 1/2 and 1, at columns j·R + r."""
    edges = np.array([[1, 2, 2], [0, 0, 0]])
    m = relation_operand(edges, np.array([0, 0, 1]), num_nodes=3, num_relations=2,
                         dtype=np.float64)
    dense = m.to_dense()
    assert dense.shape == (3, 6)
    assert dense[0].tolist() == [0, 0, 0.5, 0, 0.5, 1.0]
    assert not dense[1:].any()


def test_the_layer_equals_a_dense_sum_over_relations_and_its_gradients_too():
    rng = np.random.default_rng(3)
    n, r = 7, 4
    edges, types = rng.integers(0, n, (2, 30)), rng.integers(0, r, 30)
    for bases in (None, 2):
        layer = RGCNConv(5, 3, r, bases, rng=rng, dtype=np.float64)
        x = rng.normal(size=(n, 5))
        xs, xd = Tensor(x, requires_grad=True), Tensor(x, requires_grad=True)
        sparse = layer(xs, relation_operand(edges, types, n, r, np.float64))
        grads = []
        sparse.sum().backward()
        grads.append([xs.grad.copy()] + [p.grad.copy() for p in layer.parameters()])
        layer.zero_grad()
        dense = dense_rgcn(layer, xd, edges, types)
        dense.sum().backward()
        grads.append([xd.grad.copy()] + [p.grad.copy() for p in layer.parameters()])
        assert np.allclose(sparse.data, dense.data, atol=1e-12)
        assert all(np.allclose(a, b, atol=1e-12) for a, b in zip(*grads))
