"""BatchNorm1d and LayerNorm against torch's formulas written out in numpy: batch statistics
in training, running statistics (momentum 0.1, unbiased variance) in eval, gradients, and
the running statistics as buffers in the state_dict."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.engine import no_grad
from mgsparse.errors import HyperparameterError, MgsparseError, ShapeError
from mgsparse.nn import BatchNorm1d, Buffer, LayerNorm, Linear, Sequential
from mgsparse.nn.norm import batch_norm_train
from mgsparse.optim import SGD

EPS = 1e-5


def torch_batch_norm_steps(xs, w, b, momentum=0.1):
    """torch.nn.BatchNorm1d's training forward, step by step: the outputs and the running
    statistics after each step (biased variance normalises, unbiased variance is tracked)."""
    rm, rv, outs = np.zeros(xs[0].shape[1]), np.ones(xs[0].shape[1]), []
    for x in xs:
        mean, var = x.mean(axis=0), x.var(axis=0)
        outs.append((x - mean) / np.sqrt(var + EPS) * w + b)
        rm = (1 - momentum) * rm + momentum * mean
        rv = (1 - momentum) * rv + momentum * x.var(axis=0, ddof=1)
    return outs, rm, rv


def make_bn(rng, f=3, **kwargs) -> BatchNorm1d:
    bn = BatchNorm1d(f, dtype=np.float64, **kwargs)
    if bn.weight is not None:
        bn.weight.data[:] = rng.uniform(0.5, 2.0, f)
        bn.bias.data[:] = rng.standard_normal(f)
    return bn


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_three_training_steps_then_eval_match_torchs_formulas(rng):
    bn = make_bn(rng)
    xs = [rng.standard_normal((n, 3)) * 2 + 1 for n in (5, 8, 4)]
    want, rm, rv = torch_batch_norm_steps(xs, bn.weight.data, bn.bias.data)
    for x, y in zip(xs, want):
        np.testing.assert_allclose(bn(Tensor(x)).data, y, atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.data, rm, atol=1e-14)
    np.testing.assert_allclose(bn.running_var.data, rv, atol=1e-14)
    x = rng.standard_normal((6, 3))
    out = bn.eval()(Tensor(x))
    np.testing.assert_allclose(out.data, (x - rm) / np.sqrt(rv + EPS) * bn.weight.data
                               + bn.bias.data, atol=1e-12)
    np.testing.assert_array_equal(bn.running_mean.data, rm)  # eval leaves them alone
    np.testing.assert_allclose(bn(Tensor(x[:1])).data, out.data[:1])  # one row: its own output


def test_affine_false_and_another_momentum(rng):
    bn = make_bn(rng, affine=False, momentum=0.3)
    assert bn.parameters() == [] and bn.weight is None
    xs = [rng.standard_normal((4, 3)) for _ in range(2)]
    want, rm, rv = torch_batch_norm_steps(xs, 1.0, 0.0, momentum=0.3)
    for x, y in zip(xs, want):
        np.testing.assert_allclose(bn(Tensor(x)).data, y, atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.data, rm, atol=1e-14)
    np.testing.assert_allclose(bn.running_var.data, rv, atol=1e-14)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_float64_gradcheck(rng, training):
    bn = make_bn(rng).train(training)
    bn.running_mean.data[:] = rng.standard_normal(3)
    bn.running_var.data[:] = rng.uniform(0.5, 2.0, 3)

    def fn(x, w, b):
        bn.weight, bn.bias = w, b
        return bn(x)

    inputs = [Tensor(rng.standard_normal((6, 3)), requires_grad=True),
              Tensor(bn.weight.data.copy(), requires_grad=True),
              Tensor(bn.bias.data.copy(), requires_grad=True)]
    result = gradcheck(fn, inputs)
    assert result.passed and result.max_abs_err < 1e-7
    assert [c.shape for c in result.inputs] == [(6, 3), (3,), (3,)]


def composed_batch_norm(x, w, b, relu):
    """The composite BatchNorm1d computed before the fused op: engine primitives only."""
    centred = x - x.mean(axis=0)
    var = (centred * centred).mean(axis=0)
    out = centred * ((var + EPS) ** -0.5 * w) + b
    return out.relu() if relu else out


@pytest.mark.parametrize("relu", [False, True], ids=["bn", "bn_relu"])
def test_fused_op_equals_the_composite_forward_and_backward(rng, relu):
    """Output and the three gradients of the fused op against the composite, in float64."""
    x0, w0, b0 = rng.standard_normal((9, 4)) * 3 + 1, rng.uniform(0.5, 2, 4), rng.normal(size=4)
    g = rng.standard_normal((9, 4))
    results = []
    for fn in (lambda x, w, b: batch_norm_train(x, w, b, EPS, relu), composed_batch_norm):
        x, w, b = (Tensor(a.copy(), requires_grad=True) for a in (x0, w0, b0))
        out = fn(x, w, b) if fn is not composed_batch_norm else fn(x, w, b, relu)
        (out * Tensor(g)).sum().backward()
        results.append([out.data, x.grad, w.grad, b.grad])
    assert (results[0][0] == 0).any() == relu  # the ReLU did cut some entries
    for fused, composed in zip(*results):
        np.testing.assert_allclose(fused, composed, rtol=1e-10, atol=1e-10)


def test_fused_op_keeps_float32_and_fills_the_batch_statistics(rng):
    x = rng.standard_normal((6, 3)).astype(np.float32)
    w, b = Tensor(np.ones(3, np.float32), requires_grad=True), Tensor(np.zeros(3, np.float32))
    xt, stats = Tensor(x, requires_grad=True), np.zeros((2, 3), np.float32)
    out = batch_norm_train(xt, w, b, EPS, relu=True, stats=stats)
    out.sum().backward()
    assert out.dtype == xt.grad.dtype == w.grad.dtype == np.float32 and b.grad is None
    np.testing.assert_allclose(stats, [x.mean(axis=0), x.var(axis=0)], rtol=1e-6)
    np.testing.assert_allclose(out.data, np.maximum((x - x.mean(0)) / np.sqrt(x.var(0) + EPS),
                                                    0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("relu", [False, True], ids=["bn", "bn_relu"])
def test_inference_without_a_graph_is_the_composite_bit_for_bit(rng, relu):
    """Eval under no_grad (one in-place pass) gives the recorded composite's exact bits."""
    bn = BatchNorm1d(5).eval()
    for p, values in ((bn.weight, rng.uniform(0.5, 2, 5)), (bn.bias, rng.normal(size=5)),
                      (bn.running_mean, rng.normal(size=5)),
                      (bn.running_var, rng.uniform(0.5, 2, 5))):
        p.data[:] = values
    x = Tensor(rng.standard_normal((7, 5)).astype(np.float32))
    recorded = bn(x, relu=relu)
    with no_grad():
        fast = bn(x, relu=relu)
    assert recorded.requires_grad and not fast.requires_grad and fast.dtype == np.float32
    np.testing.assert_array_equal(fast.data, recorded.data)
    assert (fast.data == 0).any() == relu


