"""GINConv: the sum adjacency and the layer by hand on a 4-node graph, its MLP against numpy,
the whole graph against blocks (all in-edges, and the deg/k-scaled sampled estimate),
gradients on a rectangular block, ε as a Parameter or a Buffer, caching and errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.data.sampler import NeighborSampler
from mgsparse.engine import no_grad
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import BatchNorm1d, GINConv, Identity, Linear, ReLU, Sequential
from mgsparse.nn.block import block_support
from mgsparse.nn.gin import gin_block_adjacency, sum_adjacency

# 4 nodes, row 0 the source, row 1 the target: 0→1 listed twice, 2→1, 3→0, 1→2; node 3 has
# no in-edge (it only sends).
EDGE_INDEX = np.array([[0, 0, 2, 3, 1],
                       [1, 1, 1, 0, 2]])
N = 4
A = np.array([[0, 0, 0, 1],   # A[i, j] = edges j → i
              [2, 0, 1, 0],
              [0, 1, 0, 0],
              [0, 0, 0, 0]], dtype=float)
X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0], [-3.0, 4.0]])


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(3)


def dense_gin(conv: GINConv, x: np.ndarray, adj: np.ndarray = A) -> np.ndarray:
    """MLP((1 + ε)·x + A·x) in numpy, the MLP Linear → BatchNorm1d → ReLU → Linear (batch
    statistics in training, running ones in eval)."""
    lin1, bn, _, lin2 = conv.mlp
    eps = conv.eps.data[0]
    z = (adj @ x + (1 + eps) * x[:adj.shape[0]]) @ lin1.weight.data + lin1.bias.data
    mean, var = ((z.mean(axis=0), z.var(axis=0)) if bn.training
                 else (bn.running_mean.data, bn.running_var.data))
    z = (z - mean) / np.sqrt(var + bn.eps) * bn.weight.data + bn.bias.data
    return np.maximum(z, 0) @ lin2.weight.data + lin2.bias.data


def randomised(conv: GINConv, rng) -> GINConv:
    """Non-trivial biases, BatchNorm affine and running statistics."""
    for p in conv.parameters():
        p.data[...] = rng.standard_normal(p.shape) * 0.7
    bn = conv.mlp[1]
    bn.running_mean.data[:] = rng.standard_normal(bn.num_features)
    bn.running_var.data[:] = rng.uniform(0.5, 2.0, bn.num_features)
    return conv


def test_sum_adjacency_counts_each_in_edge():
    adj = sum_adjacency(EDGE_INDEX, N, dtype=np.float64)
    np.testing.assert_array_equal(adj.to_dense(), A)
    assert adj.is_coalesced() and adj.nnz == 4  # the repeated edge is one entry of value 2


def test_the_layer_by_hand_with_an_identity_mlp():
    conv = GINConv(2, 2, mlp=Identity(), eps=0.5, dtype=np.float64)
    want = [[-1.5, 4.0],   # 1.5·x0 + x3
            [4.0, 0.5],    # 1.5·x1 + 2·x0 + x2
            [3.0, -0.5],   # 1.5·x2 + x1
            [-4.5, 6.0]]   # 1.5·x3, no in-edge
    np.testing.assert_allclose(conv(Tensor(X), EDGE_INDEX).data, want, atol=1e-15)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("sizes", [(2, 5, 3), (6, 3, 2)], ids=["sum-first", "linear-first"])
def test_the_default_mlp_matches_numpy(rng, training, sizes):
    """Linear → BatchNorm1d → ReLU → Linear; with F_in > hidden the first Linear runs
    before the sum (same numbers up to rounding)."""
    f_in, hidden, f_out = sizes
    conv = randomised(GINConv(f_in, f_out, hidden=hidden, train_eps=True, rng=rng,
                              dtype=np.float64), rng).train(training)
    x = rng.standard_normal((N, f_in))
    np.testing.assert_allclose(conv(Tensor(x), EDGE_INDEX).data, dense_gin(conv, x), atol=1e-12)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_a_norm_after_the_layer_runs_with_its_mlp(rng, training):
    """conv(x, adj, norm, relu=True) is relu(norm(conv(x, adj))): in training the very same
    ops; in inference the last Linear and the norm fold into one product (rounding only)."""
    conv = randomised(GINConv(2, 3, hidden=4, rng=rng), rng)
    norm = BatchNorm1d(3)
    norm.weight.data[:], norm.bias.data[:] = rng.uniform(0.5, 2, 3), rng.normal(size=3)
    norm.running_mean.data[:], norm.running_var.data[:] = rng.normal(size=3), rng.uniform(1, 2, 3)
    x = Tensor(X.astype(np.float32))
    for m in (conv, norm):
        m.train(training)
    with no_grad():
        fused = conv(x, EDGE_INDEX, norm=norm, relu=True)  # training: batch statistics, so
        apart = norm(conv(x, EDGE_INDEX), relu=True)  # the moved running ones do not count
    z = dense_gin(conv, X)
    mean, var = ((z.mean(axis=0), z.var(axis=0)) if training
                 else (norm.running_mean.data, norm.running_var.data))
    want = np.maximum((z - mean) / np.sqrt(var + norm.eps) * norm.weight.data
                      + norm.bias.data, 0)
    np.testing.assert_allclose(fused.data, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(apart.data, want, rtol=1e-4, atol=1e-5)
    if training:
        np.testing.assert_array_equal(fused.data, apart.data)


def test_sparse_features_give_the_dense_result(rng):
    conv = randomised(GINConv(5, 2, hidden=6, rng=rng, dtype=np.float64), rng)
    x = rng.standard_normal((N, 5)) * (rng.random((N, 5)) < 0.5)
    out = conv(SparseTensor.from_dense(x), EDGE_INDEX)
    np.testing.assert_allclose(out.data, conv(Tensor(x), EDGE_INDEX).data, atol=1e-12)


@pytest.mark.parametrize("targets", [[2, 0], [3], [1, 2, 3, 0]])
def test_whole_graph_equals_the_block_at_fanout_minus_one_in_eval(rng, targets):
    conv = randomised(GINConv(2, 3, hidden=4, train_eps=True, rng=rng, dtype=np.float64),
                      rng).eval()
    block = NeighborSampler(EDGE_INDEX, N, [-1]).block(np.array(targets), -1)
    out = conv.on_block(block)(Tensor(X[block.n_id]))
    np.testing.assert_allclose(out.data, conv(Tensor(X), EDGE_INDEX).data[targets], atol=1e-14)
    assert np.all(gin_block_adjacency(block, np.float64).values.data == 1.0)


def test_whole_graph_equals_the_block_of_every_node_in_training(rng):
    """In training BatchNorm1d normalises over the rows it is given: every node as a target
    (in another order) gives it the same rows, so the outputs agree row for row."""
    conv = randomised(GINConv(2, 3, hidden=4, rng=rng, dtype=np.float64), rng)
    targets = np.array([2, 0, 3, 1])
    block = NeighborSampler(EDGE_INDEX, N, [-1]).block(targets, -1)
    out = conv.on_block(block)(Tensor(X[block.n_id]))
    np.testing.assert_allclose(out.data, conv(Tensor(X), EDGE_INDEX).data[targets], atol=1e-13)


def random_graph(rng, n=12, e=40) -> np.ndarray:
    keys = rng.choice(n * n, e, replace=False)
    return np.stack([keys // n, keys % n])


def test_gradcheck_of_inputs_weights_and_eps_on_a_rectangular_sampled_block(rng):
    edges = random_graph(rng)
    block = NeighborSampler(edges, 12, [2]).block(np.arange(5), 2, rng)
    t, s = block.shape
    assert t == 5 and s > t and np.any(block.num_sampled < block.degree[:t])  # scaled rows
    conv = GINConv(3, 2, hidden=4, eps=0.2, train_eps=True, rng=rng, dtype=np.float64)
    names = [n for n, _ in conv.named_parameters()]
    assert names == ["eps", "mlp.0.weight", "mlp.0.bias", "mlp.1.weight", "mlp.1.bias",
                     "mlp.3.weight", "mlp.3.bias"]

    def fn(x, eps, w1, b1, gamma, beta, w2, b2):
        conv.eps = eps
        conv.mlp[0].weight, conv.mlp[0].bias = w1, b1
        conv.mlp[1].weight, conv.mlp[1].bias = gamma, beta
        conv.mlp[3].weight, conv.mlp[3].bias = w2, b2
        return conv.on_block(block)(x)

    inputs = [Tensor(rng.standard_normal((s, 3)), requires_grad=True)]
    inputs += [Tensor(rng.standard_normal(p.shape) * 0.7, requires_grad=True)
               for _, p in conv.named_parameters()]
    result = gradcheck(fn, inputs)
    assert result.passed and result.max_abs_err < 1e-7
    assert [c.shape for c in result.inputs][:2] == [(s, 3), (1,)]


def test_a_sampled_block_is_an_unbiased_estimate_of_the_sum(rng):
    """Node 0 has 5 in-edges, 2 sampled: each kept edge weighs 5/2, and the average over many
    blocks approaches the full sum Σ_j x_j."""
    edges = np.array([[1, 2, 3, 4, 5], [0, 0, 0, 0, 0]])
    x = rng.standard_normal((6, 3))
    sampler = NeighborSampler(edges, 6, [2])
    estimates = []
    for _ in range(4000):
        block = sampler.block(np.array([0]), 2, rng)
        adj = gin_block_adjacency(block, np.float64)
        assert np.all(adj.values.data == 2.5)
        estimates.append((adj.to_dense() @ x[block.n_id])[0])
    np.testing.assert_allclose(np.mean(estimates, axis=0), x[1:].sum(axis=0), atol=0.1)


def test_eps_is_a_parameter_when_trained_and_a_buffer_otherwise():
    fixed = GINConv(2, 2, eps=0.25)
    assert "eps" not in dict(fixed.named_parameters())
    assert [n for n, _ in fixed.named_buffers()] == ["eps", "mlp.1.running_mean",
                                                      "mlp.1.running_var"]
    assert fixed.state_dict()["eps"].tolist() == [0.25]
    trained = GINConv(2, 2, train_eps=True, rng=np.random.default_rng(0))  # seeded: some draws give a relu-dead layer, eps.grad 0
    assert "eps" in dict(trained.named_parameters()) and trained.eps.requires_grad
    x = Tensor(X, dtype=np.float32)
    trained.eval()(x, EDGE_INDEX).sum().backward()
    assert trained.eps.grad.shape == (1,) and trained.eps.grad[0] != 0


def test_the_sum_adjacency_is_cached_per_graph():
    conv = GINConv(2, 2)
    first = conv.sum_adj(EDGE_INDEX, N)
    assert conv.sum_adj(EDGE_INDEX.copy(), N) is first
    assert conv.sum_adj(EDGE_INDEX[:, :3], N) is not first
    assert GINConv(2, 2, cached=False).sum_adj(EDGE_INDEX, N) is not first


def test_a_model_of_gin_layers_can_run_on_blocks():
    convs = [GINConv(2, 2), GINConv(2, 2)]
    assert block_support(SimpleNamespace(convs=convs)) is None


def test_a_custom_mlp_is_used_as_given(rng):
    mlp = Sequential(Linear(2, 3, rng=rng, dtype=np.float64), ReLU())
    conv = GINConv(2, 3, mlp=mlp, dtype=np.float64)
    assert conv.mlp is mlp
    h = A @ X + X
    np.testing.assert_allclose(conv(Tensor(X), EDGE_INDEX).data,
                               np.maximum(h @ mlp[0].weight.data, 0), atol=1e-12)
    assert isinstance(GINConv(2, 3).mlp[1], BatchNorm1d)


def test_errors_are_one_line(rng):
    with pytest.raises(HyperparameterError, match="GINConv needs positive sizes, got "
                                                  "in_features=0, out_features=2, hidden=None"):
        GINConv(0, 2)
    conv = GINConv(2, 2, mlp=Identity(), dtype=np.float64)
    with pytest.raises(ShapeError, match="GINConv: edge_index refers to node 4 but the features "
                                         "have 4 rows"):
        conv(Tensor(X), np.array([[0], [4]]))
    with pytest.raises(ShapeError, match=r"the sum operand \(4, 4\) needs x with 4 rows, got "
                                         r"\(3, 2\)"):
        conv.aggregate(Tensor(X[:3]), sum_adjacency(EDGE_INDEX, N, np.float64))
    with pytest.raises(ShapeError, match="sparse features need an MLP that opens with a Linear"):
        conv(SparseTensor.from_dense(X), EDGE_INDEX)
    assert repr(GINConv(2, 3, eps=0.5)).startswith("GINConv(\n  2, 3, eps=0.5, train_eps=False")
