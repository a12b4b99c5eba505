"""The registry proves itself: every case passes at every size with the oracles it declares,
and every `Function` subclass of engine, sparse and nn is reached by some case."""

from __future__ import annotations

import gc
import importlib
import math
import pkgutil

import numpy as np
import pytest

from mgsparse.checks import CASES, FINITE_DIFFERENCES, SHAPES, SIZES, check_case
from mgsparse.checks.case import checked, functions_reached, is_empty
from mgsparse.engine import Function

LIBRARY_PACKAGES = ("engine", "sparse", "nn")


def library_functions() -> set[type]:
    """Every concrete Function subclass defined in engine, sparse or nn: each module of the
    three packages imported, then `Function.__subclasses__` walked recursively. A class that
    defines no `forward` of its own (say `SparseFunction`) is a base, never applied."""
    for package in LIBRARY_PACKAGES:
        path = importlib.import_module(f"mgsparse.{package}").__path__
        for module in pkgutil.walk_packages(path, prefix=f"mgsparse.{package}."):
            importlib.import_module(module.name)
    found, stack = set(), [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.split(".")[:2] in (["mgsparse", p] for p in LIBRARY_PACKAGES):
                found.add(sub)
    return {f for f in found if "forward" in vars(f)}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", list(CASES))
def test_every_case_passes_at_every_size(name, size):
    """The checks a case declares run and pass; a case whose inputs are all empty is one
    shapes-only row, not a gradient check."""
    case = CASES[name]
    rows = check_case(case, seed=0, size=size)
    assert [(r.oracle, r.detail) for r in rows if not r.passed] == []
    empty = is_empty(case.inputs(size))
    assert [r.oracle for r in rows] == ([SHAPES] if empty else case.oracles(size))
    for r in rows:
        bound = 1e-7 if r.oracle == FINITE_DIFFERENCES else 1e-12  # two analytic routes: round-off
        assert math.isnan(r.max_abs_err) if empty else r.max_abs_err < bound, r


@pytest.mark.parametrize("name", list(CASES))
def test_every_case_checks_something_at_the_small_size(name):
    """At the small size every case has entries to compare, in float64."""
    inputs = CASES[name].inputs("small")
    tensors = checked(inputs)
    assert tensors and not is_empty(inputs)
    assert all(t.dtype == np.float64 for t in tensors)


def test_every_function_of_engine_sparse_and_nn_is_reached_by_some_case():
    """A Function added to the library without a gradient-check case makes this fail."""
    defined = library_functions()
    reached = set().union(*(functions_reached(case) for case in CASES.values()))
    assert sorted(f"{f.__module__}.{f.__name__}" for f in defined - reached) == []
    packages = {f.__module__.split(".")[1] for f in defined}
    assert packages == set(LIBRARY_PACKAGES)  # the walk found Functions in all three


def test_the_walk_sees_a_function_no_case_reaches():
    """Negative control: a new Function in a library module is found and is unreached."""
    new = type("Unchecked", (Function,), {"__module__": "mgsparse.sparse.ops",
                                         "forward": staticmethod(lambda ctx, x: x)})
    try:
        assert new in library_functions()
        assert all(new not in functions_reached(case) for case in CASES.values())
    finally:
        del new
        gc.collect()
    assert all(f.__name__ != "Unchecked" for f in library_functions())

