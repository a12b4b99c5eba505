"""Learnable GCN edge weights: gradients through gcn_norm's degrees, Â rebuilt every step, and
a planted partition on which the weights of edges between classes are learned down."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.checks import CASES
from mgsparse.config import load_config
from mgsparse.data.synthetic import sbm
from mgsparse.errors import HyperparameterError
from mgsparse.nn import functional as F
from mgsparse.nn.gcn import GCN, normalized_adjacency
from mgsparse.optim import Adam
from mgsparse.run import fit, make_task

KARATE = Path(__file__).resolve().parents[2] / "configs" / "karate.yaml"

# Path 0-1-2 plus the edge 1-3, both directions.
EDGE_INDEX = np.array([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
N = 4


def dense_norm_adj(weights: np.ndarray) -> np.ndarray:
    """D^-1/2 (A_w + I) D^-1/2 with A_w[t, s] = w of edge s → t (messages flow to the target)."""
    A = np.eye(N)
    A[EDGE_INDEX[1], EDGE_INDEX[0]] += weights
    d = A.sum(axis=1) ** -0.5
    return d[:, None] * A * d[None, :]


def test_gcnconv_gradcheck_with_learned_edge_weights():
    """x, W, b and one weight per edge, the last through the degree normalisation."""
    case = CASES["nn.gcn_conv_edge_weight"]
    result = gradcheck(case.fn, case.inputs("small", seed=1))
    assert [c.shape for c in result.inputs] == [(7, 4), (4, 3), (3,), (16,)]
    assert result.max_abs_err < 1e-7


def test_edge_weight_gradient_includes_the_degree_terms(rng):
    """dL/dw equals central differences of the dense formula for Â."""
    w = rng.uniform(0.5, 1.5, EDGE_INDEX.shape[1])
    G = rng.standard_normal((N, N))  # L = Σ G ⊙ Â
    ew = Tensor(w, requires_grad=True)
    norm_adj = normalized_adjacency(EDGE_INDEX, N, ew, dtype=np.float64)
    (norm_adj.to_tensor() * Tensor(G)).sum().backward()
    eps, expected = 1e-6, np.zeros_like(w)
    for k in range(len(w)):
        step = np.zeros_like(w)
        step[k] = eps
        expected[k] = ((dense_norm_adj(w + step) - dense_norm_adj(w - step)) * G).sum() / (2 * eps)
    np.testing.assert_allclose(ew.grad, expected, atol=1e-8)
    # a weight's gradient is not just G at its own entry: the degrees spread it over the row
    own = G[EDGE_INDEX[1], EDGE_INDEX[0]] * dense_norm_adj(w)[EDGE_INDEX[1], EDGE_INDEX[0]] / w
    assert np.abs(ew.grad - own).max() > 1e-3


def test_gcn_starts_as_the_plain_gcn_and_rebuilds_a_hat_each_step(rng):
    x = Tensor(rng.standard_normal((N, 3)).astype(np.float32))
    y = np.array([0, 1, 0, 1])
    learned = GCN(3, 8, 2, dropout=0.0, rng=np.random.default_rng(0),
                  edge_index=EDGE_INDEX, learn_edge_weight=True)
    plain = GCN(3, 8, 2, dropout=0.0, rng=np.random.default_rng(0))
    assert learned.edge_weight.shape == (6,) and np.all(learned.edge_weight.data == 1)
    assert [n for n, _ in learned.named_parameters()][-1] == "edge_weight"
    before = learned(x, None).data
    np.testing.assert_allclose(before, plain(x, normalized_adjacency(EDGE_INDEX, N)).data,
                               atol=1e-6)
    optimizer = Adam([learned.edge_weight], lr=0.1)  # only the edge weights move
    F.cross_entropy(learned(x, None), y).backward()
    assert np.abs(learned.edge_weight.grad).max() > 0
    optimizer.step()
    assert np.abs(learned(x, None).data - before).max() > 1e-4  # Â was not cached


def test_learning_edge_weights_needs_the_edges():
    with pytest.raises(HyperparameterError, match="learn_edge_weight needs the graph's edge_index"):
        GCN(3, 8, 2, learn_edge_weight=True)


def test_config_flag_builds_and_trains_a_learned_weight_gcn():
    config = load_config(KARATE, ("model.learn_edge_weight=true", "train.epochs=20",
                                  "monitor.memory=false"))
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    assert model.edge_weight.shape == (task.edge_index.shape[1],) == (156,)
    result = fit(config, task)
    assert result.runs[0].rows[-1].epoch == 20
    plain = make_task(load_config(KARATE)).build_model(np.random.default_rng(0))
    assert plain.edge_weight is None


def test_edges_between_classes_are_learned_down():
    """A planted partition with half its edges between classes; with half the nodes labelled,
    the weights of inter-class edges end clearly below those of intra-class edges."""
    graph = sbm(num_nodes=300, num_classes=3, avg_degree=6, homophily=0.5, num_features=30,
                feature_signal=0.6, seed=0)
    inter = graph.y[graph.edge_index[0]] != graph.y[graph.edge_index[1]]
    assert 0.4 < inter.mean() < 0.6
    rng = np.random.default_rng(0)
    x = SparseTensor.from_scipy(graph.x)
    model = GCN(x.shape[1], 16, graph.num_classes, dropout=0.0, rng=rng,
                edge_index=graph.edge_index, learn_edge_weight=True)
    optimizer = Adam(model.parameters(), lr=0.02)
    train_idx = rng.permutation(graph.num_nodes)[:graph.num_nodes // 2]
    for _ in range(150):
        loss = F.cross_entropy(model(x, None), graph.y, train_idx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    weight = model.edge_weight.data
    intra_mean, inter_mean = weight[~inter].mean(), weight[inter].mean()
    assert intra_mean - inter_mean > 0.2, (intra_mean, inter_mean)
    assert inter_mean < 1.0 < intra_mean  # down from the initial 1 and up from it
