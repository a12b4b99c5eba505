"""The one gradient-check case type, the input sizes, and the three oracles a case is run by.

A `Case` builds float64 inputs from a seed and a `Size`, computes an output y, and the
gradient of s = Σ w·y (w a fixed random weighting of y's shape) is compared with:

- finite differences: (s(x + ε) − s(x − ε)) / 2ε through `mgsparse.gradcheck` (every case);
- the dense equivalent: the same math through the Tensor engine alone, on densified sparse
  operands (`Case.dense`: sparse ops, the GCN layer);
- the scalar reference: the computation recomputed entry by entry from micrograd `Value`s
  (`Case.scalar`: dense and sparse ops, losses), on the sizes where `Size.scalar` is true.

An entry passes when |analytic − oracle| ≤ atol + rtol·|oracle|; the dense and scalar oracles
also compare the output itself. `functions_reached` names the `Function` classes a case's
graph runs through, so a test can prove every Function of the library is checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mgsparse.engine import Function, Tensor, no_grad
from mgsparse.engine.autograd import graph_contexts
from mgsparse.engine.gradcheck import gradcheck
from mgsparse.engine.masks import keep_mask, kept_scale
from mgsparse.errors import ConfigError
from mgsparse.sparse import SparseTensor
from mgsparse.sparse import reference as ref

FINITE_DIFFERENCES, DENSE, SCALAR = "finite differences", "dense equivalent", "scalar"
SHAPES = "shapes only"  # every checked input is empty: nothing to differentiate numerically
FD_EPS, FD_ATOL, FD_RTOL = 1e-6, 1e-6, 1e-5
EXACT_ATOL, EXACT_RTOL = 1e-9, 1e-7  # two analytic routes in float64 differ by round-off only
KINK_MARGIN = 0.1  # inputs stay this far from kinks (relu at 0, clip bounds)
DROPOUT_P, DROPOUT_SEED = 0.3, 7  # p ≠ 0.5, where 1/p and 1/(1 − p) would coincide


# ---------------------------------------------------------------- sizes


@dataclass(frozen=True)
class Size:
    """What one size name means to each family of case. `dense` is the (n, m) of a dense
    operand; `sparse` the (rows, cols, nnz) of a random pattern; `graph` the (nodes, edges) of
    a layer's graph and `features` its (F_in, F_out); `scalar` whether the scalar oracle runs
    (the scalar engine is slow by design)."""

    name: str
    dense: tuple[int, int]
    sparse: tuple[int, int, int]
    graph: tuple[int, int]
    features: tuple[int, int]
    scalar: bool


# The one list of sizes: the CLI's --size and every test take their names from here.
SIZES: dict[str, Size] = {s.name: s for s in (
    Size("small", dense=(3, 4), sparse=(6, 5, 12), graph=(7, 16), features=(4, 3), scalar=True),
    Size("medium", dense=(12, 16), sparse=(24, 18, 90), graph=(20, 60), features=(8, 5),
         scalar=False),
    Size("one", dense=(1, 1), sparse=(1, 1, 1), graph=(1, 1), features=(1, 1), scalar=True),
    Size("empty", dense=(0, 4), sparse=(5, 4, 0), graph=(5, 0), features=(4, 3), scalar=True),
)}


DEFAULT_SIZE = "small"


def get_size(name: str) -> Size:
    if name not in SIZES:
        raise ConfigError(f"unknown size {name!r}; known sizes: {', '.join(SIZES)}")
    return SIZES[name]


# ---------------------------------------------------------------- the case


@dataclass(frozen=True)
class Case:
    """One checked computation named `group.op`: `build(rng, size)` → inputs, `fn(*inputs)` →
    Tensor (a sparse result densified by `to_tensor`).

    Inputs are Tensors (checked when `requires_grad`) and constants passed through (sparse
    patterns, edge lists, integer targets, a bound layer). `dense` and `scalar` follow `fn`'s
    signature; `scalar` receives object arrays of `Value`s in place of Tensors and returns an
    object array (or one Value, for a loss).
    """

    name: str
    build: Callable[[np.random.Generator, Size], tuple]
    fn: Callable[..., Tensor]
    dense: Callable[..., Tensor] | None = None
    scalar: Callable[..., np.ndarray] | None = None

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]

    def inputs(self, size: str = DEFAULT_SIZE, seed: int = 0) -> tuple:
        return self.build(np.random.default_rng(seed), get_size(size))

    def oracles(self, size: str = DEFAULT_SIZE) -> list[str]:
        """The oracles this case is compared with at `size`, in the order they run."""
        return [FINITE_DIFFERENCES, *([DENSE] if self.dense else []),
                *([SCALAR] if self.scalar and get_size(size).scalar else [])]

    def __repr__(self) -> str:
        return f"Case({self.name!r}, oracles={self.oracles()})"


def by_name(cases: Sequence[Case]) -> dict[str, Case]:
    """name → case, in order; two cases of one name (say, an op added twice) would hide one."""
    names = [c.name for c in cases]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"duplicate gradcheck cases: {', '.join(repeated)}")
    return {c.name: c for c in cases}


# ---------------------------------------------------------------- inputs and scalar helpers


def leaf(x: np.ndarray) -> Tensor:
    return Tensor(np.asarray(x, dtype=np.float64), requires_grad=True)


def normal(rng: np.random.Generator, shape: tuple, kinks: Sequence[float] = ()) -> Tensor:
    """Standard normal entries, each at least KINK_MARGIN away from every kink, where a
    one-sided derivative would make central differences meaningless."""
    x = rng.standard_normal(shape)
    for k in kinks:
        x = np.where(np.abs(x - k) < KINK_MARGIN, k + np.copysign(KINK_MARGIN, x - k), x)
    return leaf(x)


def positive(rng: np.random.Generator, shape: tuple) -> Tensor:
    return leaf(np.abs(rng.standard_normal(shape)) + 0.5)


def each(f: Callable) -> Callable[..., np.ndarray]:
    """f applied entry by entry (with broadcasting) to object arrays of Values."""
    return np.vectorize(f, otypes=[object])


def scalar_mean(a: np.ndarray):
    return a.sum() * (1.0 / a.size)


def dropout_rng() -> np.random.Generator:
    return np.random.default_rng(DROPOUT_SEED)


def dropout_scale(shape) -> np.ndarray:
    """The inverted-dropout scaling `Tensor.dropout(DROPOUT_P, rng=dropout_rng())` draws."""
    shape = shape if isinstance(shape, tuple) else (int(shape),)
    return keep_mask(shape, DROPOUT_P, dropout_rng()) * kept_scale(DROPOUT_P)


# ---------------------------------------------------------------- analytic gradients


def checked(inputs: Sequence) -> list[Tensor]:
    return [a for a in inputs if isinstance(a, Tensor) and a.requires_grad]


def _float64(inputs: Sequence) -> list:
    """Fresh float64 copies of the Tensors (and SparseTensor templates); others unchanged."""
    def cast(a):
        if isinstance(a, Tensor):
            return Tensor(a.data.astype(np.float64), requires_grad=a.requires_grad)
        return a.astype(np.float64) if isinstance(a, SparseTensor) else a
    return [cast(a) for a in inputs]


def analytic_grads(fn: Callable[..., Tensor], inputs: Sequence, weights: np.ndarray):
    """(output, [d Σ weights·out / d input] for each input that requires grad), in float64."""
    args = _float64(inputs)
    out = fn(*args)
    if out.requires_grad:
        out.backward(weights)
    grads = [np.zeros_like(a.data) if a.grad is None else a.grad for a in checked(args)]
    return out.data, grads


def scalar_grads(scalar: Callable[..., np.ndarray], inputs: Sequence, weights: np.ndarray):
    """The same pair from the scalar decomposition (`Case.scalar`)."""
    def as_array(*a) -> np.ndarray:  # a loss's reference returns one Value
        return np.asarray(scalar(*a), dtype=object)

    args = _float64(inputs)
    leaves = [ref.to_values(a.data) if isinstance(a, Tensor) else a for a in args]
    out = ref.data_of(as_array(*leaves))
    grads = ref.scalar_vjp(as_array, tuple(args), weights)
    return out, [g for g, a in zip(grads, args) if isinstance(a, Tensor) and a.requires_grad]


def functions_reached(case: Case, size: str = DEFAULT_SIZE, seed: int = 0) -> set[type[Function]]:
    """The Function classes applied in the graph of `case` at `size` (before any backward
    frees the graph)."""
    return {ctx.fn for ctx in graph_contexts(case.fn(*case.inputs(size, seed)))}


# ---------------------------------------------------------------- oracles


Verdict = tuple[float, float, bool]  # max abs err, max rel err, passed


def _relative(abs_err: float, arrays: list) -> float:
    """abs_err over the largest |entry| of `arrays`: an error relative to the gradient's scale
    (an entry-wise ratio would divide finite-difference noise by a true zero)."""
    scale = max((float(np.max(np.abs(a), initial=0.0)) for a in arrays), default=0.0)
    return abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else math.inf)


def weights_for(case: Case, inputs: tuple, seed: int) -> np.ndarray:
    with no_grad():
        shape = case.fn(*_float64(inputs)).shape
    return np.random.default_rng(seed).standard_normal(shape)


def finite_differences(case: Case, inputs: tuple, seed: int) -> Verdict:
    r = gradcheck(case.fn, inputs, eps=FD_EPS, atol=FD_ATOL, rtol=FD_RTOL,
                  raise_exception=False, seed=seed)
    _, grads = analytic_grads(case.fn, inputs, weights_for(case, inputs, seed))  # same weighting
    return r.max_abs_err, _relative(r.max_abs_err, grads), r.passed


def compare(got: tuple, want: tuple) -> Verdict:
    """(output, grads) of the op against an oracle's: max abs and rel error, and the verdict."""
    (out, grads), (ref_out, ref_grads) = got, want
    pairs = list(zip([out, *grads], [ref_out, *ref_grads]))
    if len(grads) != len(ref_grads) or any(np.shape(a) != np.shape(b) for a, b in pairs):
        return math.inf, math.inf, False
    err = [np.abs(np.subtract(a, b, dtype=np.float64)) for a, b in pairs]
    passed = all(np.all(e <= EXACT_ATOL + EXACT_RTOL * np.abs(b)) for e, (_, b) in zip(err, pairs))
    abs_err = max(float(np.max(e, initial=0.0)) for e in err)
    return abs_err, _relative(abs_err, [b for _, b in pairs]), passed


