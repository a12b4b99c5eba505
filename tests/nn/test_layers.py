"""Layers: Glorot init, Linear's forward and gradients, Dropout modes, activations."""

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn import (
    ELU,
    Dropout,
    Identity,
    LeakyReLU,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
    glorot_,
)


def test_glorot_bound_and_variance():
    w = glorot_((300, 500), np.random.default_rng(0))
    bound = np.sqrt(6 / 800)
    assert w.dtype == np.float32 and w.shape == (300, 500)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    # U(-a, a) has variance a²/3 = 2 / (fan_in + fan_out)
    assert w.var() == pytest.approx(2 / 800, rel=0.02)
    assert abs(w.mean()) < 1e-3


def test_glorot_uses_the_last_two_axes_and_is_dtype_independent():
    w3 = glorot_((4, 10, 30), np.random.default_rng(1), dtype=np.float64)
    assert np.abs(w3).max() <= np.sqrt(6 / 40)
    a = glorot_((5, 7), np.random.default_rng(2), dtype=np.float64)
    b = glorot_((5, 7), np.random.default_rng(2), dtype=np.float32)
    np.testing.assert_array_equal(a.astype(np.float32), b)
    with pytest.raises(HyperparameterError, match=r"positive sizes, got \(0, 3\)"):
        glorot_((0, 3))


