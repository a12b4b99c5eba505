"""The scalar Value reference: micrograd's own sanity numbers, each op's derivative, long chains."""

from __future__ import annotations

import math
import sys

import pytest

from mgsparse import Value


def test_micrograd_sanity_check():
    # micrograd's test_sanity_check; PyTorch gives y = -20, dy/dx = 46
    x = Value(-4.0)
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    assert y.data == -20.0
    assert x.grad == 46.0


def test_micrograd_more_ops():
    # micrograd's test_more_ops, numbers checked there against PyTorch
    a, b = Value(-4.0), Value(2.0)
    c = a + b
    d = a * b + b**3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    g.backward()
    assert g.data == pytest.approx(24.70408163265306, abs=1e-9)
    assert a.grad == pytest.approx(138.83381924198252, abs=1e-9)
    assert b.grad == pytest.approx(645.5772594752186, abs=1e-9)


UNARY = [
    ("exp", lambda v: v.exp(), math.exp, 0.7),
    ("log", lambda v: v.log(), math.log, 1.7),
    ("tanh", lambda v: v.tanh(), math.tanh, -0.4),
    ("sigmoid", lambda v: v.sigmoid(), lambda x: 1 / (1 + math.exp(-x)), 0.3),
    ("sigmoid_neg", lambda v: v.sigmoid(), lambda x: 1 / (1 + math.exp(-x)), -2.3),
    ("relu_pos", lambda v: v.relu(), lambda x: max(x, 0.0), 0.9),
    ("relu_neg", lambda v: v.relu(), lambda x: max(x, 0.0), -0.9),
    ("pow", lambda v: v**3, lambda x: x**3, -1.2),
    ("pow_frac", lambda v: v**-0.5, lambda x: x**-0.5, 2.0),
    ("neg", lambda v: -v, lambda x: -x, 1.3),
    ("rsub", lambda v: 2 - v, lambda x: 2 - x, 1.3),
    ("rtruediv", lambda v: 2 / v, lambda x: 2 / x, 1.3),
]


@pytest.mark.parametrize("fn, ref, x0", [pytest.param(*c[1:], id=c[0]) for c in UNARY])
def test_unary_value_and_derivative(fn, ref, x0):
    x = Value(x0)
    y = fn(x)
    y.backward()
    h = 1e-6
    assert y.data == pytest.approx(ref(x0), rel=1e-12)
    assert x.grad == pytest.approx((ref(x0 + h) - ref(x0 - h)) / (2 * h), rel=1e-7, abs=1e-9)


def test_binary_derivatives():
    a, b = Value(3.0), Value(-2.0)
    (a * b + a / b - b).backward()  # d/da = b + 1/b, d/db = a - a/b² - 1
    assert a.grad == pytest.approx(-2.5, rel=1e-12)
    assert b.grad == pytest.approx(3.0 - 0.75 - 1.0, rel=1e-12)


def test_value_used_twice_accumulates():
    x = Value(3.0)
    (x * x).backward()
    assert x.grad == 6.0
    y = Value(3.0)
    (y + y).backward()
    assert y.grad == 2.0


def test_sigmoid_extremes_are_finite():
    assert Value(1000.0).sigmoid().data == 1.0
    assert Value(-1000.0).sigmoid().data == 0.0


def test_long_chain_backpropagates_without_recursion_error():
    links = 20_000  # many times Python's recursion limit: a recursive backward would fail
    assert links > 10 * sys.getrecursionlimit()
    x = Value(0.5)
    y = x
    for _ in range(links):
        y = y + 1.0
    y.backward()
    assert y.data == links + 0.5
    assert x.grad == 1.0


def test_repr_shows_data_and_grad():
    v = Value(2.0)
    (v * 3).backward()
    assert repr(v) == "Value(data=2, grad=3)"