def dense_equivalent(case: Case, inputs: tuple, seed: int) -> Verdict:
    w = weights_for(case, inputs, seed)
    return compare(analytic_grads(case.fn, inputs, w), analytic_grads(case.dense, inputs, w))


def scalar_reference(case: Case, inputs: tuple, seed: int) -> Verdict:
    w = weights_for(case, inputs, seed)
    return compare(analytic_grads(case.fn, inputs, w), scalar_grads(case.scalar, inputs, w))


def shapes_only(case: Case, inputs: tuple, seed: int) -> Verdict:
    """For a case whose every checked input is empty: backward runs, each gradient has its
    input's shape, and the output's shape is the dense equivalent's."""
    w = weights_for(case, inputs, seed)
    out, grads = analytic_grads(case.fn, inputs, w)
    ok = [g.shape == a.shape for g, a in zip(grads, checked(inputs))]
    if case.dense is not None:
        ok.append(analytic_grads(case.dense, inputs, w)[0].shape == out.shape)
    return math.nan, math.nan, all(ok)  # nothing measured: no error to report


ORACLES: dict[str, Callable[[Case, tuple, int], Verdict]] = {
    FINITE_DIFFERENCES: finite_differences, DENSE: dense_equivalent, SCALAR: scalar_reference,
    SHAPES: shapes_only,
}


def is_empty(inputs: Sequence) -> bool:
    """Every input to check has zero size (say nnz = 0): no gradient entry to compare."""
    return all(a.size == 0 for a in checked(inputs))