def randomised_eval_bn(rng, f: int, affine: bool = True) -> BatchNorm1d:
    bn = BatchNorm1d(f, affine=affine).eval()
    stats = [(bn.running_mean, rng.normal(size=f)), (bn.running_var, rng.uniform(0.5, 2, f))]
    if affine:
        stats += [(bn.weight, rng.uniform(0.5, 2, f)), (bn.bias, rng.normal(size=f))]
    for p, values in stats:
        p.data[:] = values
    return bn


@pytest.mark.parametrize("relu", [False, True], ids=["bn", "bn_relu"])
@pytest.mark.parametrize(("affine", "bias"), [(True, True), (False, False)],
                         ids=["affine", "bare"])
def test_after_linear_folds_the_statistics_into_the_product_in_inference(rng, relu, affine,
                                                                           bias):
    """x·W' + b' with the running statistics folded in: the pair's numbers up to rounding,
    one product, no graph."""
    linear = Linear(6, 5, bias=bias, rng=rng)
    if bias:
        linear.bias.data[:] = rng.normal(size=5)
    bn = randomised_eval_bn(rng, 5, affine)
    x = Tensor(rng.standard_normal((9, 6)).astype(np.float32))
    with no_grad():
        folded = bn.after_linear(x, linear, relu=relu)
        pair = bn(linear(x), relu=relu)
    assert not folded.requires_grad and folded.dtype == np.float32
    np.testing.assert_allclose(folded.data, pair.data, rtol=1e-5, atol=1e-6)
    assert (folded.data == 0).any() == relu


def test_after_linear_outside_inference_is_the_pair_bit_for_bit(rng):
    """Training (batch statistics, running ones moved) and eval with a graph recorded run the
    two ops unchanged: the same bits, the same running statistics, a gradient to W."""
    linear = Linear(4, 3, rng=rng)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    twins = [BatchNorm1d(3), BatchNorm1d(3)]
    fused, pair = twins[0].after_linear(Tensor(x), linear, relu=True), twins[1](
        linear(Tensor(x)), relu=True)
    np.testing.assert_array_equal(fused.data, pair.data)
    np.testing.assert_array_equal(twins[0].running_mean.data, twins[1].running_mean.data)
    recorded = twins[0].eval().after_linear(Tensor(x), linear)
    assert recorded.requires_grad
    recorded.sum().backward()
    assert linear.weight.grad is not None and np.abs(linear.weight.grad).sum() > 0


def test_training_normalises_each_feature(rng):
    bn = BatchNorm1d(4, dtype=np.float64)
    out = bn(Tensor(rng.standard_normal((50, 4)) * 5 - 3)).data
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=0), 1, atol=1e-5)  # 1 − eps/σ²


