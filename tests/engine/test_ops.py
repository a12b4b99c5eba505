"""Every primitive op and every Tensor method: finite differences, the scalar Value engine,
hypothesis-generated broadcasts, exact forward numbers and the errors bad shapes get."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from mgsparse import Tensor, Value, concatenate, gradcheck, stack
from mgsparse.engine.ops import unbroadcast
from mgsparse.errors import ShapeError

# ---------------------------------------------------------------- input specs
# Each spec is (shape, domain): "any" uniform in [-1, 1); "pos" in [0.5, 2) for log, sqrt,
# division and powers; "kink" at least 0.1 away from 0 so finite differences never straddle
# the kink of relu, abs, leaky_relu or elu.


def A(*shape): return (shape, "any")
def P(*shape): return (shape, "pos")
def K(*shape): return (shape, "kink")


def make_input(spec, rng) -> Tensor:
    shape, domain = spec
    if domain == "pos":
        data = rng.uniform(0.5, 2.0, shape)
    elif domain == "kink":
        data = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.1, 1.0, shape)
    else:
        data = rng.uniform(-1.0, 1.0, shape)
    return Tensor(np.asarray(data, dtype=np.float64), requires_grad=True)


def check(fn, specs, rng) -> None:
    """THE helper: gradcheck `fn` in float64 on random inputs drawn from `specs`."""
    inputs = [make_input(s, rng) for s in specs]
    result = gradcheck(fn, inputs)
    assert result.passed
    assert len(result.inputs) == len(specs)
    assert result.max_abs_err < 1e-6


MASK = np.array([True, False, True])
MASK2 = np.array([[1, 0, 0, 1], [0, 0, 1, 1], [1, 1, 1, 0]], dtype=bool)
REPEATS = np.array([0, 2, 0, 0, 1])

CASES = [
    # binary arithmetic, with broadcasting
    ("add", lambda a, b: a + b, [A(2, 3), A(2, 3)]),
    ("add_bcast_3d", lambda a, b: a + b, [A(3, 1, 4), A(5, 4)]),
    ("add_bcast_1", lambda a, b: a + b, [A(1), A(2, 3)]),
    ("add_bcast_scalar", lambda a, b: a + b, [A(), A(4)]),
    ("sub", lambda a, b: a - b, [A(3, 1, 4), A(5, 4)]),
    ("sub_bcast_scalar", lambda a, b: a - b, [A(4), A()]),
    ("mul", lambda a, b: a * b, [A(3, 1, 4), A(5, 4)]),
    ("mul_bcast_1", lambda a, b: a * b, [A(1), A(2, 3)]),
    ("div", lambda a, b: a / b, [A(3, 1, 4), P(5, 4)]),
    ("div_bcast_scalar", lambda a, b: a / b, [A(4), P()]),
    ("neg", lambda a: -a, [A(2, 3)]),
    ("radd", lambda a: 1.5 + a, [A(2, 3)]),
    ("rsub", lambda a: 2.0 - a, [A(2, 3)]),
    ("rmul", lambda a: 3.0 * a, [A(2, 3)]),
    ("rtruediv", lambda a: 2.0 / a, [P(2, 3)]),
    ("add_ndarray", lambda a: a + np.arange(3.0), [A(2, 3)]),
    ("pow_int", lambda a: a**3, [A(2, 3)]),
    ("pow_half", lambda a: a**0.5, [P(2, 3)]),
    ("pow_neg", lambda a: a**-2.5, [P(2, 3)]),
    ("pow_tensor", lambda a, b: a**b, [P(2, 3), A(2, 3)]),
    ("pow_tensor_bcast", lambda a, b: a**b, [P(3, 1), A(4)]),
    ("rpow", lambda a: 2.0**a, [A(2, 3)]),
    # unary elementwise
    ("exp", lambda a: a.exp(), [A(2, 3)]),
    ("log", lambda a: a.log(), [P(2, 3)]),
    ("sqrt", lambda a: a.sqrt(), [P(2, 3)]),
    ("abs", lambda a: a.abs(), [K(2, 3)]),
    ("relu", lambda a: a.relu(), [K(3, 4)]),
    ("leaky_relu", lambda a: a.leaky_relu(0.1), [K(3, 4)]),
    ("elu", lambda a: a.elu(), [K(3, 4)]),
    ("elu_alpha", lambda a: a.elu(0.5), [K(3, 4)]),
    ("sigmoid", lambda a: a.sigmoid(), [A(3, 4)]),
    ("sigmoid_wide", lambda a: (a * 8).sigmoid(), [A(3, 4)]),
    ("tanh", lambda a: a.tanh(), [A(3, 4)]),
    ("clip", lambda a: a.clip(-0.5, 0.5), [K(3, 4)]),
    ("clip_lo", lambda a: a.clip(lo=0.0), [K(3, 4)]),
    ("clip_hi", lambda a: a.clip(hi=0.0), [K(3, 4)]),
    # reductions
    ("sum", lambda a: a.sum(), [A(2, 3, 4)]),
    ("sum_axis0", lambda a: a.sum(axis=0), [A(2, 3, 4)]),
    ("sum_axes_keep", lambda a: a.sum(axis=(0, 2), keepdims=True), [A(2, 3, 4)]),
    ("sum_neg_axis", lambda a: a.sum(axis=-1), [A(2, 3, 4)]),
    ("max", lambda a: a.max(), [A(2, 3, 4)]),
    ("max_axis1", lambda a: a.max(axis=1), [A(2, 3, 4)]),
    ("max_axis1_keep", lambda a: a.max(axis=1, keepdims=True), [A(2, 3, 4)]),
    ("max_axes", lambda a: a.max(axis=(0, 2)), [A(2, 3, 4)]),
    ("mean", lambda a: a.mean(), [A(2, 3, 4)]),
    ("mean_axis0", lambda a: a.mean(axis=0), [A(2, 3, 4)]),
    ("mean_axes_keep", lambda a: a.mean(axis=(0, -1), keepdims=True), [A(2, 3, 4)]),
    ("softmax", lambda a: a.softmax(), [A(3, 4)]),
    ("softmax_axis0", lambda a: a.softmax(axis=0), [A(3, 4)]),
    ("log_softmax", lambda a: a.log_softmax(), [A(3, 4)]),
    ("log_softmax_axis0", lambda a: a.log_softmax(axis=0), [A(2, 3, 4)]),
    # movement
    ("reshape", lambda a: a.reshape(4, 6), [A(2, 3, 4)]),
    ("reshape_tuple_infer", lambda a: a.reshape((6, -1)), [A(2, 3, 4)]),
    ("flatten", lambda a: a.flatten(), [A(2, 3, 4)]),
    ("T", lambda a: a.T, [A(3, 4)]),
    ("transpose_axes", lambda a: a.transpose((1, 0, 2)), [A(2, 3, 4)]),
    ("transpose_neg_axes", lambda a: a.transpose(-1, 0, 1), [A(2, 3, 4)]),
    # indexing
    ("getitem_int", lambda a: a[1], [A(3, 4)]),
    ("getitem_slices", lambda a: a[1:, ::2], [A(3, 4)]),
    ("getitem_ellipsis", lambda a: a[..., -1], [A(2, 3, 4)]),
    ("getitem_repeats", lambda a: a[REPEATS], [A(3, 4)]),
    ("getitem_list", lambda a: a[[2, 2, 0]], [A(3, 4)]),
    ("getitem_2d_index", lambda a: a[np.array([[0, 1], [1, 1]])], [A(3, 4)]),
    ("getitem_pairs", lambda a: a[REPEATS, np.array([3, 3, 0, 3, 1])], [A(3, 4)]),
    ("getitem_array_slice", lambda a: a[REPEATS, 1:3], [A(3, 4)]),
    ("getitem_mask", lambda a: a[MASK], [A(3, 4)]),
    ("getitem_mask2d", lambda a: a[MASK2], [A(3, 4)]),
    ("concatenate0", lambda a, b: concatenate([a, b]), [A(2, 3), A(4, 3)]),
    ("concatenate1", lambda a, b, c: concatenate([a, b, c], axis=1), [A(2, 3), A(2, 1), A(2, 2)]),
    ("stack0", lambda a, b: stack([a, b]), [A(2, 3), A(2, 3)]),
    ("stack_last", lambda a, b, c: stack([a, b, c], axis=-1), [A(2, 3), A(2, 3), A(2, 3)]),
    # matmul
    ("matmul_2d", lambda a, b: a @ b, [A(3, 4), A(4, 5)]),
    ("matmul_1d_2d", lambda a, b: a @ b, [A(4), A(4, 5)]),
    ("matmul_2d_1d", lambda a, b: a @ b, [A(3, 4), A(4)]),
    ("matmul_1d_1d", lambda a, b: a @ b, [A(4), A(4)]),
    ("matmul_batched_2d", lambda a, b: a @ b, [A(2, 3, 4), A(4, 5)]),
    ("matmul_batched", lambda a, b: a @ b, [A(2, 3, 4), A(2, 4, 5)]),
    ("matmul_batch_bcast", lambda a, b: a @ b, [A(2, 1, 3, 4), A(5, 4, 2)]),
    ("matmul_1d_batched", lambda a, b: a @ b, [A(4), A(2, 4, 5)]),
    ("rmatmul_ndarray", lambda a: np.arange(6.0).reshape(2, 3) @ a, [A(3, 4)]),
    # dropout: a fresh generator per call, so every evaluation draws the same mask
    ("dropout", lambda a: a.dropout(0.3, rng=np.random.default_rng(7)), [A(4, 5)]),
    ("dropout_eval", lambda a: a.dropout(0.3, training=False), [A(4, 5)]),
    # a composite through many ops at once
    ("composite", lambda a, b: ((a @ b).tanh() * 2 - b.sum(0)).log_softmax().mean(),
     [A(3, 4), A(4, 5)]),
]


@pytest.mark.parametrize("fn, specs", [pytest.param(f, s, id=n) for n, f, s in CASES])
def test_gradcheck(fn, specs, rng):
    check(fn, specs, rng)


# ---------------------------------------------------------------- hypothesis: broadcasting

BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
          "mul": lambda a, b: a * b, "div": lambda a, b: a / b}


@settings(max_examples=25, deadline=None)
@given(
    op=st.sampled_from(sorted(BINARY)),
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_broadcasting_ops_gradcheck(op, shapes, seed):
    rng = np.random.default_rng(seed)
    (sa, sb), out_shape = shapes.input_shapes, shapes.result_shape
    a = Tensor(rng.uniform(-1, 1, sa), requires_grad=True)
    # divisors bounded away from 0: |b| in [0.5, 2)
    b = Tensor(rng.choice([-1.0, 1.0], sb) * rng.uniform(0.5, 2.0, sb), requires_grad=True)
    out = BINARY[op](a, b)
    assert out.shape == out_shape
    result = gradcheck(BINARY[op], [a, b])
    assert [c.shape for c in result.inputs] == [sa, sb]
    assert result.max_abs_err < 1e-6


# ---------------------------------------------------------------- against the scalar Value engine
# The same expression runs on Tensors and, entry by entry, on Values (both speak + - * / **
# exp log relu tanh sigmoid). Broadcast operands share their Values, so Value's gradient
# accumulation is the oracle for unbroadcast.

ELEMENTWISE = [
    ("add", lambda a, b: a + b, [A(2, 3), A(3)]),
    ("sub", lambda a, b: a - b, [A(2, 1), A(3)]),
    ("mul", lambda a, b: a * b, [A(2, 3), A(1, 3)]),
    ("div", lambda a, b: a / b, [A(2, 3), P(3)]),
    ("neg", lambda a: -a, [A(2, 3)]),
    ("radd_rsub", lambda a: 1.5 + (2.0 - a), [A(2, 3)]),
    ("rmul_rtruediv", lambda a: 3.0 * (2.0 / a), [P(2, 3)]),
    ("pow", lambda a: a**3, [A(2, 3)]),
    ("pow_neg", lambda a: a**-1.5, [P(2, 3)]),
    ("exp", lambda a: a.exp(), [A(2, 3)]),
    ("log", lambda a: a.log(), [P(2, 3)]),
    ("relu", lambda a: a.relu(), [K(2, 3)]),
    ("tanh", lambda a: a.tanh(), [A(2, 3)]),
    ("sigmoid", lambda a: (a * 5).sigmoid(), [A(2, 3)]),
    ("composite", lambda a, b: (a * b + a.exp()).tanh() - b / (a.sigmoid() + 1), [A(2, 3), P(3)]),
]


def value_reference(fn, arrays):
    """Forward values and d(sum of outputs)/d(input) computed one scalar at a time."""
    values = [np.array([Value(v) for v in x.ravel()], dtype=object).reshape(x.shape)
              for x in arrays]
    out_shape = np.broadcast_shapes(*(x.shape for x in arrays))
    grids = [np.broadcast_to(v, out_shape) for v in values]
    outs = [fn(*(g[idx] for g in grids)) for idx in np.ndindex(out_shape)]
    sum(outs).backward()
    forward = np.array([o.data for o in outs]).reshape(out_shape)
    grads = [np.vectorize(lambda v: v.grad, otypes=[float])(v) for v in values]
    return forward, grads


@pytest.mark.parametrize("fn, specs", [pytest.param(f, s, id=n) for n, f, s in ELEMENTWISE])
def test_elementwise_matches_value_engine(fn, specs, rng):
    inputs = [make_input(s, rng) for s in specs]
    out = fn(*inputs)
    out.backward(np.ones(out.shape))
    forward, grads = value_reference(fn, [x.data for x in inputs])
    np.testing.assert_allclose(out.data, forward, rtol=1e-9, atol=1e-12)
    for x, g in zip(inputs, grads):
        np.testing.assert_allclose(x.grad, g, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- exact numbers


def test_unbroadcast_sums_prepended_and_stretched_axes():
    g = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(unbroadcast(g, (3, 1)), g.sum(axis=(0, 2))[:, None])
    np.testing.assert_array_equal(unbroadcast(g, ()), np.array(276.0))
    assert unbroadcast(g, (2, 3, 4)) is g


def test_max_splits_gradient_between_ties():
    x = Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
    x.max(axis=1).sum().backward()
    np.testing.assert_allclose(x.grad, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])


def test_getitem_repeated_indices_accumulate():
    x = Tensor(np.arange(4.0), requires_grad=True)
    x[np.array([0, 2, 0, 0, 3])].backward(np.array([1.0, 10.0, 100.0, 1000.0, 5.0]))
    np.testing.assert_array_equal(x.grad, [1101.0, 0.0, 10.0, 5.0])


def test_getitem_mask_gathers_and_scatters():
    x = Tensor(np.arange(3.0), requires_grad=True)
    y = x[MASK]
    np.testing.assert_array_equal(y.data, [0.0, 2.0])
    y.backward(np.array([4.0, 5.0]))
    np.testing.assert_array_equal(x.grad, [4.0, 0.0, 5.0])


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
])
def test_matmul_forward_matches_numpy(a_shape, b_shape, rng):
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    out = Tensor(a) @ Tensor(b)
    np.testing.assert_allclose(out.data, a @ b, rtol=1e-12)
    assert out.shape == np.matmul(a, b).shape


def test_softmax_rows_sum_to_one_and_match_formula():
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    s = Tensor(x).softmax(axis=1).data
    np.testing.assert_allclose(s[0], np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum(), rtol=1e-12)
    np.testing.assert_allclose(s[1], [1 / 3] * 3, rtol=1e-12)


def test_log_softmax_stable_for_large_logits():
    out = Tensor(np.array([1000.0, 0.0])).log_softmax().data
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, [0.0, -1000.0], atol=1e-12)
    out32 = Tensor([1000.0, 0.0]).log_softmax().data
    np.testing.assert_allclose(out32, [0.0, -1000.0], atol=1e-4)


def test_log_softmax_gradient_stable_for_large_logits():
    x = Tensor(np.array([1000.0, 0.0]), requires_grad=True)
    x.log_softmax()[0].backward()
    np.testing.assert_allclose(x.grad, [0.0, 0.0], atol=1e-12)  # 1 - softmax = (0, -e^-1000)


def test_sigmoid_stable_at_extremes():
    x = Tensor(np.array([1000.0, -1000.0, 0.0]), requires_grad=True)
    s = x.sigmoid()
    np.testing.assert_array_equal(s.data, [1.0, 0.0, 0.5])
    s.sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.25])
    assert np.all(np.isfinite(Tensor([1000.0, -1000.0]).sigmoid().data))


def test_elu_and_leaky_relu_values():
    x = Tensor(np.array([-2.0, 3.0]))
    np.testing.assert_allclose(x.elu(0.5).data, [0.5 * math.expm1(-2.0), 3.0])
    np.testing.assert_allclose(x.leaky_relu(0.1).data, [-0.2, 3.0])
    np.testing.assert_allclose(x.clip(-1.0, 2.0).data, [-1.0, 2.0])


# ---------------------------------------------------------------- errors name the shapes


def test_matmul_error_names_both_shapes():
    with pytest.raises(ShapeError, match=r"\(3, 4\).*\(5, 2\)"):
        Tensor(np.ones((3, 4))) @ Tensor(np.ones((5, 2)))


def test_add_error_names_both_shapes():
    with pytest.raises(ShapeError, match=r"\(3,\).*\(4,\)"):
        Tensor(np.ones(3)) + Tensor(np.ones(4))


def test_reshape_error_names_shapes():
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4, 2\)"):
        Tensor(np.ones((2, 3))).reshape(4, 2)


def test_transpose_bad_axes_error():
    with pytest.raises(ShapeError, match=r"\(2, 3\)"):
        Tensor(np.ones((2, 3))).transpose(0, 0)


@pytest.mark.parametrize("shapes, axis", [(((2, 2), (3, 3)), 1), (((2,), (2, 3)), 1)])
def test_concatenate_error_names_shapes(shapes, axis):
    with pytest.raises(ShapeError, match=r"\(2, 2\), \(3, 3\)|\(2,\), \(2, 3\)"):
        concatenate([Tensor(np.ones(s)) for s in shapes], axis=axis)


def test_stack_error_names_shapes():
    with pytest.raises(ShapeError, match=r"\(2,\), \(3,\)"):
        stack([Tensor(np.ones(2)), Tensor(np.ones(3))])


# ---------------------------------------------------------------- issue #12: numerical edges
# torch 2.x prints (float64): relu([-inf, 1]) = [0, 1]; d(x**0)/dx at 0 = 0;
# 0.0 ** [-1, 0, 2] = [inf, 1, 0] with gradient [-inf, 0, 0]; (-2.0) ** [2, 3] = [4, -8].


def test_relu_of_minus_infinity_is_zero():
    np.testing.assert_array_equal(Tensor(np.array([-np.inf, -1.0, 1.0, np.inf])).relu().data,
                                  [0.0, 0.0, 1.0, np.inf])


def test_the_gradient_of_x_to_the_zero_is_zero_even_at_zero():
    x = Tensor(np.array([0.0, 2.0]), requires_grad=True)
    y = x**0
    y.sum().backward()
    np.testing.assert_array_equal(y.data, [1.0, 1.0])
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


def test_zero_to_the_x_and_its_gradient_match_torch():
    x = Tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True)
    y = 0.0**x
    y.sum().backward()
    np.testing.assert_array_equal(y.data, [np.inf, 1.0, 0.0])
    np.testing.assert_array_equal(x.grad, [-np.inf, 0.0, 0.0])


def test_a_negative_base_to_an_integer_power_is_exact():
    x = Tensor(np.array([2.0, 3.0, 0.5]), requires_grad=True)
    y = (-2.0) ** x
    np.testing.assert_array_equal(y.data[:2], [4.0, -8.0])
    assert np.isnan(y.data[2])  # a real power of a negative base: NaN, as in torch


def test_a_positive_base_to_the_x_against_finite_differences_and_value(tensor64):
    x = tensor64(3, 2)
    assert gradcheck(lambda t: 1.5**t, [x]).passed
    v = Value(0.7)
    y = 1.5**v
    y.backward()
    assert y.data == pytest.approx(1.5**0.7)
    assert v.grad == pytest.approx(1.5**0.7 * math.log(1.5))
    zero = Value(0.0)
    (zero**0).backward()  # the scalar reference agrees: d(x^0)/dx = 0 at 0
    assert zero.grad == 0.0


# torch 2.x: relu's gradient at exactly 0 is 0 (the subgradient it picks), leaky_relu's the slope.
# Every relu the models reach is checked on exact zeros: a `>=` in any mask gives 1 there.


def test_relu_gradient_at_exactly_zero_is_zero_like_torch():
    from mgsparse.nn import ReLU
    from mgsparse.sparse import SparseTensor

    data = np.array([-1.5, 0.0, -0.0, 2.0, 0.0])
    for relu in (lambda t: t.relu(), ReLU()):
        x = Tensor(data.copy(), requires_grad=True)
        (relu(x) * Tensor(np.arange(1.0, 6.0))).sum().backward()
        np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.0, 4.0, 0.0])
    values = [Value(v) for v in data]
    sum((v.relu() * w for v, w in zip(values, range(1, 6))), Value(0.0)).backward()
    assert [v.grad for v in values] == [0.0, 0.0, 0.0, 4.0, 0.0]
    vals = Tensor(data.copy(), requires_grad=True)  # stored zeros of a sparse operand
    A = SparseTensor(np.array([[0, 0, 1, 1, 2], [0, 1, 0, 2, 1]]), vals, (3, 3))
    A.relu().values.sum().backward()
    np.testing.assert_array_equal(vals.grad, [0.0, 0.0, 0.0, 1.0, 0.0])


def test_leaky_relu_gradient_at_exactly_zero_is_the_slope_like_torch():
    x = Tensor(np.array([-1.0, 0.0, 1.0]), requires_grad=True)
    x.leaky_relu(0.1).sum().backward()
    np.testing.assert_allclose(x.grad, [0.1, 0.1, 1.0])
