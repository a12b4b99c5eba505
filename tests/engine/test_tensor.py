"""Tensor and the Function protocol: dtypes, the backward walk, graph lifetime, no_grad, dropout."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mgsparse import Function, Tensor, no_grad
from mgsparse.engine import is_grad_enabled
from mgsparse.engine.masks import keep_mask, kept_scale
from mgsparse.errors import HyperparameterError, MgsparseError, ShapeError

# ---------------------------------------------------------------- dtype rules


def test_python_data_is_float32_and_numpy_float64_stays():
    assert Tensor([1, 2]).dtype == np.float32
    assert Tensor(3.0).dtype == np.float32
    assert Tensor(np.arange(3)).dtype == np.float32  # integers become the default float
    assert Tensor(np.ones(2)).dtype == np.float64
    assert Tensor(np.float64(2.0)).dtype == np.float64
    assert Tensor([1, 2], dtype=np.float64).dtype == np.float64


def test_non_float_dtype_is_refused():
    with pytest.raises(ShapeError, match="int64"):
        Tensor([1, 2], dtype=np.int64)


def test_mixed_float_dtypes_raise_naming_both():
    a, b = Tensor(np.ones(3, dtype=np.float32)), Tensor(np.ones(3))
    with pytest.raises(ShapeError, match=r"float32.*float64"):
        a + b
    with pytest.raises(ShapeError, match=r"float64.*float32"):
        b @ a


def test_mixed_dtypes_are_refused_after_a_constant_and_among_three_operands():
    class Three(Function):
        @staticmethod
        def forward(ctx, scale, a, b, c):
            return scale * (a + b + c)

    a, b = Tensor(np.ones(2, dtype=np.float32)), Tensor(np.ones(2))
    with pytest.raises(ShapeError, match=r"Three: operands have different dtypes \(float32\(2,\), "
                                         r"float32\(2,\), float64\(2,\)\)"):
        Three.apply(2.0, a, a, b)


class _Outputs(Function):
    """Returns what it is told to: the output array as is, a numpy scalar, or another dtype."""

    @staticmethod
    def forward(ctx, x, kind):
        if kind == "cast":
            ctx.out_dtype = np.float64
            return x.astype(np.float64)
        return {"scalar": x.sum(), "same": x}.get(kind, x * 2)


@pytest.mark.parametrize("kind", ["array", "same", "scalar", "cast"])
def test_apply_wraps_every_kind_of_output_as_tensor_would(kind):
    """An output array of the right dtype is wrapped without conversion (no copy); every
    field is the one `Tensor(data, dtype, requires_grad)` sets."""
    x = Tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    out = _Outputs.apply(x, kind)
    same = Tensor(out.data, dtype=out.dtype, requires_grad=True)
    assert type(out.data) is np.ndarray and out.dtype == same.dtype
    assert out.dtype == (np.float64 if kind == "cast" else np.float32)
    assert {k: v for k, v in vars(out).items() if k not in ("data", "_ctx")} == \
        {k: v for k, v in vars(same).items() if k not in ("data", "_ctx")}
    assert out._ctx is not None and out.requires_grad
    assert (out.data is x.data) == (kind == "same")
    with no_grad():
        assert not _Outputs.apply(x, kind).requires_grad


@pytest.mark.parametrize("const", [2.0, 3, np.float64(2.0), np.ones(3), np.arange(3.0) + 1])
def test_constants_keep_the_tensor_dtype(const):
    x = Tensor([1.0, 2.0, 3.0])
    for out in (x + const, const + x, x * const, const * x, x - const, const - x, x / const):
        assert isinstance(out, Tensor)
        assert out.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grads_have_the_input_dtype(dtype):
    x = Tensor(np.array([1.0, -2.0, 3.0], dtype=dtype), requires_grad=True)
    w = Tensor(np.ones((3, 2), dtype=dtype), requires_grad=True)
    ((x @ w).tanh().sum() + x.max() + x[np.array([0, 0])].sum()).backward()
    assert x.grad.dtype == dtype and w.grad.dtype == dtype


def test_astype_changes_dtype_and_casts_gradient_back():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x.astype(np.float64)
    assert y.dtype == np.float64
    (y * Tensor(np.array([3.0, 4.0]))).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])


# ---------------------------------------------------------------- conversions and repr


def test_item_numpy_detach_zero_grad_repr():
    x = Tensor(np.array([[2.5]]), requires_grad=True)
    assert x.item() == 2.5
    assert x.numpy() is x.data
    y = (x * 2).detach()
    assert not y.requires_grad and y._ctx is None and y.item() == 5.0
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [[3.0]])
    x.zero_grad()
    assert x.grad is None
    assert repr(x) == "Tensor(shape=(1, 1), dtype=float64, requires_grad=True)"
    assert repr(x * 2) == "Tensor(shape=(1, 1), dtype=float64, requires_grad=True, op=Mul)"
    with pytest.raises(ShapeError, match=r"\(2,\)"):
        Tensor([1.0, 2.0]).item()


# ---------------------------------------------------------------- backward walk


def test_tensor_used_twice_gets_sum_of_gradients():
    x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, -4.0, 6.0])
    y = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (y + y).sum().backward()
    np.testing.assert_array_equal(y.grad, [2.0, 2.0])


def test_diamond_graph_accumulates_through_both_paths():
    x = Tensor(np.array(2.0), requires_grad=True)
    a = x * 3
    (a * a + a.exp()).backward()  # d/dx (9x² + e^{3x}) = 18x + 3e^{3x}
    np.testing.assert_allclose(x.grad, 36.0 + 3 * np.exp(6.0), rtol=1e-12)


def test_grads_accumulate_across_backward_calls():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (x * 3).sum().backward()
    (x * 4).sum().backward()
    np.testing.assert_array_equal(x.grad, [7.0, 7.0])


def test_long_chain_backpropagates_without_recursion_error():
    links = 20_000  # many times Python's recursion limit: a recursive backward would fail
    assert links > 10 * sys.getrecursionlimit()
    x = Tensor(np.array([1.0]), requires_grad=True)
    y = x
    for _ in range(links):
        y = y + 1.0
    y.sum().backward()
    assert y.data[0] == links + 1.0
    np.testing.assert_array_equal(x.grad, [1.0])


def test_backward_on_non_scalar_without_grad_names_shape():
    y = Tensor(np.ones((2, 3)), requires_grad=True) * 2
    with pytest.raises(ShapeError, match=r"\(2, 3\)"):
        y.backward()


def test_backward_with_wrong_gradient_shape_names_both():
    y = Tensor(np.ones((2, 3)), requires_grad=True) * 2
    with pytest.raises(ShapeError, match=r"\(3,\).*\(2, 3\)"):
        y.backward(np.ones(3))


def test_backward_without_requires_grad_is_an_error():
    with pytest.raises(MgsparseError, match="does not require grad"):
        (Tensor([1.0]) * 2).sum().backward()


def test_backward_with_explicit_gradient_weights_outputs():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (x * x).backward(np.array([10.0, 100.0]))
    np.testing.assert_array_equal(x.grad, [20.0, 400.0])


# ---------------------------------------------------------------- graph lifetime


def test_graph_freed_after_backward():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(MgsparseError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward_that_doubles_grads():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
    y.backward()
    np.testing.assert_array_equal(x.grad, [4.0, 8.0])


def test_only_leaves_keep_grad_unless_retain_grad():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    hidden, kept = x * 2, (x * 3).retain_grad()
    (hidden * kept).sum().backward()  # 6x²: dx = 12x, d(hidden) = kept, d(kept) = hidden
    assert hidden.grad is None
    np.testing.assert_array_equal(kept.grad, [2.0, 4.0])
    np.testing.assert_array_equal(x.grad, [12.0, 24.0])
    assert x.is_leaf and not hidden.is_leaf


# ---------------------------------------------------------------- no_grad


def test_no_grad_builds_no_graph():
    x = Tensor(np.ones(3), requires_grad=True)
    with no_grad():
        out = (x * 2 + 1).exp().sum()
    assert out.requires_grad is False
    assert out._ctx is None
    assert (x * 2)._ctx is not None  # recording resumes after the block


def test_no_grad_nests_and_restores_state():
    assert is_grad_enabled()
    with no_grad():
        with no_grad():
            assert not is_grad_enabled()
        assert not is_grad_enabled()
    assert is_grad_enabled()


def test_no_grad_restores_state_after_exception():
    with pytest.raises(ShapeError), no_grad():
        Tensor(np.ones(3)) + Tensor(np.ones(4))
    assert is_grad_enabled()
    assert (Tensor(np.ones(2), requires_grad=True) * 2).requires_grad


# ---------------------------------------------------------------- Function protocol


SEEN_BY_FORWARD: dict = {}


class ScaleBy(Function):
    """y = k·x with a constant (non-Tensor) k: records what the engine hands the op."""

    @staticmethod
    def forward(ctx, x, k):
        SEEN_BY_FORWARD.update(x_type=type(x), k=k, needs=ctx.needs_input_grad)
        ctx.save_for_backward(x)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        """dx = k·g; no gradient for the constant k."""
        assert ctx.saved_tensors[0].shape == g.shape
        return g * ctx.k, None


def test_function_receives_arrays_constants_and_needs_input_grad():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = ScaleBy.apply(x, 5.0)
    assert SEEN_BY_FORWARD == {"x_type": np.ndarray, "k": 5.0, "needs": (True, False)}
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [5.0, 5.0])
    np.testing.assert_array_equal(y.data, [5.0, 10.0])


class WrongShape(Function):
    @staticmethod
    def forward(ctx, x):
        return x.sum(axis=0)

    @staticmethod
    def backward(ctx, g):
        return g  # missing the broadcast back to (2, 3)


def test_engine_rejects_a_backward_of_the_wrong_shape():
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ShapeError, match=r"WrongShape.*\(3,\).*\(2, 3\)"):
        WrongShape.apply(x).sum().backward()


# ---------------------------------------------------------------- dropout


def test_dropout_gradient_is_the_mask_scaling():
    p, shape = 0.4, (50, 40)
    x = Tensor(np.ones(shape), requires_grad=True)
    y = x.dropout(p, rng=np.random.default_rng(3))
    y.sum().backward()
    expected = keep_mask(shape, p, np.random.default_rng(3)) * kept_scale(p)
    np.testing.assert_allclose(x.grad, expected, rtol=1e-12)
    np.testing.assert_allclose(y.data, expected, rtol=1e-12)
    assert 0.3 < (x.grad == 0).mean() < 0.5  # about p of the entries are dropped


def test_dropout_keeps_float32():
    y = Tensor(np.ones((4, 4), dtype=np.float32)).dropout(0.5, rng=np.random.default_rng(0))
    assert y.dtype == np.float32
    assert set(np.unique(y.data)) <= {0.0, 2.0}


@pytest.mark.parametrize("p, training", [(0.5, False), (0.0, True)])
def test_dropout_identity_cases(p, training):
    x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    y = x.dropout(p, training=training, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(y.data, x.data)
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, -4.0, 6.0])


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5])
def test_dropout_probability_out_of_range(p):
    with pytest.raises(HyperparameterError, match=rf"\[0, 1\).*{p}"):
        Tensor(np.ones(3)).dropout(p)


# ---------------------------------------------------------------- issue #12: edges of the engine


def test_a_0d_gradient_is_an_ndarray_of_the_data_shape():
    """numpy turns a 0-d sum into a scalar; `.grad` must stay an array (clipping scales it)."""
    s = Tensor(np.array(3.0), requires_grad=True)
    v = Tensor(np.ones(2), requires_grad=True)
    (s * v).sum().backward()
    assert type(s.grad) is np.ndarray and s.grad.shape == () and s.grad == 2.0
    (s * v).sum().backward()  # accumulating keeps it an array
    assert type(s.grad) is np.ndarray and s.grad == 4.0


def _saved_forward():
    """loss = Σ w·w·x, whose gradient 2·w·x = [6, 16] reads the saved w."""
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    return w, (w * w * Tensor(np.array([3.0, 4.0]))).sum()


def test_a_raw_in_place_write_to_a_saved_array_is_refused():
    """Issue #12, defect 6: `w.data[...] = …` after the forward gave [0, 8], not [6, 16]."""
    w, loss = _saved_forward()
    with pytest.raises(ValueError, match="read-only"):
        w.data[...] = [0.0, 1.0]
    loss.backward()
    np.testing.assert_array_equal(w.grad, [6.0, 16.0])
    w.data[...] = [0.0, 1.0]  # the backward released the array
    np.testing.assert_array_equal(w.data, [0.0, 1.0])


