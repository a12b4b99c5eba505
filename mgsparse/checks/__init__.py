"""Gradient checks of every op and layer: one `Case` type, the case lists, and one runner.

- `case`: the `Case` type, the `SIZES` every caller names, and the oracles (finite
  differences, the dense equivalent through the Tensor engine, the scalar `Value` reference);
- `engine`, `sparse`, `nn`: the case lists, one line (or entry) per op;
- `runner`: `CASES` (the registry), `select_ops`, `run_checks` → `CheckRow`s;
- `fast_paths`: `sweep`, every case through the kernels' fast paths (`kernels.tiny()`) at 1 and 2 threads,
  against finite differences and `kernels.reference()` → a `SweepReport`.

A new op needs one case in the list of its package; the tests and `mgsparse gradcheck` read
the registry, so nothing else counts or names the ops.
"""

from mgsparse.checks.case import (
    DEFAULT_SIZE,
    DENSE,
    FINITE_DIFFERENCES,
    SCALAR,
    SHAPES,
    SIZES,
    Case,
    Size,
)
from mgsparse.checks.fast_paths import PATHS, SweepReport, sweep
from mgsparse.checks.runner import (
    CASES,
    GROUPS,
    KNOWN_OPS,
    CheckReport,
    CheckRow,
    check_case,
    check_ops,
    run_checks,
    select_ops,
)

__all__ = [
    "CASES",
    "DEFAULT_SIZE",
    "DENSE",
    "FINITE_DIFFERENCES",
    "GROUPS",
    "KNOWN_OPS",
    "PATHS",
    "SCALAR",
    "SHAPES",
    "SIZES",
    "Case",
    "CheckReport",
    "CheckRow",
    "Size",
    "SweepReport",
    "check_case",
    "check_ops",
    "run_checks",
    "select_ops",
    "sweep",
]
