"""GATConv and GAT: attention against a dense masked softmax, whole-layer gradients, attention
dropout, the cached pattern, the Cora recipe, and a 1,000,000-edge step without an N×N array."""

from __future__ import annotations

import copy
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.checks import CASES
from mgsparse.config import load_config
from mgsparse.engine.masks import keep_mask
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import functional as F
from mgsparse.nn.gat import GAT, GATConv, attention_pattern
from mgsparse.optim import Adam
from mgsparse.run import fit, make_task

ROOT = Path(__file__).resolve().parents[2]

# A hand-written directed 5-node graph (row 0 source, row 1 target): 1→0 listed twice, a self
# loop 2→2, the one-way edge 0→2, and node 4 isolated.
EDGE_INDEX = np.array([[0, 1, 1, 2, 3, 0, 2, 1],
                       [1, 0, 2, 1, 1, 2, 2, 0]])
N = 5


def neighbour_mask() -> np.ndarray:
    """mask[i, j]: node i attends to node j (an edge j → i, or j = i)."""
    mask = np.eye(N, dtype=bool)
    mask[EDGE_INDEX[1], EDGE_INDEX[0]] = True
    return mask


def leaky_relu(z: np.ndarray, slope: float = 0.2) -> np.ndarray:
    return np.where(z > 0, z, slope * z)


def dense_alpha(layer: GATConv, x: np.ndarray) -> np.ndarray:
    """(H, N, N) attention by a masked N×N softmax per head, straight from the paper."""
    h = (x @ layer.weight.data).reshape(N, layer.heads, layer.out_features)
    alphas = []
    for k in range(layer.heads):
        dst = h[:, k] @ layer.att_dst.data[k]
        src = h[:, k] @ layer.att_src.data[k]
        e = np.where(neighbour_mask(), leaky_relu(dst[:, None] + src[None, :]), -np.inf)
        e = np.exp(e - e.max(axis=1, keepdims=True))
        alphas.append(e / e.sum(axis=1, keepdims=True))
    return np.stack(alphas)