def test_running_statistics_are_buffers_not_parameters(rng):
    bn = BatchNorm1d(3)
    assert isinstance(bn.running_mean, Buffer) and not bn.running_mean.requires_grad
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var"]
    assert bn.running_var.dtype == np.float32 and repr(bn.running_mean) == \
        "Buffer(shape=(3,), dtype=float32)"
    opt = SGD(bn.parameters(), lr=0.1)  # an optimizer never sees them
    bn(Tensor(rng.standard_normal((4, 3)).astype(np.float32))).sum().backward()
    before = bn.running_mean.data.copy()
    opt.step()
    np.testing.assert_array_equal(bn.running_mean.data, before)


def test_state_dict_round_trip_keeps_the_running_statistics(rng):
    model = Sequential(Linear(2, 3, rng=rng, dtype=np.float64), make_bn(rng))
    for _ in range(3):
        model(Tensor(rng.standard_normal((5, 2))))
    state = model.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias",
                           "1.running_mean", "1.running_var"]
    model(Tensor(rng.standard_normal((5, 2))))  # later training does not reach the copy
    assert not np.array_equal(state["1.running_mean"], model[1].running_mean.data)
    fresh = Sequential(Linear(2, 3, dtype=np.float64), BatchNorm1d(3, dtype=np.float64))
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh[1].running_var.data, state["1.running_var"])
    model.load_state_dict(state)
    x = Tensor(rng.standard_normal((4, 2)))
    np.testing.assert_array_equal(fresh.eval()(x).data, model.eval()(x).data)
    del state["1.running_var"]
    with pytest.raises(MgsparseError, match=r"missing keys \['1.running_var'\]"):
        fresh.load_state_dict(state)
    state["1.running_var"] = np.ones(4)
    with pytest.raises(ShapeError, match=r"1.running_var: checkpoint \(4,\) vs model \(3,\)"):
        fresh.load_state_dict(state)


def test_batch_norm_errors(rng):
    bn = BatchNorm1d(3)
    with pytest.raises(ShapeError, match=r"BatchNorm1d: training needs more than one row per "
                                         r"feature, got input \(1, 3\)"):
        bn(Tensor(np.ones((1, 3), dtype=np.float32)))
    with pytest.raises(ShapeError, match=r"BatchNorm1d\(3\): expected input \(\.\.\., 3\), "
                                         r"got \(4, 2\)"):
        bn(Tensor(np.ones((4, 2), dtype=np.float32)))
    with pytest.raises(HyperparameterError, match=r"momentum must be in \[0, 1\], got 1.5"):
        BatchNorm1d(3, momentum=1.5)
    with pytest.raises(HyperparameterError, match="positive feature count, got 0"):
        BatchNorm1d(0)
    assert repr(bn) == "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True)"


# ---------------------------------------------------------------- LayerNorm


def torch_layer_norm(x, w, b):
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


@pytest.mark.parametrize("shape", [(5, 4), (4,), (2, 3, 4)])
def test_layer_norm_matches_torchs_formula_in_train_and_eval(rng, shape):
    ln = LayerNorm(4, dtype=np.float64)
    ln.weight.data[:] = rng.uniform(0.5, 2, 4)
    ln.bias.data[:] = rng.standard_normal(4)
    x = rng.standard_normal(shape) * 3
    want = torch_layer_norm(x, ln.weight.data, ln.bias.data)
    np.testing.assert_allclose(ln(Tensor(x)).data, want, atol=1e-12)
    np.testing.assert_allclose(ln.eval()(Tensor(x)).data, want, atol=1e-12)


def test_layer_norm_float64_gradcheck(rng):
    ln = LayerNorm((3,), dtype=np.float64)

    def fn(x, w, b):
        ln.weight, ln.bias = w, b
        return ln(x)

    inputs = [Tensor(rng.standard_normal((5, 3)), requires_grad=True),
              Tensor(rng.uniform(0.5, 2, 3), requires_grad=True),
              Tensor(rng.standard_normal(3), requires_grad=True)]
    result = gradcheck(fn, inputs)
    assert result.passed and result.max_abs_err < 1e-7


def test_layer_norm_without_affine_and_its_errors():
    ln = LayerNorm(3, elementwise_affine=False)
    assert ln.parameters() == [] and ln.named_buffers() == []
    np.testing.assert_allclose(ln(Tensor(np.array([[1.0, 2.0, 3.0]]))).data,
                               [[-1.2247357, 0.0, 1.2247357]], atol=1e-6)
    with pytest.raises(ShapeError, match=r"LayerNorm\(3\): expected input \(\.\.\., 3\), "
                                         r"got \(2, 4\)"):
        ln(Tensor(np.ones((2, 4))))
    with pytest.raises(HyperparameterError, match=r"last axis only; got normalized_shape=\(2, 3\)"):
        LayerNorm((2, 3))
    with pytest.raises(HyperparameterError, match="eps must be positive, got 0"):
        LayerNorm(3, eps=0)
