"""The shared model stack: dropout before each layer, an activation between layers (never after
the last), `embed` as the last layer's input, sparse features kept sparse, and the MLP."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.stack import MLP, dropout, get_activation, layer_widths


def test_mlp_shapes_and_layer_count(rng):
    mlp = MLP(2, 16, 2, layers=2, rng=rng)
    assert [lin.weight.shape for lin in mlp.linears] == [(2, 16), (16, 2)]
    assert mlp(Tensor(np.zeros((7, 2), np.float32))).shape == (7, 2)


def test_stack_puts_the_activation_between_layers_only(rng):
    """Two linear layers: logits = relu(x W1 + b1) W2 + b2, negative logits kept (no output
    activation); `embed` returns relu(x W1 + b1), what the last layer reads."""
    mlp = MLP(3, 4, 2, layers=2, rng=rng, dtype=np.float64)
    mlp.linears[1].bias.data[:] = [-50.0, 1.0]  # logit 0 negative for every row
    x = rng.standard_normal((5, 3))
    (w1, b1), (w2, b2) = [(lin.weight.data, lin.bias.data) for lin in mlp.linears]
    hidden = np.maximum(x @ w1 + b1, 0.0)
    out = mlp(Tensor(x)).data
    np.testing.assert_allclose(out, hidden @ w2 + b2, atol=1e-12)
    assert (out[:, 0] < 0).all()
    np.testing.assert_allclose(mlp.embed(Tensor(x)).data, hidden, atol=1e-12)
    assert mlp(Tensor(x)).shape == (5, 2)  # embed left the model whole


def test_dropout_is_drawn_before_every_layer_and_off_in_eval(rng):
    mlp = MLP(3, 4, 2, layers=2, dropout=0.5, rng=rng, dtype=np.float64)
    x = Tensor(np.ones((50, 3)))
    mlp.eval()
    want = mlp(x).data
    np.testing.assert_array_equal(mlp(x).data, want)  # eval: deterministic, no mask drawn
    mlp.train()
    assert not np.allclose(mlp(x).data, want)
    assert mlp.dropout_step == 1  # one training forward counted, the eval ones not


def test_dropout_keeps_sparse_features_sparse(rng):
    x = SparseTensor.from_dense((rng.random((20, 6)) < 0.3) * 1.0)
    out = dropout(x, 0.5, True, rng)
    assert isinstance(out, SparseTensor) and out.nnz == x.nnz
    assert set(np.unique(out.values.data)) <= {0.0, 2.0}  # kept values scaled by 1 / (1 - p)
    assert dropout(x, 0.5, False, rng) is x


def test_unknown_activation_and_bad_sizes_are_one_clear_error():
    assert get_activation("relu")(Tensor(np.array([-1.0, 2.0]))).data.tolist() == [0.0, 2.0]
    with pytest.raises(HyperparameterError, match="unknown activation 'gelu'; known: relu, elu"):
        get_activation("gelu")
    assert layer_widths(5, 8, 3, 3) == [5, 8, 8, 3]
    with pytest.raises(HyperparameterError, match="model sizes and layer count must be positive"):
        layer_widths(5, 8, 3, 0)
