"""SAGEConv and GraphSAGE: the mean aggregator by hand, root weight, L2 normalisation,
whole-layer gradients, caching, the block operand, and GraphSAGE on Cora."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.checks import CASES
from mgsparse.config import load_config
from mgsparse.data.sampler import NeighborSampler
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.sage import GraphSAGE, SAGEConv, l2_normalize, mean_adjacency, sage_block_mean
from mgsparse.run import make_task
from tests.data.test_sampler import random_digraph

ROOT = Path(__file__).resolve().parents[2]

# Directed 5-node graph (row 0 source, row 1 target): 0→1 listed twice, 2→1, 3→1, 1→0, 1→2;
# node 3 only sends, node 4 is isolated.
EDGE_INDEX = np.array([[0, 0, 2, 3, 1, 1],
                       [1, 1, 1, 1, 0, 2]])
N = 5

# Row i averages over the sources of i's incoming edges, a repeated edge counting twice.
MEAN_ADJ = np.zeros((N, N))
MEAN_ADJ[1, [0, 2, 3]] = [2 / 4, 1 / 4, 1 / 4]
MEAN_ADJ[0, 1] = MEAN_ADJ[2, 1] = 1.0


def make_layer(rng, **kwargs) -> SAGEConv:
    layer = SAGEConv(3, 2, rng=rng, dtype=np.float64, **kwargs)
    if layer.bias is not None:
        layer.bias.data[:] = [0.5, -1.0]
    return layer


def dense_sage(layer: SAGEConv, x: np.ndarray) -> np.ndarray:
    out = MEAN_ADJ @ x @ layer.weight_neighbors.data
    if layer.weight_root is not None:
        out = out + x @ layer.weight_root.data
    return out + layer.bias.data if layer.bias is not None else out


def test_mean_adjacency_is_the_row_normalised_adjacency():
    mean = mean_adjacency(EDGE_INDEX, N, dtype=np.float64)
    np.testing.assert_allclose(mean.to_dense(), MEAN_ADJ, atol=1e-15)
    assert mean.is_coalesced() and mean.nnz == 5  # the repeated edge merged into one entry
    assert not mean.to_dense()[[3, 4]].any()  # no incoming edges: an empty row, mean 0


@pytest.mark.parametrize("kwargs", [{}, {"root_weight": False}, {"bias": False}],
                         ids=["root+bias", "no-root", "no-bias"])
def test_forward_is_root_plus_neighbour_mean(rng, kwargs):
    layer = make_layer(rng, **kwargs)
    x = rng.standard_normal((N, 3))
    out = layer(Tensor(x), EDGE_INDEX)
    np.testing.assert_allclose(out.data, dense_sage(layer, x), atol=1e-12)
    own = x[4] @ layer.weight_root.data if layer.weight_root is not None else np.zeros(2)
    bias = layer.bias.data if layer.bias is not None else 0.0
    np.testing.assert_allclose(out.data[4], own + bias, atol=1e-12)  # isolated: its own term


def test_normalize_gives_unit_rows_in_the_direction_of_the_plain_output(rng):
    plain, normed = make_layer(np.random.default_rng(2)), make_layer(np.random.default_rng(2),
                                                                     normalize=True)
    x = Tensor(rng.standard_normal((N, 3)))
    out, unit = plain(x, EDGE_INDEX).data, normed(x, EDGE_INDEX).data
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(unit, out / np.linalg.norm(out, axis=1, keepdims=True), atol=1e-9)
    zero = Tensor(np.zeros((1, 2)), requires_grad=True)
    out = l2_normalize(zero)
    out.sum().backward()
    assert np.all(out.data == 0) and np.all(np.isfinite(zero.grad))  # no NaN at a zero row


def test_sparse_features_give_the_dense_result(rng):
    layer = SAGEConv(3, 2, rng=rng)
    x = ((rng.random((N, 3)) < 0.5) * rng.standard_normal((N, 3))).astype(np.float32)
    np.testing.assert_allclose(layer(SparseTensor.from_dense(x), EDGE_INDEX).data,
                               layer(Tensor(x), EDGE_INDEX).data, atol=1e-6)


@pytest.mark.parametrize("name", ["sage_conv", "sage_conv_normalize"])
def test_whole_layer_gradcheck(name):
    """x, W_neighbours, W_root and the bias, through the mean and the normalisation."""
    case = CASES[f"nn.{name}"]
    result = gradcheck(case.fn, case.inputs("small", seed=1))
    assert [c.shape for c in result.inputs] == [(7, 4), (4, 3), (4, 3), (3,)]
    assert result.max_abs_err < 1e-7


def test_mean_adjacency_is_cached_per_graph(rng):
    layer = make_layer(rng)
    first = layer.mean_adj(EDGE_INDEX, N)
    assert layer.mean_adj(EDGE_INDEX, N) is first
    assert layer.mean_adj(EDGE_INDEX.copy(), N) is first  # the same graph, compared by value
    edges = EDGE_INDEX.copy()
    layer.mean_adj(edges, N)
    edges[1, 5] = 4  # changed in place: 1 → 2 becomes 1 → 4
    changed = layer.mean_adj(edges, N).to_dense()
    assert changed[4, 1] == 1.0 and changed[2, 1] == 0.0


def test_bad_inputs_are_one_clear_error(rng):
    with pytest.raises(ShapeError, match=r"^SAGEConv: .*pass edge_index to the model"):
        make_layer(rng)(Tensor(np.ones((N, 3))), SparseTensor.from_edge_index(EDGE_INDEX, N))
    with pytest.raises(HyperparameterError, match="out_features=0"):
        SAGEConv(3, 0)
    with pytest.raises(HyperparameterError, match="at least one layer"):
        GraphSAGE(3, 4, 2, layers=0)


def test_graphsage_normalises_hidden_layers_only(rng):
    model = GraphSAGE(3, 8, 2, layers=3, normalize=True, edge_index=EDGE_INDEX, rng=rng)
    assert [conv.normalize for conv in model.convs] == [True, True, False]
    assert [(c.in_features, c.out_features) for c in model.convs] == [(3, 8), (8, 8), (8, 2)]
    out = model.eval()(Tensor(np.ones((N, 3), dtype=np.float32)))
    assert out.shape == (N, 2)


def test_config_builds_a_graphsage():
    config = load_config(ROOT / "configs" / "cora-sage.yaml", (
        "dataset.name=karate", "dataset.normalize_features=false", "model.normalize=true"))
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    # the model is not bound to a graph: the task hands it the edge list at every call
    assert isinstance(model, GraphSAGE) and model.edge_index is None
    assert task.operand is task.edge_index
    assert task.logits(model).shape == (34, 2)
    assert [c.out_features for c in model.convs] == [64, 2]
    assert model.convs[0].normalize and not model.convs[1].normalize


# ---------------------------------------------------------------- the block operand

M = 60  # nodes of the random directed graph the blocks are sampled from


@pytest.fixture
def digraph(rng):
    return random_digraph(rng, M, 300)


def test_sage_block_mean_is_the_mean_over_sampled_neighbours(digraph, rng):
    block = NeighborSampler(digraph, M, [3]).block(np.arange(M), 3, rng)
    dense = sage_block_mean(block, np.float64).to_dense()
    k = block.num_sampled
    np.testing.assert_allclose(dense.sum(axis=1), (k > 0).astype(float))
    assert np.all(dense[block.row, block.col] == 1.0 / k[block.row])
    full = NeighborSampler(digraph, M, [-1]).block(np.arange(M), -1)
    by_node = sage_block_mean(full, np.float64).to_dense()[:, np.argsort(full.n_id)]
    np.testing.assert_allclose(by_node, mean_adjacency(digraph, M, np.float64).to_dense(),
                               atol=1e-15)


# ---------------------------------------------------------------- the order of the products


@pytest.mark.parametrize("root_weight", [True, False])
def test_mean_first_and_weights_first_give_the_same_layer_and_gradients(root_weight, monkeypatch):
    """Both orders are the same linear map: outputs and every gradient agree (float64), on a
    sampled block whose T targets are fewer than its N sources."""
    rng = np.random.default_rng(3)
    edge_index = rng.integers(0, 30, size=(2, 120))
    block = NeighborSampler(edge_index, 30, [3]).block(np.arange(6), 3, rng)
    x0 = rng.standard_normal((block.shape[1], 5))
    results = []
    for first in (True, False):
        monkeypatch.setattr(SAGEConv, "_aggregate_first", lambda self, x, mean, f=first: f)
        conv = SAGEConv(5, 4, root_weight=root_weight, rng=np.random.default_rng(0),
                        dtype=np.float64)
        x = Tensor(x0, requires_grad=True)
        out = conv.on_block(block)(x)
        (out * out).sum().backward()
        results.append((out.data, x.grad, [p.grad for p in conv.parameters()]))
    (a, ga, pa), (b, gb, pb) = results
    np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-12)
    for p, q in zip(pa, pb):
        np.testing.assert_allclose(p, q, rtol=1e-12)


def test_the_cheaper_order_is_chosen_by_shape():
    """A block far wider than its targets aggregates first; a whole graph with wide inputs
    and narrow outputs (Cora's first layer) applies the weights first; sparse features always
    do (no sparse × sparse product)."""
    rng = np.random.default_rng(0)
    conv = SAGEConv(64, 64, rng=rng)
    block_mean = SparseTensor(np.stack([np.arange(1000) % 10, np.arange(1000)]),
                              np.ones(1000, np.float32), (10, 1000))
    x = Tensor(np.ones((1000, 64), np.float32))
    assert conv._aggregate_first(x, block_mean)
    wide = SAGEConv(1433, 16, rng=rng)
    whole = SparseTensor(np.stack([np.arange(2708), np.arange(2708)]),
                         np.ones(2708, np.float32), (2708, 2708))
    assert not wide._aggregate_first(Tensor(np.ones((2708, 1433), np.float32)), whole)
    assert not conv._aggregate_first(SparseTensor.from_dense(np.eye(1000, 64)), block_mean)


def test_a_whole_graph_input_layer_of_equal_widths_takes_the_mean_first():
    """On the input features (no gradient) the mean of x is a constant: mean first has no
    sparse product in the backward, weights first needs meanᵀ·G. With x needing a gradient
    both orders need one, and the tie keeps the weights first; without a backward (no_grad)
    the forward alone decides, a tie too."""
    from mgsparse.engine import no_grad

    conv = SAGEConv(64, 64, rng=np.random.default_rng(0))
    n = 500
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    mean = SparseTensor(ring, np.ones(n, np.float32), (n, n))
    features = np.ones((n, 64), np.float32)
    assert conv._aggregate_first(Tensor(features), mean)
    assert not conv._aggregate_first(Tensor(features, requires_grad=True), mean)
    with no_grad():
        assert not conv._aggregate_first(Tensor(features), mean)


def test_frozen_features_meet_their_mean_once_and_keep_the_layer_and_its_gradients(rng,
                                                                                  monkeypatch):
    """The layer freezes the mean operand it caches; for frozen features D⁻¹A·X is then
    computed once (`FixedProduct`) and every call is the dense layer, gradients included."""
    from mgsparse.kernels.inplace import freeze
    from mgsparse.sparse import ops as sparse_ops

    layer = make_layer(rng)
    x = Tensor(rng.standard_normal((N, 3)), dtype=np.float64)
    freeze(x.data)
    calls = []
    forward = sparse_ops.SpMM.forward
    monkeypatch.setattr(sparse_ops.SpMM, "forward", staticmethod(
        lambda ctx, *a: calls.append(a[1].shape) or forward(ctx, *a)))
    outs = [layer(x, EDGE_INDEX).data for _ in range(3)]
    assert calls == [(N, 3)]
    for out in outs:
        np.testing.assert_allclose(out, dense_sage(layer, x.data), atol=1e-12)
    with pytest.raises(ValueError, match="read-only"):
        layer.mean_adj(EDGE_INDEX, N).values.data[0] = 1.0

    def f(wn, wr, b):
        layer.weight_neighbors, layer.weight_root, layer.bias = wn, wr, b
        return layer(x, EDGE_INDEX)

    result = gradcheck(f, [layer.weight_neighbors, layer.weight_root, layer.bias])
    assert result.passed and result.max_abs_err < 1e-7 and calls == [(N, 3)]


def test_a_loss_on_picked_rows_reaches_every_weight_gradient_without_a_scan(rng, row_scans):
    """`F.cross_entropy(model(x)[train], y)` on 40 of 12,288 rows, whole graph: the picked
    rows are recorded by the gather's backward and carried through the layer's two-term
    split, so no `sparse_rows` reads a whole gradient; the gradients are bitwise those of
    the same step with nothing recorded."""
    from mgsparse import kernels
    from mgsparse.nn import functional as F

    n = 3 * kernels.tuning.MIN_BLOCK_ROWS
    edges = rng.integers(0, n, (2, 4 * n))
    x = Tensor(rng.standard_normal((n, 64)).astype(np.float32))
    train = np.sort(rng.choice(n, 40, replace=False))
    y = rng.integers(0, 3, 40)

    def build():
        return GraphSAGE(64, 16, 3, dropout=0.5, edge_index=edges, rng=np.random.default_rng(1))

    def loss(model):
        return F.cross_entropy(model(x, None)[train], y)
    (recorded_scans, recorded), (plain_scans, plain) = (row_scans(build, loss, True),
                                                        row_scans(build, loss, False))
    assert recorded_scans == 0 and plain_scans >= 2  # the unrecorded step reads its gradients
    assert all(a.tobytes() == b.tobytes() for a, b in zip(recorded, plain))
