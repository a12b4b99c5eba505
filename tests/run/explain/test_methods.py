"""Each explanation method on a hand-made graph whose answer is known: node 0's class is
decided by the one edge 1 → 0 (node 1 alone carries the signal feature), and the subgraph
computation equals the whole graph's."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.nn import GCN
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.run.explain.field import computation, in_hops
from mgsparse.run.explain.methods import METHODS, Options, penalty, predict, scores
from mgsparse.run.explain.scores import auc, fidelity, sparsity

# 0 <- 1 (signal), 0 <- 2, 0 <- 3 (no signal); 4 -> 1 two hops out; 5 isolated
# (the signal edge listed last of node 0's: a method that scores nothing cannot pass by ties)
EDGES = np.array([[2, 3, 1, 4, 0, 0, 0, 1], [0, 0, 0, 1, 1, 2, 3, 4]])
X = np.array([[0, 1], [1, 0], [0, 1], [0, 1], [0, 1], [0, 1]], dtype=np.float64)


def _model() -> GCN:
    """One GCN layer, class 0's logit 8 · (Â X)[:, 0] − 1: only messages from node 1 raise it."""
    model = GCN(2, 4, 2, layers=1, dropout=0.0, dtype=np.float64).eval()
    model.convs[0].weight.data[...] = [[8.0, 0.0], [0.0, 0.0]]
    model.convs[0].bias.data[...] = [-1.0, 0.0]
    return model


def _comp(center=0, hops=1):
    adj = normalized_adjacency(EDGES, 6, dtype=np.float64)
    return computation(EDGES, adj, Tensor(X), center, hops, np.float64)


@pytest.mark.parametrize("method", METHODS)
def test_each_method_finds_the_one_edge_and_the_one_feature(method):
    model, comp = _model(), _comp()
    cls = predict(model, comp)
    assert cls == 0
    edge, feat = scores(method, model, comp, cls, Options(epochs=200, lr=0.05))
    sources = comp.nodes[comp.col]
    truth = sources == 1
    assert edge[truth].min() > edge[~truth].max(), (method, edge)
    assert feat[0] > feat[1], (method, feat)
    assert auc(truth, edge) == 1.0
    assert fidelity(model, comp, edge, cls, k=1) == (1.0, 0.0)  # necessary and sufficient
    assert all(p.requires_grad for p in model.parameters())  # flags restored


def test_the_computation_subgraph_is_the_receptive_field():
    dist = in_hops(EDGES, 6, 0, 2)
    assert dist.tolist() == [0, 1, 1, 1, 2, -1]
    comp = _comp(0, 1)
    assert comp.nodes.tolist() == [0, 1, 2, 3] and comp.num_edges == 3  # edges into node 0
    comp2 = _comp(0, 2)
    assert set(comp2.nodes.tolist()) == {0, 1, 2, 3, 4} and comp2.num_edges == 7


def test_subgraph_logits_are_the_whole_graphs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 2))
    model = GCN(2, 4, 3, layers=2, dropout=0.0, rng=rng, dtype=np.float64).eval()
    adj = normalized_adjacency(EDGES, 6, dtype=np.float64)
    whole = model(Tensor(x), adj).data
    for center in range(6):
        comp = computation(EDGES, adj, Tensor(x), center, 2, np.float64)
        sub = model(comp.features(), comp.operand()).data
        np.testing.assert_allclose(sub[0], whole[center], atol=1e-12)


def test_the_penalty_gradient_is_the_engines():
    rng = np.random.default_rng(1)
    z = rng.standard_normal(7) * 3
    hard = np.array([1, 1, 0, 1, 1, 0, 1], bool)
    for reduce, size, ent in (("sum", 0.005, 1.0), ("mean", 1.0, 0.1)):
        value, grad = penalty(z, hard, size, ent, reduce)
        t = Tensor(z, requires_grad=True)
        s = t.sigmoid()[np.flatnonzero(hard)]
        h = -(s * s.log() + (1 - s) * (1 - s).log())
        p = size * (s.sum() if reduce == "sum" else s.mean()) + ent * h.mean()
        p.backward()
        assert value == pytest.approx(float(p.data), rel=1e-12)
        np.testing.assert_allclose(grad, t.grad, rtol=1e-9, atol=1e-15)


def test_options_refuse_non_positive_settings_and_unknown_methods():
    with pytest.raises(ConfigError, match="--steps must be >= 1"):
        Options(steps=0).check()
    with pytest.raises(ConfigError, match="--edge-size must be > 0"):
        Options(edge_size=-1.0).check()
    with pytest.raises(ConfigError, match="unknown method 'grad'"):
        scores("grad", _model(), _comp(), 0, Options())
    with pytest.raises(ConfigError, match="node 9 is outside"):
        _comp(9)


def test_sparsity():
    assert sparsity(np.array([1.0, 0.1, 0.1, 0.1])) == 0.75
    assert sparsity(np.ones(4)) == 0.0


def test_reverse_pairs_each_edge_with_its_reverse_and_a_symmetric_mask_agrees():
    comp = _comp(0, 2)
    back = comp.reverse()
    pairs = {(int(r), int(c)) for r, c in zip(comp.row, comp.col)}
    for e, b in enumerate(back):
        if (int(comp.col[e]), int(comp.row[e])) in pairs:
            assert (comp.row[b], comp.col[b]) == (comp.col[e], comp.row[e])
        else:
            assert b == e
    model = _model()
    edge, _ = scores("gnnexplainer", model, comp, 0, Options(symmetric=True, epochs=20))
    np.testing.assert_allclose(edge, edge[back])