def test_a_sanctioned_in_place_write_bumps_the_version_and_backward_names_the_op():
    from mgsparse.kernels.inplace import modified_in_place

    w, loss = _saved_forward()
    with modified_in_place(w) as data:
        data += 1.0
    assert w._version == 1
    with pytest.raises(MgsparseError, match=r"^Mul\.backward: an input of shape \(2,\) saved "
                                            r"for the backward was modified in place"):
        loss.backward()
    w2, loss2 = _saved_forward()
    loss2.backward()  # an untouched graph is unaffected
    np.testing.assert_array_equal(w2.grad, [6.0, 16.0])


def test_read_only_locks_are_counted_and_released_with_the_graph():
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    first, second = (w * w).sum(), (w * 3.0).sum()  # two live graphs save w.data
    first.backward()
    assert not w.data.flags.writeable  # `second` still holds it
    del second  # a graph dropped without backward releases its arrays too
    assert w.data.flags.writeable
    frozen = np.ones(2)
    frozen.flags.writeable = False
    (Tensor(frozen, requires_grad=True) * 2.0).sum().backward()
    assert not frozen.flags.writeable  # an array read-only before stays read-only


@pytest.mark.parametrize("slice_first", [True, False])
def test_a_slice_saved_beside_its_base_releases_without_error(slice_first):
    """Issue #23: a slice taken before its base was saved kept its own writeable flag, and the
    backward failed with "cannot set WRITEABLE flag to True" releasing it under a locked base."""
    from mgsparse.kernels import inplace

    x = Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    w = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    v = x[:2]  # taken while x.data is still writeable
    y = ((v * w[0]).sum() + (x @ w).sum()) if slice_first else ((x @ w).sum() + (v * w[0]).sum())
    assert not x.data.flags.writeable and not v.data.flags.writeable
    y.backward()
    np.testing.assert_array_equal(x.grad, [[4.0, 9.0], [4.0, 9.0], [3.0, 7.0]])
    np.testing.assert_array_equal(w.grad, [[6.0 + 2.0, 6.0 + 4.0], [9.0, 9.0]])
    assert x.data.flags.writeable and v.data.flags.writeable and w.data.flags.writeable
    assert inplace._BUFFERS == {}


def test_a_buffer_stays_locked_while_any_view_of_it_is_held():
    x = Tensor(np.arange(4.0), requires_grad=True)
    v = x[1:]
    first, second = (x * 2.0).sum(), (v * v).sum()  # two graphs, one buffer
    first.backward()
    assert not v.data.flags.writeable  # `second` still holds the slice
    second.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0, 8.0])
    x.data[0] = 5.0  # released: writes work again
