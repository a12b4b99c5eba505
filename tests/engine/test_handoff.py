"""The backward loop's contracts with an op's backward: g arrives read-only, a leaf's `.grad`
is the op's array only when the loop alone holds it, and nothing is decided by a reference
count (so an interpreter that counts differently changes nothing)."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import mgsparse
from mgsparse.engine import Function, Tensor
from mgsparse.errors import MgsparseError


class Double(Function):
    """y = 2x, written correctly: a new array."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


class DoubleInPlace(Function):
    """y = 2x whose backward writes the gradient it was handed."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        g *= 2
        return g


class Identity(Function):
    """y = x whose backward hands on the g it received."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g


class GivesItsSaved(Function):
    """y = x·c (c all ones, saved) whose backward returns its saved c when g is all ones."""

    @staticmethod
    def forward(ctx, x):
        ctx.c = np.ones_like(x)
        ctx.save_for_backward(np.ones_like(x))
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return ctx.saved_tensors[0] if ctx.which == "saved" else ctx.c


class Fresh(Function):
    """y = x whose backward returns a new array, and says which."""

    made: list = []  # noqa: RUF012 (the arrays the backward returned, for the test to compare)

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        Fresh.made.append(g + 0.0)
        return Fresh.made[-1]


@pytest.fixture(params=["exact", "one fewer"])
def refcounts(request, monkeypatch):
    """Also under an interpreter that counts one reference fewer (3.14 borrows stack
    references): the loop must not read counts at all."""
    if request.param == "one fewer":
        real = sys.getrefcount
        monkeypatch.setattr(sys, "getrefcount", lambda a: real(a) - 2)  # - 2: the wrapper's own
    return request.param


def test_a_backward_writing_its_gradient_in_place_raises_naming_the_op():
    """Before: no error, and the sibling's gradient silently doubled (dx = 4w, not 2w)."""
    x, y = Tensor(np.ones(3), requires_grad=True), Tensor(np.ones(3), requires_grad=True)
    w = Tensor(np.array([1.0, 2.0, 3.0]))
    out = (DoubleInPlace.apply(x) + DoubleInPlace.apply(y)) * w
    with pytest.raises(MgsparseError) as err:
        out.sum().backward()
    assert str(err.value).startswith("DoubleInPlace.backward wrote into the gradient it was "
                                     "handed")
    assert "compute a new array (g * 2), not g *= 2" in str(err.value)


def test_add_hands_both_parents_one_array_and_each_gets_its_own_gradient(refcounts):
    x, y = Tensor(np.ones(3), requires_grad=True), Tensor(np.ones(3), requires_grad=True)
    w = Tensor(np.array([1.0, 2.0, 3.0]))
    ((Double.apply(x) + Double.apply(y)) * w).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(y.grad, [2.0, 4.0, 6.0])
    a, b = Tensor(np.ones(3), requires_grad=True), Tensor(np.ones(3), requires_grad=True)
    ((a + b) * w).sum().backward()  # the same g to two leaves: two arrays
    assert not np.shares_memory(a.grad, b.grad)
    a.grad *= 10  # clipping one leaves the other
    np.testing.assert_array_equal(b.grad, [1.0, 2.0, 3.0])


def test_the_callers_gradient_stays_the_callers(refcounts):
    """An op that hands on its g as it is: the leaf's `.grad` is a copy, and the array the
    caller passed to backward keeps its flags and values."""
    x = Tensor(np.ones(4), requires_grad=True)
    grad = np.arange(4.0)
    Identity.apply(x).backward(grad)
    assert x.grad is not grad and not np.shares_memory(x.grad, grad)
    assert grad.flags.writeable and x.grad.flags.writeable
    x.grad[0] = 7.0
    np.testing.assert_array_equal(grad, [0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize("which", ["saved", "attribute"])
def test_an_array_a_context_holds_is_copied_into_the_leaf(which, refcounts):
    x = Tensor(np.ones(4), requires_grad=True)
    out = GivesItsSaved.apply(x)
    out._ctx.which = which
    ctx = out._ctx
    held = ctx.saved_tensors[0] if which == "saved" else ctx.c
    out.backward(np.ones(4), retain_graph=True)
    assert not np.shares_memory(x.grad, held)
    x.grad[:] = 5.0  # the context's array is untouched
    np.testing.assert_array_equal(held, np.ones(4))


def test_a_fresh_gradient_for_one_parent_becomes_the_leafs_grad_without_a_copy():
    """The speed win kept: x·W's weight gradient is a new array for W alone."""
    x = Tensor(np.ones(4), requires_grad=True)
    Fresh.made = []
    Fresh.apply(x).backward(np.ones(4))
    assert x.grad is Fresh.made[0] and x.grad.flags.writeable
    X, W = Tensor(np.ones((6, 3))), Tensor(np.ones((3, 2)), requires_grad=True)
    (X @ W).sum().backward()
    np.testing.assert_array_equal(W.grad, np.full((3, 2), 6.0))
    assert W.grad.base is None and W.grad.flags.writeable


def test_a_retained_gradient_is_its_own_array():
    x = Tensor(np.ones(3), requires_grad=True)
    h = Identity.apply(Fresh.apply(x)).retain_grad()
    (Identity.apply(h) * 3.0).sum().backward()
    assert not np.shares_memory(h.grad, x.grad)
    np.testing.assert_array_equal(h.grad, [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 3.0])


def test_no_decision_reads_a_reference_count():
    root = pathlib.Path(mgsparse.__file__).parent
    readers = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py"))
               if "getrefcount" in p.read_text()]
    assert readers == []
