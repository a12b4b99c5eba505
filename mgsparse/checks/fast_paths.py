"""The fast-path sweep: every gradcheck case run through the kernels' fast paths, at 1 and 2
threads, against finite differences and against the plain one-call kernels.

Every fast path of `mgsparse.kernels` starts at a size the registry never reaches (4,096 rows,
2^20 elements, 4 MiB of output), so the ordinary checks prove the plain paths only.
`kernels.tiny()` lowers every threshold to gradcheck sizes; `kernels.reference()` puts every
kernel on its plain path. For each case, at each thread count in `THREADS`:

- finite differences under `tiny()` (a wrong fast path gives a wrong gradient);
- under `tiny()`, one thread against two: output and every gradient bitwise equal (the pool's
  blocks are fixed by the sizes, never by the threads);
- `tiny()` against `reference()`: bitwise, since each path claims the one call's bits; except
  in a case that took a path in `REGROUPED`, which sums in other groups by design and is
  compared within `REGROUP_RTOL` of the case's largest entry (`within`): the weight gradient
  aᵀ·g (`matmul_tn`) adds fixed row blocks' partial products in block order, or sums over
  the nonzero rows of g only, where BLAS's one call groups all M rows its own way; a long
  scatter-add (``scatter_sum``) adds per-chunk `bincount`s in chunk order; a dense product
  by row blocks (`kernels.matmul`, `matmul_computed`) makes BLAS calls of other shapes, and
  at gradcheck sizes BLAS picks its kernel by the shape (a 3 × 4 by 4 × 3 product in blocks
  of 2 and 1 rows is 1.8e-15 off; at 9,700-100,000 rows the blocks give the one call's
  bits). Each grouping is the sizes', so the 1 = 2 threads check stays bitwise. Such a case
  runs once more, at 2 threads, under `tiny(regroup=False)` (those paths on their one call,
  every other fast path as before), bitwise against `reference()`: no other path hides
  behind the tolerance.

`kernels.counting()` records which paths each case took; a sweep of the whole registry
(at the default size) fails unless every path in `PATHS` ran somewhere (a threshold that no longer reaches its path
at gradcheck sizes would otherwise prove nothing, silently).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mgsparse import kernels
from mgsparse.checks.case import (
    DEFAULT_SIZE,
    Case,
    _float64,
    analytic_grads,
    finite_differences,
    get_size,
    is_empty,
    weights_for,
)
from mgsparse.checks.runner import (
    CASES,
    CheckReport,
    CheckRow,
    _shapes,
    _stored_entries,
    guarded,
    select_ops,
)
from mgsparse.engine import no_grad

THREADS = (1, 2)
REGROUP_RTOL = 1e-12  # float64 sums of a few terms, grouped otherwise: a few ulps apart

# Counter names (`kernels.modes`) of the fast paths a whole sweep must take, by what they are;
# ``blocks: f`` counts the cuts `run_blocks` made for function f.
PATHS: dict[str, str] = {
    "elementwise row blocks on the pool": "blocks: by_rows",
    "work handed to a second thread": "pool threads",
    "dense row-block matmul": "blocks: matmul",
    "computed operand in chunks": "computed operand chunks",
    "matmul_tn row blocks": "matmul_tn blocks",
    "matmul_tn over recorded or found rows": "matmul_tn rows",
    "row record read": "row record read",
    "row-sparse gradient found by the scan": "row scan found",
    "Aᵀ·G over a gradient's rows": "Aᵀ·G rows",
    "CSR kernel in row blocks": "blocks: CSRView.matmul",
    "column slices": "column slices",
    "CSR read as CSC": "CSC read",
    "symmetric scatter": "symmetric scatter",
    "transpose scatter": "transpose scatter",
    "tiled add_rows": "tiled add_rows",
    "attention softmax entry blocks": "blocks: attention_rows",
    "attention backward entry blocks": "blocks: attention_rows_vjp",
    "scatter-add chunks": "blocks: scatter_sum",
    "sddmm chunks": "blocks: sddmm_kernel",
}
REGROUPED = ("blocks: matmul", "computed operand chunks", "matmul_tn blocks", "matmul_tn rows",
             "blocks: scatter_sum")  # the paths `tiny(regroup=False)` turns off

FINITE = "finite differences"
SAME_THREADS = "1 thread = 2, bitwise"
SAME_BITS = "= reference, bitwise"
CLOSE = "≈ reference (regrouped)"
ONE_SUM = "tiny, sums as one call"


@dataclass(frozen=True)
class SweepReport(CheckReport):
    """The sweep's rows (`CheckReport`'s, oracles named as above), with the thread counts, the
    paths each case took and, for a sweep of the whole registry, the `PATHS` none took."""

    threads: tuple[int, ...] = THREADS
    paths: dict[str, dict[str, int]] = field(default_factory=dict)  # case -> counter -> n
    missing: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return super().passed and not self.missing

    @property
    def seen(self) -> dict[str, int]:
        """Every counter over the whole sweep, summed."""
        total: dict[str, int] = {}
        for counts in self.paths.values():
            for name, n in counts.items():
                total[name] = total.get(name, 0) + n
        return dict(sorted(total.items()))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "threads": list(self.threads), "paths": self.seen,
                "missing_paths": list(self.missing)}


# ---------------------------------------------------------------- comparing two runs


def _pairs(got: tuple, want: tuple) -> list[tuple[np.ndarray, np.ndarray]] | None:
    (out, grads), (ref_out, ref_grads) = got, want
    pairs = [(np.asarray(a), np.asarray(b)) for a, b in zip([out, *grads], [ref_out, *ref_grads])]
    if len(grads) != len(ref_grads) or any(a.shape != b.shape or a.dtype != b.dtype
                                           for a, b in pairs):
        return None
    return pairs


def bitwise(got: tuple, want: tuple) -> tuple[float, float, bool]:
    """(max abs difference, its relative size, every array's bytes equal)."""
    pairs = _pairs(got, want)
    if pairs is None:
        return math.inf, math.inf, False
    diff, scale = _largest(pairs)
    return diff, _relative(diff, scale), all(a.tobytes() == b.tobytes() for a, b in pairs)


def within(got: tuple, want: tuple, rtol: float = REGROUP_RTOL) -> tuple[float, float, bool]:
    """(max abs difference, relative size, every difference within rtol of the largest entry
    of the output and gradients): a regrouped sum errs by ulps of its terms, not of its
    result (a gradient that cancels to 1e-17 differs in its own first digit), and the
    largest entry stands for the terms, as the other checks' relative errors take it."""
    pairs = _pairs(got, want)
    if pairs is None:
        return math.inf, math.inf, False
    diff, scale = _largest(pairs)
    nans = all(np.array_equal(np.isnan(a), np.isnan(b)) for a, b in pairs)
    return diff, _relative(diff, scale), nans and diff <= rtol * scale


def _largest(pairs) -> tuple[float, float]:
    """The largest |a − b| (NaN where both are NaN counts as 0) and the largest |b|."""
    diff = max((float(np.nanmax(np.abs(a - b), initial=0.0)) for a, b in pairs), default=0.0)
    scale = max((float(np.nanmax(np.abs(b), initial=0.0)) for _, b in pairs), default=0.0)
    return diff, scale


def _relative(diff: float, scale: float) -> float:
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


# ---------------------------------------------------------------- one case


def _run(case: Case, size: str, seed: int, w: np.ndarray | None, threads: int | None,
         fd: bool, regroup: bool = True) -> tuple:
    """(finite-difference verdict or None, (output, grads), counters) of `case` on fresh
    inputs, under `tiny(regroup)` at `threads`, or under `reference()` when threads is None.
    The output is compared after a first forward (or the finite differences) on the same
    inputs: a fixed Â's second product on takes its scatter path (`CSRView.symmetric`)."""
    mode = kernels.reference() if threads is None else kernels.tiny(regroup)
    with kernels.num_threads(threads or 1), mode, kernels.counting() as counts:
        inputs = case.inputs(size, seed)
        verdict = guarded(lambda: finite_differences(case, inputs, seed)) if fd else None
        if not fd:
            with no_grad():
                case.fn(*_float64(inputs))
        grads = analytic_grads(case.fn, inputs, w)
    return verdict, grads, dict(counts)


def sweep_case(case: Case, seed: int = 0, size: str = DEFAULT_SIZE,
               threads: Sequence[int] = THREADS) -> tuple[list[CheckRow], dict[str, int]]:
    """The case's rows (finite differences per thread count, 1 = 2 threads, against the
    reference) and the paths it took under `tiny()`."""
    try:
        inputs = case.inputs(size, seed)
        with kernels.reference():
            w = weights_for(case, inputs, seed)
    except Exception as err:  # noqa: BLE001 — e.g. a layer whose constructor broke
        detail = f"building the inputs failed: {type(err).__name__}: {err}"
        return [CheckRow(case.name, (), None, math.nan, math.nan, "-", False, detail)], {}
    shapes, nnz, fd = _shapes(inputs), _stored_entries(inputs), not is_empty(inputs)
    rows, runs, counts = [], {}, {}

    def row(oracle: str, abs_err: float, rel_err: float, passed: bool, detail: str = ""):
        rows.append(CheckRow(case.name, shapes, nnz, abs_err, rel_err, oracle, passed, detail))

    try:
        _, want, _ = _run(case, size, seed, w, None, fd=False)
        for t in threads:
            verdict, runs[t], seen = _run(case, size, seed, w, t, fd)
            counts.update({k: counts.get(k, 0) + n for k, n in seen.items()})
            if verdict is not None:
                row(f"tiny, {t} thread{'s' * (t > 1)}: {FINITE}", *verdict)
    except Exception as err:  # noqa: BLE001 — a crashing fast path is a failed check
        row("tiny", math.nan, math.nan, False, f"{type(err).__name__}: {err}")
        return rows, counts
    first = runs[threads[0]]
    for t in threads[1:]:
        row(SAME_THREADS if len(threads) == 2 else f"1 thread = {t}, bitwise",
            *bitwise(runs[t], first))
    if not any(k in counts for k in REGROUPED):
        row(f"tiny {SAME_BITS}", *bitwise(first, want))
        return rows, counts
    row(f"tiny {CLOSE}", *within(first, want))
    try:  # every other path, held to the one call's bits in this very computation
        _, one_sum, _ = _run(case, size, seed, w, threads[-1], fd=False, regroup=False)
    except Exception as err:  # noqa: BLE001
        row(f"{ONE_SUM} {SAME_BITS}", math.nan, math.nan, False, f"{type(err).__name__}: {err}")
        return rows, counts
    row(f"{ONE_SUM} {SAME_BITS}", *bitwise(one_sum, want))
    return rows, counts


# ---------------------------------------------------------------- the sweep


def sweep(ops: Sequence[str] | None = None, seed: int = 0, size: str = DEFAULT_SIZE,
          threads: Sequence[int] = THREADS,
          progress: Callable[[int, int, str], None] | None = None) -> SweepReport:
    """Every selected case (all when `ops` is empty) through `sweep_case`, timed; a sweep of
    the whole registry at the default size (the one `tuning.TINY` is set for: at "medium"
    every Aᵀ·X is wide enough to slice, so the one CSC call goes untaken) also fails when a
    path of `PATHS` was taken by no case."""
    get_size(size)
    names = select_ops(ops)
    started = time.perf_counter()
    rows: list[CheckRow] = []
    paths: dict[str, dict[str, int]] = {}
    for done, name in enumerate(names):
        if progress is not None:
            progress(done, len(names), name)
        case_rows, paths[name] = sweep_case(CASES[name], seed, size, threads)
        rows.extend(case_rows)
    if progress is not None:
        progress(len(names), len(names), "")
    seen = {k for counts in paths.values() for k in counts}
    whole = not ops and size == DEFAULT_SIZE  # the registry at the size `tuning.TINY` fits
    missing = tuple(what for what, key in PATHS.items() if key not in seen) if whole else ()
    return SweepReport(rows, seed, size, time.perf_counter() - started, tuple(threads), paths,
                       missing)