def dense_output(layer: GATConv, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    h = (x @ layer.weight.data).reshape(N, layer.heads, layer.out_features)
    heads = [alpha[k] @ h[:, k] for k in range(layer.heads)]  # each (N, C)
    out = np.concatenate(heads, axis=1) if layer.concat else np.mean(heads, axis=0)
    return out + layer.bias.data


def blocks(A: SparseTensor, heads: int) -> np.ndarray:
    """Each head's (N, N) attention from the node-major (N·H, N·H) SparseTensor: head k is
    rows i·H + k and columns j·H + k."""
    dense = A.to_dense()
    return np.stack([dense[k::heads, k::heads] for k in range(heads)])


def make_layer(rng, concat=True, heads=2, dropout=0.0) -> GATConv:
    layer = GATConv(3, 4, heads=heads, concat=concat, dropout=dropout, rng=rng, dtype=np.float64)
    layer.bias.data[:] = rng.standard_normal(layer.bias.shape)
    return layer


# ---------------------------------------------------------------- the layer, against dense math


def test_attention_equals_the_dense_masked_softmax(rng):
    layer = make_layer(rng)
    x = rng.standard_normal((N, 3))
    alpha = layer.attention(Tensor(x), EDGE_INDEX)
    assert alpha.shape == (2 * N, 2 * N)
    np.testing.assert_allclose(blocks(alpha, 2), dense_alpha(layer, x), atol=1e-12)
    np.testing.assert_allclose(alpha.to_dense().sum(axis=1), 1.0, atol=1e-12)  # every row, loops


@pytest.mark.parametrize("concat", [True, False], ids=["concat", "mean"])
def test_forward_equals_the_dense_formula(rng, concat):
    layer = make_layer(rng, concat=concat)
    x = rng.standard_normal((N, 3))
    out = layer(Tensor(x), EDGE_INDEX)
    assert out.shape == ((N, 8) if concat else (N, 4))
    np.testing.assert_allclose(out.data, dense_output(layer, x, dense_alpha(layer, x)), atol=1e-12)


def test_pattern_is_deduplicated_with_one_self_loop_per_node():
    A = attention_pattern(EDGE_INDEX, N, heads=3)
    # distinct non-loop edges: 0→1, 1→0, 1→2, 2→1, 3→1, 0→2 (6), plus 5 loops, per head
    assert A.nnz == 3 * (6 + N) and A.shape == (3 * N, 3 * N)
    keys = A.row * A.shape[1] + A.col
    assert np.all(np.diff(keys) > 0)  # sorted row-major, no duplicates
    assert np.array_equal(A.row % 3, A.col % 3)  # never across heads
    no_loops = attention_pattern(EDGE_INDEX, N, heads=1, add_self_loops=False)
    assert no_loops.nnz == 7  # 6 distinct edges + the listed loop 2→2


def test_isolated_node_attends_only_to_itself(rng):
    layer = make_layer(rng, concat=False)
    x = rng.standard_normal((N, 3))
    out = layer(Tensor(x), EDGE_INDEX)
    own = (x[4] @ layer.weight.data).reshape(2, 4).mean(axis=0)  # α = 1 on its self loop
    np.testing.assert_allclose(out.data[4], own + layer.bias.data, atol=1e-12)


def test_sparse_features_give_the_dense_result(rng):
    layer = GATConv(3, 4, heads=2, rng=rng)
    x = (rng.random((N, 3)) < 0.5) * rng.standard_normal((N, 3))
    dense = layer(Tensor(x.astype(np.float32)), EDGE_INDEX)
    sparse = layer(SparseTensor.from_dense(x.astype(np.float32)), EDGE_INDEX)
    np.testing.assert_allclose(sparse.data, dense.data, atol=1e-6)


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize("name, shapes", [
    ("gat_conv", [(7, 4), (4, 6), (2, 3), (2, 3), (6,)]),
    ("gat_conv_mean", [(7, 4), (4, 6), (2, 3), (2, 3), (3,)]),
])
def test_whole_layer_gradcheck(name, shapes):
    """x, W, a_src, a_dst and the bias, all through the edge softmax and the sparse product."""
    case = CASES[f"nn.{name}"]
    result = gradcheck(case.fn, case.inputs("small", seed=1))
    assert [c.shape for c in result.inputs] == shapes
    assert result.max_abs_err < 1e-7


def test_attention_vectors_learn_only_through_the_edge_softmax(rng):
    """With neighbours, a_src/a_dst get a gradient; with self loops only, α ≡ 1 and they get 0."""
    x = Tensor(rng.standard_normal((N, 3)))
    for edges, expect_signal in ((EDGE_INDEX, True), (np.zeros((2, 0), np.int64), False)):
        layer = make_layer(np.random.default_rng(3))
        (layer(x, edges) ** 2).sum().backward()
        for att in (layer.att_src, layer.att_dst):
            assert (np.abs(att.grad).max() > 1e-6) == expect_signal
        assert np.abs(layer.weight.grad).max() > 1e-6


# ---------------------------------------------------------------- attention dropout, caching


def test_attention_dropout_zeroes_and_rescales_coefficients(rng):
    layer = make_layer(rng, dropout=0.5)
    x = rng.standard_normal((N, 3))
    twin = copy.deepcopy(layer.rng)  # predicts the layer's keep mask
    out = layer(Tensor(x), EDGE_INDEX)
    alpha = layer.attention(Tensor(x), EDGE_INDEX)
    keep = keep_mask((alpha.nnz,), 0.5, twin) / 0.5
    dropped = alpha.with_values(alpha.values.data * keep)
    assert 0 < np.count_nonzero(keep == 0) < alpha.nnz
    np.testing.assert_allclose(out.data, dense_output(layer, x, blocks(dropped, 2)), atol=1e-12)
    layer.eval()
    np.testing.assert_allclose(layer(Tensor(x), EDGE_INDEX).data,
                               dense_output(layer, x, dense_alpha(layer, x)), atol=1e-12)


def test_pattern_is_built_once_per_graph(rng):
    layer = make_layer(rng)
    first = layer.pattern(EDGE_INDEX, N)
    assert layer.pattern(EDGE_INDEX, N) is first
    assert layer.pattern(EDGE_INDEX.copy(), N) is first  # the same graph, compared by value
    edges = EDGE_INDEX.copy()
    layer.pattern(edges, N)
    edges[1, 0] = 4  # changed in place: 0 → 1 becomes 0 → 4, so node 4 now attends to 0
    def pairs(A):  # head 0's (target, source): rows i·H, columns j·H
        return {(r // 2, c // 2) for r, c in zip(*A.indices.tolist()) if r % 2 == 0}
    changed = pairs(layer.pattern(edges, N))
    assert (4, 0) in changed and (1, 0) not in changed and (1, 0) in pairs(first)
    uncached = GATConv(3, 4, cached=False, rng=rng)
    assert uncached.pattern(EDGE_INDEX, N) is not uncached.pattern(EDGE_INDEX, N)


@pytest.mark.parametrize("adj, message", [
    (SparseTensor.from_edge_index(EDGE_INDEX, N), "needs the graph's edge_index (2, E) array"),
    (np.array([[0, 1], [1, 9]]), "refers to node 9 but the features have 5 rows"),
    (np.zeros((3, 4), np.int64), "must be an integer array of shape (2, E)"),
])
def test_bad_graph_is_one_clear_error(rng, adj, message):
    with pytest.raises(ShapeError, match=r"^GATConv: ") as info:
        make_layer(rng)(Tensor(np.ones((N, 3))), adj)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_sizes_are_refused():
    with pytest.raises(HyperparameterError, match="heads=0"):
        GATConv(3, 4, heads=0)
    with pytest.raises(HyperparameterError, match=r"in \[0, 1\), got 1.0"):
        GATConv(3, 4, dropout=1.0)


# ---------------------------------------------------------------- the model and its config


def test_cora_recipe_has_the_reference_parameter_count(rng):
    """8 heads × 8 hidden then 1 head of 7 classes on 1,433 features: 92,373 parameters."""
    model = GAT(1433, 8, 7, heads=8, output_heads=1, rng=rng)
    assert model.num_parameters() == 1433 * 64 + 2 * 64 + 64 + 64 * 7 + 2 * 7 + 7 == 92_373
    assert [c.concat for c in model.convs] == [True, False]
    assert [c.dropout for c in model.convs] == [0.6, 0.6]


def test_bound_model_ignores_adj_and_unbound_model_uses_it(rng):
    x = Tensor(rng.standard_normal((N, 3)).astype(np.float32))
    bound = GAT(3, 4, 2, heads=2, edge_index=EDGE_INDEX, rng=np.random.default_rng(0)).eval()
    free = GAT(3, 4, 2, heads=2, rng=np.random.default_rng(0)).eval()
    expected = free(x, EDGE_INDEX).data
    assert expected.shape == (N, 2)
    np.testing.assert_array_equal(bound(x, SparseTensor.from_edge_index(EDGE_INDEX, N)).data,
                                  expected)
    with pytest.raises(ShapeError, match="pass edge_index to the model"):
        free(x, SparseTensor.from_edge_index(EDGE_INDEX, N))


def test_config_builds_and_trains_a_gat_on_a_planted_partition():
    """configs/cora-gat.yaml's model on a small SBM, through build_model and fit."""
    config = load_config(ROOT / "configs" / "cora-gat.yaml", (
        "dataset.name=synthetic", "dataset.num_nodes=400", "dataset.num_features=32",
        "dataset.split=random", "dataset.num_val=100", "dataset.num_test=200",
        "dataset.normalize_features=false", "train.epochs=40", "monitor.memory=false"))
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    # the model is not bound to a graph: the task hands it the edge list at every call
    assert isinstance(model, GAT) and model.edge_index is None
    assert task.operand is task.edge_index
    assert (model.convs[0].heads, model.convs[0].out_features, model.convs[1].heads) == (8, 8, 1)
    result = fit(config, task)
    assert result.runs[0].test_acc > 0.9, result.summary()  # 4 classes: chance is 0.25


# ---------------------------------------------------------------- memory


def test_training_step_on_a_million_edges_never_allocates_n_by_n():
    """100,000 nodes, 1,000,000 edges: the traced peak of a whole training step — pattern
    build, forward, backward, Adam — stays under 128 bytes per stored attention entry
    (edge × head over both layers: indices, CSR views, a dozen value-sized temporaries)
    plus 8 copies of the features. One N×N float32 array alone would be 40 GB."""
    num_nodes, num_edges, num_features, heads, hidden = 100_000, 1_000_000, 16, 2, 4
    rng = np.random.default_rng(0)
    edge_index = rng.integers(0, num_nodes, (2, num_edges))
    x = Tensor(rng.standard_normal((num_nodes, num_features)).astype(np.float32))
    y = rng.integers(0, 3, num_nodes)
    model = GAT(num_features, hidden, 3, heads=heads, edge_index=edge_index, rng=rng)
    optimizer = Adam(model.parameters(), lr=0.005)
    tracemalloc.start()
    try:
        loss = F.cross_entropy(model(x), y, np.arange(num_nodes))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    entries = sum(conv.pattern(edge_index, num_nodes).nnz for conv in model.convs)
    assert entries >= (heads + 1) * num_edges  # the whole graph was attended over
    bound = 128 * entries + 8 * x.data.nbytes
    assert peak < bound, f"peak {peak / 1e6:.0f} MB > bound {bound / 1e6:.0f} MB"
    assert np.isfinite(loss.data) and model.convs[0].att_src.grad is not None
