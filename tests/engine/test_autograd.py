"""The backward walk's gradient hand-off: a leaf keeps the array its op made when nothing else
can reach it, and otherwise gets a copy, so no two `.grad`s share memory."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mgsparse import Function, Tensor, kernels


class Fresh(Function):
    """y = 3x; the backward returns a new array and says which one (by id, holding none)."""

    made: ClassVar[list[int]] = []
    mark: ClassVar[np.ndarray | None] = None

    @staticmethod
    def forward(ctx, x):
        return 3 * x

    @staticmethod
    def backward(ctx, g):
        out = 3 * g
        if Fresh.mark is not None:
            kernels.mark_rows(out, Fresh.mark)
        Fresh.made.append(id(out))
        return out


class PassOn(Function):
    """y = x; the backward hands the gradient it received on, the same array."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g


def test_an_unshared_gradient_becomes_the_leafs_grad_without_a_copy():
    x = Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    Fresh.made.clear()
    (Fresh.apply(x) * 2.0).sum().backward()
    assert id(x.grad) == Fresh.made[-1]
    np.testing.assert_array_equal(x.grad, np.full((3, 2), 6.0))


def test_one_gradient_handed_to_two_inputs_is_copied_apart():
    a, b = (Tensor(np.ones(4), requires_grad=True) for _ in range(2))
    (a + b).sum().backward()  # Add's backward gives both the same array
    assert not np.shares_memory(a.grad, b.grad)
    a.grad *= 5.0  # clipping writes a .grad in place: the other keeps its values
    np.testing.assert_array_equal(b.grad, np.ones(4))


def test_a_retained_gradient_passed_on_to_a_leaf_is_copied():
    x = Tensor(np.ones(3), requires_grad=True)
    y = Fresh.apply(x)
    z = PassOn.apply(y)
    z.retain_grad()
    w = PassOn.apply(z)
    (w * 2.0).sum().backward()
    assert not np.shares_memory(z.grad, x.grad)
    np.testing.assert_array_equal(z.grad, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(x.grad, [6.0, 6.0, 6.0])


def test_a_gradient_that_is_a_view_is_copied():
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    x.sum().backward()  # Sum's backward broadcasts: a view of one number
    assert x.grad.base is None and x.grad.flags.writeable
    x.grad[0, 0] = 7.0
    np.testing.assert_array_equal(x.grad, [[7.0, 1.0, 1.0], [1.0, 1.0, 1.0]])


def test_a_row_record_stays_behind_when_the_gradient_becomes_a_grad():
    x = Tensor(np.ones((40, 2)), requires_grad=True)
    Fresh.made.clear()
    Fresh.mark = np.array([0, 1])
    try:
        Fresh.apply(x).sum().backward()
    finally:
        Fresh.mark = None
    assert id(x.grad) == Fresh.made[-1]  # the marked array itself, kept...
    assert kernels.known_rows(x.grad) is None  # ...without the record a write would falsify