def test_linear_layout_init_and_forward():
    lin = Linear(3, 2, rng=np.random.default_rng(0))
    assert lin.weight.shape == (3, 2) and lin.bias.shape == (2,)
    assert lin.weight.dtype == np.float32 and np.all(lin.bias.data == 0)
    np.testing.assert_array_equal(lin.weight.data, glorot_((3, 2), np.random.default_rng(0)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    lin.bias.data[:] = [1.0, -1.0]
    np.testing.assert_allclose(lin(Tensor(x)).data, x @ lin.weight.data + [1.0, -1.0], rtol=1e-6)
    assert repr(lin) == "Linear(in_features=3, out_features=2, bias=True)"


def test_linear_is_one_op_bit_for_bit_the_product_and_the_bias():
    """A dense 2-d input runs LinearOp: output and every gradient equal to x @ W + b's."""
    rng = np.random.default_rng(3)
    lin = Linear(5, 4, rng=rng)
    lin.bias.data[:] = rng.standard_normal(4)
    x0, g = (rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (6, 4)))
    got = []
    for fn in (lin, lambda x: x @ lin.weight + lin.bias):
        x = Tensor(x0, requires_grad=True)
        lin.zero_grad()
        out = fn(x)
        (out * Tensor(g)).sum().backward()
        got.append((out, x.grad, lin.weight.grad, lin.bias.grad))
    assert got[0][0]._ctx.fn.__name__ == "LinearOp" and got[1][0]._ctx.fn.__name__ == "Add"
    for fused, composed in zip(*got):
        np.testing.assert_array_equal(getattr(fused, "data", fused),
                                      getattr(composed, "data", composed))
    with pytest.raises(ShapeError, match=r"Linear: input \(6, 3\) does not fit weight "
                                         r"\(5, 4\)"):
        lin(Tensor(np.zeros((6, 3), np.float32)))


def test_linear_without_bias_has_one_parameter():
    lin = Linear(4, 3, bias=False, rng=np.random.default_rng(0))
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    assert "bias=False" in repr(lin)


def test_linear_gradcheck_float64():
    rng = np.random.default_rng(0)
    lin = Linear(4, 3, rng=rng, dtype=np.float64)
    lin.bias.data[:] = rng.standard_normal(3)
    x = Tensor(rng.standard_normal((5, 4)), requires_grad=True)

    def fn(x, w, b):
        lin.weight, lin.bias = w, b  # gradcheck hands in float64 copies
        return lin(x).tanh()

    result = gradcheck(fn, [x, Tensor(lin.weight.data, requires_grad=True),
                            Tensor(lin.bias.data, requires_grad=True)])
    assert result.passed and result.max_abs_err < 1e-7


def test_linear_rejects_bad_sizes():
    with pytest.raises(HyperparameterError, match="in_features=0, out_features=2"):
        Linear(0, 2)


def test_dropout_training_zeroes_and_rescales():
    x = Tensor(np.ones((200, 50), dtype=np.float32), requires_grad=True)
    drop = Dropout(0.3, rng=np.random.default_rng(0))
    y = drop(x).data
    kept = y != 0
    np.testing.assert_allclose(y[kept], 65536 / 45875, rtol=1e-6)  # 1/P(keep), p ≈ 19661/65536
    assert kept.mean() == pytest.approx(0.7, abs=0.01)
    assert y.mean() == pytest.approx(1.0, abs=0.02)  # inverted dropout keeps the expectation


def test_dropout_eval_is_identity_and_masks_are_seeded():
    x = Tensor(np.ones((10, 10), dtype=np.float32))
    drop = Dropout(0.5, rng=np.random.default_rng(3))
    model = Sequential(drop)
    model.eval()
    assert model(x) is x
    model.train()
    first = model(x).data
    again = Dropout(0.5, rng=np.random.default_rng(3))(x).data
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(model(x).data, first)  # the generator advances between calls


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_dropout_rejects_bad_probability(p):
    with pytest.raises(HyperparameterError, match=r"Dropout probability must be in \[0, 1\)"):
        Dropout(p)


def test_activations_match_numpy():
    z = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    x = Tensor(z)
    np.testing.assert_allclose(ReLU()(x).data, np.maximum(z, 0))
    np.testing.assert_allclose(ELU(0.5)(x).data, np.where(z > 0, z, 0.5 * np.expm1(z)))
    np.testing.assert_allclose(LeakyReLU(0.2)(x).data, np.where(z > 0, z, 0.2 * z))
    np.testing.assert_allclose(Tanh()(x).data, np.tanh(z))
    np.testing.assert_allclose(Sigmoid()(x).data, 1 / (1 + np.exp(-z)))
    assert Identity()(x) is x
    assert repr(ELU(0.5)) == "ELU(alpha=0.5)"
    assert repr(LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"


@pytest.mark.parametrize("rows, sparse_g", [(37, False), (20_000, False), (40_000, True)])
def test_dropout_linear_is_dropout_then_the_product(rng, rows, sparse_g):
    """x's dropout and x·W as one op: the same mask from the same generator, dW and dx bit for
    bit the two ops' and the output to BLAS's rounding; the same bits at 1 and 2 threads.
    Small, blocked, and a gradient zero outside a few rows (its rows gathered)."""
    from mgsparse import kernels
    from mgsparse.nn.layers import DropoutLinearOp, dropout_linear

    x = rng.standard_normal((rows, 64)).astype(np.float32)
    w = rng.standard_normal((64, 8)).astype(np.float32)
    g = rng.standard_normal((rows, 8)).astype(np.float32)
    if sparse_g:
        g[rng.random(rows) < 0.9] = 0.0  # a tenth of the rows: under a quarter
    runs = []
    for threads in (1, 2):
        with kernels.num_threads(threads):
            for fused in (True, False):
                xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
                r = np.random.default_rng(5)
                out = dropout_linear(xt, wt, 0.5, r) if fused else xt.dropout(0.5, True, r) @ wt
                assert (out._ctx.fn is DropoutLinearOp) == fused
                out.backward(g)
                runs.append((out.data, wt.grad.tobytes(), xt.grad.tobytes()))
    fused_1, plain_1, fused_2, plain_2 = runs
    assert fused_1[0].tobytes() == fused_2[0].tobytes() and plain_1[0].tobytes() == plain_2[0].tobytes()
    np.testing.assert_allclose(fused_1[0], plain_1[0], rtol=1e-5, atol=1e-5)
    assert fused_1[1:] == plain_1[1:] == fused_2[1:] == plain_2[1:]  # dW and dx: the same bits
    assert kernels.tuning.CACHE_ROWS < rows or rows == 37


def test_dropout_linear_off_and_bad_p():
    from mgsparse.nn.layers import dropout_linear

    x, w = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((3, 1), np.float32))
    np.testing.assert_array_equal(dropout_linear(x, w, 0.0, np.random.default_rng(0)).data,
                                  [[3.0], [3.0]])
    with pytest.raises(HyperparameterError, match=r"dropout probability must be in \[0, 1\)"):
        dropout_linear(x, w, 1.0, np.random.default_rng(0))
