"""Run the registry's cases against their oracles: the library behind `mgsparse gradcheck`
and the gradient tests.

`CASES` holds every case, named `group.op`, in the order engine, sparse, nn (losses, then
layers). `run_checks` gives one `CheckRow` per (case, oracle). A sparse op whose hand-written
backward raised and was rescued by its scalar fallback fails: the fallback would hide the
very bug a check looks for. A case whose every checked input is empty (nnz = 0, or a dense
operand without rows) is not a gradient check: its one row (`SHAPES`) only says that the
backward ran, without the fallback, and gave gradients of the inputs' shapes.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mgsparse.checks import engine, explain, graphs, kge, links, nn, sparse
from mgsparse.checks.case import (
    DEFAULT_SIZE,
    ORACLES,
    SHAPES,
    Case,
    by_name,
    get_size,
    is_empty,
)
from mgsparse.checks.nn import Layer
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError, closest
from mgsparse.sparse import ScalarFallbackWarning, SparseTensor

CASES: dict[str, Case] = by_name([*engine.CASES, *sparse.CASES, *graphs.SEGMENT_CASES,
                                  *nn.CASES, *graphs.NN_CASES, *links.CASES,
                                  *kge.CASES, *explain.CASES])
KNOWN_OPS: tuple[str, ...] = tuple(CASES)
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(case.group for case in CASES.values()))


@dataclass(frozen=True)
class CheckRow:
    """One op against one oracle. Errors are over the gradient entries (and the output for the
    dense and scalar oracles); the relative error is the absolute one over the largest
    |entry| compared, so that noise around a true zero does not read as a 100% error."""

    op: str
    input_shapes: tuple[tuple[int, ...], ...]
    nnz: int | None  # stored entries of the sparse operands (edges for a layer)
    max_abs_err: float
    max_rel_err: float
    oracle: str
    passed: bool
    detail: str = ""  # why it failed when no error could be measured

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def is_gradient_check(self) -> bool:
        """False for a shapes-only row: no gradient entry was compared."""
        return self.oracle != SHAPES

    def to_dict(self) -> dict:
        """JSON-ready: an error that could not be measured (NaN) becomes null."""
        errors = [x if math.isfinite(x) else None for x in (self.max_abs_err, self.max_rel_err)]
        return {"op": self.op, "input_shapes": [list(s) for s in self.input_shapes],
                "nnz": self.nnz, "max_abs_err": errors[0], "max_rel_err": errors[1],
                "oracle": self.oracle, "verdict": self.verdict, "detail": self.detail}


# ---------------------------------------------------------------- selection


def _matches(name: str) -> list[str]:
    """A full name, a group (`sparse`) or a bare op name (`spmm`, `relu`: every group's)."""
    if name in CASES:
        return [name]
    return [k for k in KNOWN_OPS if name in (k.split(".")[0], k.split(".", 1)[1])]


def _did_you_mean(name: str) -> str:
    """The closest full name, compared by full name and by bare op name."""
    spellings = {**{k.split(".", 1)[1]: k for k in KNOWN_OPS}, **{k: k for k in KNOWN_OPS}}
    near = closest(name, spellings)
    return f" (did you mean {spellings[near]!r}?)" if near is not None else ""


def select_ops(ops: Sequence[str] | None = None) -> list[str]:
    """The case names `ops` selects, in registry order without repeats (all when empty)."""
    if not ops:
        return list(KNOWN_OPS)
    chosen: set[str] = set()
    for name in ops:
        found = _matches(name)
        if not found:
            raise ConfigError(f"unknown op {name!r}{_did_you_mean(name)}; known ops: "
                              f"{', '.join(KNOWN_OPS)}; or a group ({', '.join(GROUPS)}) "
                              "or an op name without its group")
        chosen.update(found)
    return [k for k in KNOWN_OPS if k in chosen]


# ---------------------------------------------------------------- one case


def _guarded(oracle: str, case: Case, inputs: tuple, seed: int) -> tuple:
    """The oracle's (abs err, rel err, passed, detail); an exception or a scalar fallback
    fails the row. Other warnings pass through, as if never caught."""
    return guarded(lambda: ORACLES[oracle](case, inputs, seed))


def guarded(check: Callable[[], tuple[float, float, bool]]) -> tuple:
    """`check()`'s (abs err, rel err, passed) and a detail; an exception or a scalar
    fallback fails it. Other warnings pass through, as if never caught."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScalarFallbackWarning)
        try:
            abs_err, rel_err, passed = check()
        except Exception as err:  # noqa: BLE001 — a crashing op is a failed check, not a crash
            return math.nan, math.nan, False, f"{type(err).__name__}: {err}"
    fallbacks = [w for w in caught if issubclass(w.category, ScalarFallbackWarning)]
    for w in caught:
        if w not in fallbacks:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if fallbacks:
        return abs_err, rel_err, False, f"hand-written backward failed: {fallbacks[0].message}"
    return abs_err, rel_err, passed, ""


def _stored_entries(inputs: tuple) -> int | None:
    """nnz of the sparse operands, or the edge count of a layer's graph."""
    if inputs and isinstance(inputs[-1], Layer):
        return inputs[-1].edges
    stored = [a.nnz for a in inputs if isinstance(a, SparseTensor)]
    return sum(stored) if stored else None


def _shapes(inputs: tuple) -> tuple[tuple[int, ...], ...]:
    """Shapes of the Tensors, sparse patterns and index arrays (not of boolean masks)."""
    return tuple(tuple(a.shape) for a in inputs if isinstance(a, (Tensor, SparseTensor))
                 or (isinstance(a, np.ndarray) and a.dtype != bool))


def check_case(case: Case, seed: int = 0, size: str = DEFAULT_SIZE) -> list[CheckRow]:
    """One row per oracle of `case.oracles(size)`, or one shapes-only row when every input
    to check is empty."""
    get_size(size)
    try:
        inputs = case.inputs(size, seed)
    except Exception as err:  # noqa: BLE001 — e.g. a layer whose constructor broke
        detail = f"building the inputs failed: {type(err).__name__}: {err}"
        return [CheckRow(case.name, (), None, math.nan, math.nan, "-", False, detail)]
    oracles = [SHAPES] if is_empty(inputs) else case.oracles(size)
    shapes, nnz = _shapes(inputs), _stored_entries(inputs)
    rows = []
    for oracle in oracles:
        abs_err, rel_err, passed, detail = _guarded(oracle, case, inputs, seed)
        rows.append(CheckRow(case.name, shapes, nnz, abs_err, rel_err, oracle, passed, detail))
    return rows


def run_checks(ops: Sequence[str] | None = None, seed: int = 0, size: str = DEFAULT_SIZE,
               progress: Callable[[int, int, str], None] | None = None) -> list[CheckRow]:
    """Check the selected ops (all when `ops` is empty) in float64; never raises on a failing
    op (its rows say FAIL), only on a bad argument (ConfigError).

    `progress(done, total, name)` is called before each case and once at the end.
    """
    get_size(size)
    names = select_ops(ops)
    rows: list[CheckRow] = []
    for done, name in enumerate(names):
        if progress is not None:
            progress(done, len(names), name)
        rows.extend(check_case(CASES[name], seed, size))
    if progress is not None:
        progress(len(names), len(names), "")
    return rows


# ---------------------------------------------------------------- a whole run


@dataclass(frozen=True)
class CheckReport:
    """The rows of one run with its settings and duration; what `mgsparse gradcheck` prints."""

    rows: list[CheckRow]
    seed: int
    size: str
    seconds: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def ops(self) -> list[str]:
        return list(dict.fromkeys(r.op for r in self.rows))

    @property
    def failed_ops(self) -> list[str]:
        return sorted({r.op for r in self.rows if not r.passed})

    @property
    def gradient_checks(self) -> int:
        return sum(r.is_gradient_check for r in self.rows)

    @property
    def worst(self) -> CheckRow | None:
        """The gradient check with the largest absolute error that could be measured."""
        measured = [r for r in self.rows if r.is_gradient_check and math.isfinite(r.max_abs_err)]
        return max(measured, key=lambda r: r.max_abs_err, default=None)

    def to_dict(self) -> dict:
        return {"seed": self.seed, "size": self.size, "passed": self.passed,
                "checks": self.gradient_checks,
                "shapes_only": len(self.rows) - self.gradient_checks,
                "failed": sum(not r.passed for r in self.rows), "ops": len(self.ops),
                "seconds": round(self.seconds, 3), "rows": [r.to_dict() for r in self.rows]}


def check_ops(ops: Sequence[str] | None = None, seed: int = 0, size: str = DEFAULT_SIZE,
              progress: Callable[[int, int, str], None] | None = None) -> CheckReport:
    """`run_checks`, timed (the CLI writes its JSON, by the one output rule)."""
    started = time.perf_counter()
    rows = run_checks(ops, seed, size, progress)
    return CheckReport(rows, seed, size, time.perf_counter() - started)
