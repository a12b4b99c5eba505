"""The dense op cases: their inputs, their scalar oracles, and the registry's names."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor, Value
from mgsparse.engine.cases import ENGINE_OPS, KINK_MARGIN, SIZES, by_name, normal, op_case


def scalar_forward(case, inputs) -> np.ndarray:
    """The case's scalar oracle on Values holding the inputs' numbers, as float64."""
    args = [np.vectorize(Value, otypes=[object])(a.data) if isinstance(a, Tensor) else a
            for a in inputs]
    out = np.asarray(case.scalar(*args), dtype=object)
    return np.vectorize(lambda v: getattr(v, "data", v), otypes=[np.float64])(out)


def test_registry_order_and_names():
    names = list(ENGINE_OPS)
    assert len(names) == 33 and names[:5] == ["add", "sub", "mul", "div", "pow_tensor"]
    assert names[-4:] == ["matmul", "matmul_vector", "matmul_batched", "dropout"]
    assert all(case.name == name for name, case in ENGINE_OPS.items())
    assert [n for n, c in ENGINE_OPS.items() if c.scalar is None] == ["max"]


def test_normal_keeps_every_entry_away_from_the_kinks(rng):
    x = normal(rng, (500,), kinks=(0.0, 0.5))
    assert x.dtype == np.float64 and x.requires_grad
    assert np.min(np.abs(x.data)) >= KINK_MARGIN
    assert np.min(np.abs(x.data - 0.5)) >= KINK_MARGIN - 1e-12


@pytest.mark.parametrize("size", sorted(SIZES))
def test_inputs_follow_the_size(size):
    n, m = SIZES[size]
    a, b = ENGINE_OPS["matmul"].build(np.random.default_rng(0), size)
    assert (a.shape, b.shape) == ((n, m), (m, 3))
    assert a.dtype == b.dtype == np.float64 and a.requires_grad and b.requires_grad
    x, mask = ENGINE_OPS["getitem_mask"].build(np.random.default_rng(0), size)
    assert x.shape == mask.shape == (n, m) and mask.dtype == bool


@pytest.mark.parametrize("name", [n for n, c in ENGINE_OPS.items() if c.scalar is not None])
def test_scalar_oracle_gives_the_same_output_as_the_op(name):
    case = ENGINE_OPS[name]
    inputs = case.build(np.random.default_rng(0), "small")
    out = case.fn(*inputs)
    np.testing.assert_allclose(scalar_forward(case, inputs), out.data, rtol=1e-12, atol=1e-12)


def test_op_case_wraps_a_single_value_as_a_0d_array():
    case = op_case("total", lambda r, n, m: (normal(r, (n, m)),), lambda x: x.sum(),
                   lambda a: a.sum())
    x, = case.build(np.random.default_rng(0), "small")
    out = case.scalar(np.vectorize(Value, otypes=[object])(x.data))
    assert isinstance(out, np.ndarray) and out.shape == () and isinstance(out[()], Value)
    assert out[()].data == pytest.approx(float(x.data.sum()), abs=1e-12)


def test_a_repeated_name_is_refused():
    with pytest.raises(ValueError, match="^duplicate gradcheck cases: add, neg$"):
        by_name([ENGINE_OPS["neg"], ENGINE_OPS["add"], ENGINE_OPS["neg"], ENGINE_OPS["add"]])
