"""A Function's forward and backward written as plain defs are staticmethods of the class."""

from __future__ import annotations

import numpy as np

from mgsparse import Function, Tensor
from mgsparse.engine.tensor import Context
from mgsparse.sparse.ops import SparseFunction


class Square(Function):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        """dx = 2·x·g."""
        (x,) = ctx.saved_tensors
        return 2 * x * g


class Decorated(Function):
    @staticmethod
    def forward(ctx, x):
        return 3 * x

    @staticmethod
    def backward(ctx, g):
        return 3 * g


def cube() -> type:
    """A SparseFunction made inside a test, never at import: the sparse tests walk
    SparseFunction's subclasses when they are collected, expecting the library's only."""
    class Cube(SparseFunction):
        op_name = "cube"

        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        def vjp(ctx, g):
            """dx = 3·x²·g."""
            (x,) = ctx.saved_tensors
            return 3 * x * x * g
    return Cube


def test_plain_defs_become_staticmethods_and_run():
    Cube = cube()
    for cls, names in ((Square, ("forward", "backward")), (Cube, ("forward", "vjp"))):
        for name in names:
            assert isinstance(cls.__dict__[name], staticmethod), (cls, name)
    x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    (Square.apply(x) + Cube.apply(x)).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0 + 3.0, -4.0 + 12.0, 6.0 + 27.0])


def test_an_instance_calls_them_with_the_context_not_itself():
    ctx = Context(Square, (), (True,))
    np.testing.assert_array_equal(Square().forward(ctx, np.array([2.0])), [4.0])
    np.testing.assert_array_equal(Square().backward(ctx, np.array([1.0])), [4.0])


def test_decorated_methods_and_the_guarded_backward_stay_as_written():
    Cube = cube()
    assert isinstance(Decorated.__dict__["forward"], staticmethod)
    assert isinstance(SparseFunction.__dict__["backward"], classmethod)
    assert "backward" not in Cube.__dict__  # SparseFunction's guard calls Cube's vjp
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    Decorated.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
