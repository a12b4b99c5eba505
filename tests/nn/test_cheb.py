"""ChebConv and ChebNet: L̃ by hand, the layer against its dense Chebyshev sum (K = 1 a Linear
layer, K = 2 X Θ_0 + L̃ X Θ_1), gradients, the per-graph cache, and the model kind: its placed
operand, the block-form refusals and the one-line errors for a bad K."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor
from mgsparse.config import load_config
from mgsparse.errors import ConfigError, HyperparameterError
from mgsparse.nn import Linear
from mgsparse.nn.block import block_support
from mgsparse.nn.cheb import ChebConv, ChebNet, scaled_laplacian
from mgsparse.run import fit, make_task
from tests.conftest import make_config
from tests.nn.model_check import model_gradcheck
from tests.nn.test_gcn import EDGE_INDEX, N


def dense_laplacian(edges: np.ndarray = EDGE_INDEX, n: int = N) -> np.ndarray:
    """2 L / λ_max − I with λ_max = 2 and L = I − D^-1/2 A D^-1/2, written out densely."""
    A = np.zeros((n, n))
    A[edges[1], edges[0]] = 1.0  # A[target, source]
    np.fill_diagonal(A, 0.0)  # L has no self loops
    d = A.sum(1)
    inv = np.where(d > 0, d, 1.0) ** -0.5 * (d > 0)
    L = np.eye(n) - inv[:, None] * A * inv[None, :]
    return 2.0 * L / 2.0 - np.eye(n)


def chebyshev_dense(x: np.ndarray, conv: ChebConv, lap: np.ndarray) -> np.ndarray:
    """Σ_k T_k(L̃) x Θ_k + b by the forward recurrence, densely."""
    terms = [x, lap @ x]
    while len(terms) < conv.k:
        terms.append(2.0 * lap @ terms[-1] - terms[-2])
    return sum(t @ lin.weight.data for t, lin in zip(terms, conv.lins)) + conv.bias.data


def test_the_scaled_laplacian_by_hand():
    """The 4-node graph (path 0-1-2, edge 1-3): degrees (1, 3, 1, 1), L̃ = −D^-1/2 A D^-1/2."""
    lap = scaled_laplacian(EDGE_INDEX, N, np.float64)
    s = 3**-0.5
    want = -np.array([[0, s, 0, 0], [s, 0, s, s], [0, s, 0, 0], [0, s, 0, 0]])
    np.testing.assert_allclose(lap.to_dense(), want, atol=1e-15)
    np.testing.assert_allclose(lap.to_dense(), dense_laplacian(), atol=1e-15)
    assert lap.nnz == EDGE_INDEX.shape[1] and lap.dtype == np.float64
    eig = np.linalg.eigvalsh(want)
    assert eig.min() >= -1 - 1e-12 and eig.max() <= 1 + 1e-12  # T_k(L̃) stays bounded


def test_a_self_loop_is_dropped_and_an_isolated_node_has_a_zero_row():
    edges = np.concatenate([EDGE_INDEX, [[2], [2]]], axis=1)  # a loop at 2; node 4 alone
    lap = scaled_laplacian(edges, N + 1, np.float64).to_dense()
    np.testing.assert_allclose(lap, dense_laplacian(EDGE_INDEX, N + 1), atol=1e-15)
    assert not lap[4].any() and lap[2, 2] == 0.0


def test_k1_is_a_linear_layer(rng):
    conv = ChebConv(5, 3, k=1, rng=np.random.default_rng(1), dtype=np.float64)
    lin = Linear(5, 3, rng=np.random.default_rng(1), dtype=np.float64)
    conv.bias.data[:] = lin.bias.data[:] = rng.standard_normal(3)
    x = Tensor(rng.standard_normal((N, 5)))
    np.testing.assert_array_equal(lin.weight.data, conv.lins[0].weight.data)
    np.testing.assert_allclose(conv(x, EDGE_INDEX).data, lin(x).data, atol=1e-15)


def test_k2_is_x_theta0_plus_lap_x_theta1(rng):
    conv = ChebConv(5, 3, k=2, rng=rng, dtype=np.float64)
    conv.bias.data[:] = rng.standard_normal(3)
    x = rng.standard_normal((N, 5))
    t0, t1 = (lin.weight.data for lin in conv.lins)
    want = x @ t0 + dense_laplacian() @ x @ t1 + conv.bias.data
    np.testing.assert_allclose(conv(Tensor(x), EDGE_INDEX).data, want, atol=1e-13)


@pytest.mark.parametrize("k", [3, 4, 6])
def test_clenshaw_is_the_chebyshev_recurrence(rng, k):
    """Σ T_k(L̃) X Θ_k by the forward recurrence T_k = 2 L̃ T_{k−1} − T_{k−2}, densely."""
    conv = ChebConv(4, 3, k=k, rng=rng, dtype=np.float64)
    conv.bias.data[:] = rng.standard_normal(3)
    x = rng.standard_normal((N, 4))
    np.testing.assert_allclose(conv(Tensor(x), EDGE_INDEX).data,
                               chebyshev_dense(x, conv, dense_laplacian()), atol=1e-12)


def test_sparse_dense_and_edge_list_operands_agree(rng):
    conv = ChebConv(4, 2, k=3, rng=rng, dtype=np.float64)
    x = rng.standard_normal((N, 4))
    x[x < 0.3] = 0.0  # sparse features stay sparse through Θ_k
    want = chebyshev_dense(x, conv, dense_laplacian())
    lap = scaled_laplacian(EDGE_INDEX, N, np.float64)
    for features in (Tensor(x), SparseTensor.from_dense(x)):
        for adj in (EDGE_INDEX, lap, lap.to_tensor()):
            np.testing.assert_allclose(conv(features, adj).data, want, atol=1e-13)


def test_the_laplacian_is_cached_per_graph(rng):
    conv, x = ChebConv(2, 2, k=2, rng=rng, dtype=np.float64), Tensor(rng.standard_normal((N, 2)))
    conv(x, EDGE_INDEX)
    first = conv._lap._entry[3]
    conv(x, EDGE_INDEX.copy())  # an equal copy: a hit
    assert conv._lap._entry[3] is first
    other = conv(x, EDGE_INDEX[:, :2]).data  # another graph: rebuilt, never stale
    assert conv._lap._entry[3] is not first
    assert not np.allclose(other, conv(x, EDGE_INDEX).data)


def test_model_gradients_float64(rng):
    model = ChebNet(5, 6, 3, k=3, rng=rng, dtype=np.float64)
    result = model_gradcheck(model, rng.standard_normal((N, 5)), lambda m, x: m(x, EDGE_INDEX))
    assert result.passed and len(result.inputs) == 1 + 2 * (3 + 1)  # x, per layer 3 Θ and b
    assert result.max_abs_err < 1e-7


def test_model_is_two_convolutions_with_relu_between(rng):
    model = ChebNet(5, 6, 3, k=2, rng=rng, dtype=np.float64).eval()
    x, lap = rng.standard_normal((N, 5)), dense_laplacian()
    h = np.maximum(chebyshev_dense(x, model.convs[0], lap), 0)
    np.testing.assert_allclose(model(Tensor(x), EDGE_INDEX).data,
                               chebyshev_dense(h, model.convs[1], lap), atol=1e-12)
    np.testing.assert_allclose(model.embed(Tensor(x), EDGE_INDEX).data, h, atol=1e-12)


def test_no_block_form_and_a_bad_k_are_one_line_errors(rng):
    assert block_support(ChebNet(3, 4, 2, rng=rng)) == (
        "ChebConv has no block form (an on_block method)")
    for k in (0, -1, 2.5):
        with pytest.raises(HyperparameterError, match=r"^ChebConv: k \(Chebyshev terms\) must "
                           rf"be an integer >= 1, got {k}$"):
            ChebConv(3, 2, k=k)
    assert ChebNet(3, 4, 2, k=None).k == 2 and ChebConv(3, 2).k == 2  # null: K = 2


# ---------------------------------------------------------------- the model kind


def test_the_run_places_the_scaled_laplacian_and_trains_on_the_whole_graph():
    config = make_config(model={"kind": "cheb", "k": 3}, train={"epochs": 100})
    task = make_task(config)
    assert "receptive field" not in task.placement and "training rows" not in task.placement
    # karate's 156 edges over 34² entries: L̃ is placed dense, as Â would be
    assert task.placement["adjacency"] == "dense (density 13.49% > threshold 10.00%)"
    want = scaled_laplacian(task.edge_index, task.num_nodes, np.float32).to_dense()
    np.testing.assert_array_equal(task.operand.data, want)
    (run,) = fit(config, task).runs
    assert len(run.rows) == 100 and run.train_acc == 1.0 and run.test_acc > 0.8  # 26 rows: 0.885


@pytest.mark.parametrize("train, message", [
    ({"receptive_field": True}, ("<dict>: train.receptive_field: true cannot apply: "
     "model.kind 'cheb' propagates over the whole graph (no block form) (use auto or false)")),
    ({"batch_size": 8}, ("<dict>: train.batch_size samples blocks for each layer; model.kind "
     "'cheb' propagates over the whole graph (no block form; set batch_size: null)")),
])
def test_blocks_are_refused_in_one_line(train, message):
    with pytest.raises(ConfigError) as caught:
        make_config(model={"kind": "cheb"}, train=train)
    assert str(caught.value) == message


def test_k0_is_refused_where_it_was_written(tmp_path):
    path = tmp_path / "cheb.yaml"
    path.write_text("dataset:\n  name: karate\nmodel:\n  kind: cheb\n  k: 0\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (f"{path}:5: model.k must be >= 1 for model.kind 'cheb' "
                                 "(Chebyshev terms; 1 is a Linear layer), got 0")
    assert load_config(path, ["model.k=1"]).model.k == 1
    assert load_config(path, ["model.kind=appnp"]).model.k == 0  # APPNP: zero steps is valid
