"""The gradient tests cannot be fooled: a sparse backward that raises (everywhere, or only on
tiny inputs) fails every case that runs through it, at every size, although its scalar
fallback would supply the right numbers; the dropout cases tell 1/p from 1/(1 − p)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.checks import CASES, run_checks
from mgsparse.checks.case import DROPOUT_P, functions_reached
from mgsparse.engine import Tensor
from mgsparse.sparse.ops import SparseFunction
from tests.conftest import gradcheck_sizes


def sparse_functions() -> list[type]:
    found, stack = [], [SparseFunction]
    while stack:
        subs = stack.pop().__subclasses__()
        found += subs
        stack += subs
    return found


def through_sparse_backward(size: str) -> list[str]:
    """The cases whose graph at `size` runs through some SparseFunction."""
    return [name for name, case in CASES.items()
            if any(issubclass(f, SparseFunction) for f in functions_reached(case, size))]


def failing(size: str, names: list[str] | None = None) -> set[str]:
    return {r.op for r in run_checks(names, size=size) if not r.passed}


@pytest.mark.parametrize("size", gradcheck_sizes())
def test_every_case_through_a_raising_sparse_backward_fails(monkeypatch, size):
    def broken(ctx, g):
        raise RuntimeError("vjp replaced by raise")
    for fn in sparse_functions():
        monkeypatch.setattr(fn, "vjp", staticmethod(broken))
    expected = through_sparse_backward(size)
    assert any(name.startswith("sparse.") for name in expected)
    assert sorted(set(expected) - failing(size, expected)) == []


def test_a_backward_that_crashes_only_on_tiny_inputs_fails_at_size_one(monkeypatch):
    """nnz ≤ 1 or a 1×1 matrix: the edge the small and medium sizes never reach."""
    def only_tiny(vjp):
        def wrapped(ctx, g):
            sizes = [a.size for a in ctx.parents if isinstance(a, Tensor)]
            shapes = [getattr(a, "shape", None) for a in ctx.parents]
            if min(sizes, default=2) <= 1 or (1, 1) in shapes:
                raise IndexError("tiny input")
            return vjp(ctx, g)
        return staticmethod(wrapped)
    for fn in sparse_functions():
        monkeypatch.setattr(fn, "vjp", only_tiny(fn.vjp))
    names = through_sparse_backward("one")
    assert failing("small", names) == set()  # the crash is invisible at the usual size...
    caught = failing("one", names)  # ...and caught at size one, for every sparse op (1×1, nnz = 1)
    assert sorted({n for n in CASES if n.startswith("sparse.")} - caught) == []


def test_dropout_cases_tell_one_over_p_from_one_over_one_minus_p(monkeypatch):
    assert DROPOUT_P != 0.5

    def scaled_by_one_over_p(self, p, training=True, rng=None):
        keep = (rng.random(self.shape) >= p) / p  # the classic slip: 1/p for 1/(1 − p)
        return self * keep.astype(self.dtype)
    monkeypatch.setattr(Tensor, "dropout", scaled_by_one_over_p)
    verdicts = {(r.op, r.oracle): r.passed for r in run_checks(["dropout", "sparse_dropout"])}
    assert verdicts == {("engine.dropout", "finite differences"): True,  # self-consistent...
                        ("engine.dropout", "scalar"): False,  # ...but not the reference
                        ("sparse.sparse_dropout", "finite differences"): True,
                        ("sparse.sparse_dropout", "dense equivalent"): False,
                        ("sparse.sparse_dropout", "scalar"): False}
    assert np.isclose(1 / DROPOUT_P, 1 / (1 - DROPOUT_P)) is np.False_
