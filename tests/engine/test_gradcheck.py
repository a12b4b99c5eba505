"""gradcheck itself: result fields, a negative control that must be caught, and its input rules."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.engine import ops
from mgsparse.engine.gradcheck import InputCheck
from mgsparse.errors import GradcheckError


class MulWrongB(ops.Mul):
    """Multiplication whose backward hands input b the gradient meant for a (g·b instead of g·a)."""

    @staticmethod
    def backward(ctx, g):
        _, b = ctx.saved_tensors
        return g * b, g * b


def test_result_fields_for_a_correct_op(tensor64):
    a, b = tensor64(3, 4), tensor64(4)
    result = gradcheck(lambda x, y: x * y, [a, b])
    assert result.passed and bool(result)
    summary = [(c.index, c.shape, c.passed) for c in result.inputs]
    assert summary == [(0, (3, 4), True), (1, (4,), True)]
    assert result.max_abs_err < 1e-9
    assert result.max_rel_err < 1e-6


def test_wrong_backward_raises(tensor64):
    a, b = tensor64(3, 4), tensor64(3, 4)
    with pytest.raises(GradcheckError, match=r"input 1 of shape \(3, 4\)"):
        gradcheck(MulWrongB.apply, [a, b])


def test_wrong_backward_reported_with_its_exact_error(tensor64):
    a, b = tensor64(3, 4), tensor64(3, 4)
    result = gradcheck(MulWrongB.apply, [a, b], raise_exception=False, seed=5)
    assert not result.passed and not bool(result)
    assert result.inputs[0].passed and not result.inputs[1].passed
    # gradcheck weights the output by w ~ N(0, 1) from `seed`: analytic w·b, numeric w·a
    w = np.random.default_rng(5).standard_normal((3, 4))
    expected = np.abs(w * (b.data - a.data)).max()
    assert result.max_abs_err == pytest.approx(expected, rel=1e-6)
    assert result.inputs[1].max_abs_err == result.max_abs_err
    assert result.inputs[0].max_abs_err < 1e-9


def test_coarse_eps_fails_a_tight_tolerance(tensor64):
    # tinygrad's negative control: finite differences with a huge eps are wrong by O(eps²)
    x = tensor64(5)
    result = gradcheck(lambda t: t.exp(), [x], eps=0.5, atol=1e-8, rtol=1e-8, raise_exception=False)
    assert not result.passed
    assert result.max_abs_err > 1e-3
    assert gradcheck(lambda t: t.exp(), [x]).passed


def test_only_inputs_requiring_grad_are_checked(tensor64):
    a, b = tensor64(2, 3), tensor64(2, 3, requires_grad=False)
    result = gradcheck(lambda x, y, axis: (x * y).sum(axis=axis), [a, b, 1])
    assert [c.index for c in result.inputs] == [0]
    assert isinstance(result.inputs[0], InputCheck)


def test_float32_inputs_checked_in_float64_and_left_untouched():
    x = Tensor(np.array([0.3, -1.2, 2.0], dtype=np.float32), requires_grad=True)
    result = gradcheck(lambda t: (t * t).tanh(), [x])
    assert result.max_abs_err < 1e-8  # float32 differences would be ~1e-3 off
    assert x.grad is None and x.dtype == np.float32


def test_no_input_requiring_grad_is_an_error(tensor64):
    with pytest.raises(GradcheckError, match="no input requires grad"):
        gradcheck(lambda t: t * 2, [tensor64(3, requires_grad=False)])


def test_output_independent_of_inputs_is_an_error(tensor64):
    with pytest.raises(GradcheckError, match="does not depend"):
        gradcheck(lambda t: Tensor(np.ones(3)), [tensor64(3)])


def test_unused_input_gets_zero_gradient_and_passes(tensor64):
    result = gradcheck(lambda x, y: x * 2, [tensor64(3), tensor64(3)])
    assert result.passed and result.inputs[1].max_abs_err == 0.0
