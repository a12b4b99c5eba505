"""ValueMLP: micrograd's MLP on scalars computes and trains exactly like a Tensor MLP."""

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.engine.value_nn import (
    Layer,
    ValueMLP,
    init_mlp_weights,
    tensor_mlp_params,
    tensor_sgd_step,
    value_sgd_step,
)
from mgsparse.errors import ConfigError, ShapeError

SIZES = (2, 8, 8, 1)


def _moons(n, noise, seed):
    """Two interleaving half circles, labels ±1 (a numpy twin of the classic toy set)."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = np.arange(n) % 2 == 0
    x = np.where(upper[:, None], np.c_[np.cos(t), np.sin(t)], np.c_[1 - np.cos(t), 0.5 - np.sin(t)])
    return x + noise * rng.standard_normal((n, 2)), np.where(upper, 1.0, -1.0)


def _numpy_forward(weights, x, act=np.tanh):
    h = x
    for k, (W, b) in enumerate(weights):
        h = h @ W + b
        h = act(h) if k < len(weights) - 1 else h
    return h


# ---------------------------------------------------------------- the two training loops


def _train_value(weights, x, y, steps, lr):
    mlp = ValueMLP(weights)
    losses = [value_sgd_step(mlp, x, y, lr) for _ in range(steps)]
    return np.array(losses), mlp.to_arrays()


def _train_tensor(weights, x, y, steps, lr):
    params = tensor_mlp_params(weights)
    xt, yt = Tensor(x), Tensor(y.reshape(-1, 1))
    losses = [tensor_sgd_step(params, xt, yt, lr) for _ in range(steps)]
    return np.array(losses), [(W.data, b.data) for W, b in params]


def test_value_and_tensor_engines_give_the_same_loss_trajectory():
    x, y = _moons(16, noise=0.1, seed=0)  # 16 points: the scalar engine's cost is per point
    weights = init_mlp_weights(SIZES, seed=1)
    value_losses, value_weights = _train_value(weights, x, y, steps=20, lr=0.2)
    tensor_losses, tensor_weights = _train_tensor(weights, x, y, steps=20, lr=0.2)
    assert len(value_losses) == 20
    assert value_losses[-1] < 0.8 * value_losses[0]  # it trains: the comparison is not of constants
    np.testing.assert_allclose(value_losses, tensor_losses, rtol=0, atol=1e-9)
    for (Wv, bv), (Wt, bt) in zip(value_weights, tensor_weights):
        np.testing.assert_allclose(Wv, Wt, rtol=0, atol=1e-9)
        np.testing.assert_allclose(bv, bt, rtol=0, atol=1e-9)


# ---------------------------------------------------------------- the model itself


@pytest.mark.parametrize("activation, act", [
    ("tanh", np.tanh),
    ("relu", lambda h: np.maximum(h, 0)),
    ("sigmoid", lambda h: 1 / (1 + np.exp(-h))),
])
def test_forward_matches_numpy(activation, act):
    weights = init_mlp_weights((3, 5, 2), seed=4)
    weights[0] = (weights[0][0], np.linspace(-0.5, 0.5, 5))  # non-zero biases
    x = np.random.default_rng(2).standard_normal((4, 3))
    mlp = ValueMLP(weights, activation=activation)
    got = np.array([[v.data for v in mlp(list(row))] for row in x])
    np.testing.assert_allclose(got, _numpy_forward(weights, x, act), rtol=1e-12, atol=1e-12)


def test_parameters_order_and_round_trip():
    weights = init_mlp_weights((2, 3, 1), seed=0)
    mlp = ValueMLP(weights)
    params = mlp.parameters()
    assert len(params) == 2 * 3 + 3 + 3 * 1 + 1
    # neuron 0 of layer 0: its weights W[:, 0], then its bias
    assert [p.data for p in params[:3]] == [weights[0][0][0, 0], weights[0][0][1, 0], 0.0]
    for (W, b), (W2, b2) in zip(weights, mlp.to_arrays()):
        np.testing.assert_array_equal(W, W2)
        np.testing.assert_array_equal(b, b2)
    assert repr(mlp) == "ValueMLP(2-3-1, activation=tanh)"
    assert repr(mlp.layers[1]) == "Layer(3 -> 1, activation=None)"


def test_zero_grad_resets_every_parameter():
    mlp = ValueMLP(init_mlp_weights((2, 3, 1), seed=0))
    mlp([0.5, -1.0])[0].backward()
    assert any(p.grad != 0 for p in mlp.parameters())
    mlp.zero_grad()
    assert all(p.grad == 0 for p in mlp.parameters())


def test_gradient_matches_finite_differences():
    weights = init_mlp_weights((2, 4, 1), seed=3)
    x = [0.3, -0.7]
    mlp = ValueMLP(weights)
    mlp(x)[0].backward()
    W, b = weights[0]
    eps = 1e-6
    plus, minus = W.copy(), W.copy()
    plus[1, 2] += eps
    minus[1, 2] -= eps

    def f(W1):
        return _numpy_forward([(W1, b), weights[1]], np.array([x]))[0, 0]

    numeric = (f(plus) - f(minus)) / (2 * eps)
    analytic = mlp.layers[0].neurons[2].w[1].grad
    assert analytic == pytest.approx(numeric, abs=1e-8)


def test_errors():
    with pytest.raises(ShapeError, match="layer 0 outputs 3 features but layer 1 expects 4"):
        ValueMLP([(np.zeros((2, 3)), np.zeros(3)), (np.zeros((4, 1)), np.zeros(1))])
    with pytest.raises(ShapeError, match=r"got W \(2, 3\) and b \(2,\)"):
        Layer(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ConfigError, match="must be one of tanh, relu, sigmoid, got 'gelu'"):
        ValueMLP(init_mlp_weights((2, 1)), activation="gelu")
    with pytest.raises(ShapeError, match="expected 2 input features, got 3"):
        ValueMLP(init_mlp_weights((2, 1)))([1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match="needs at least one"):
        ValueMLP([])
    with pytest.raises(ShapeError, match=r"need two or more positive sizes, got \(2,\)"):
        init_mlp_weights((2,))


def test_init_mlp_weights_is_seeded_glorot():
    a, b = init_mlp_weights((2, 16, 1), seed=5), init_mlp_weights((2, 16, 1), seed=5)
    np.testing.assert_array_equal(a[0][0], b[0][0])
    assert a[0][0].shape == (2, 16) and a[0][0].dtype == np.float64
    assert np.abs(a[0][0]).max() <= np.sqrt(6 / 18)
    assert not np.array_equal(a[0][0], init_mlp_weights((2, 16, 1), seed=6)[0][0])
