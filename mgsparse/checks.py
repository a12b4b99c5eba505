"""Gradient checks for every op and layer: the registry behind `mgsparse gradcheck`.

Each `Case` builds float64 inputs from a seed and a size, computes an output y, and has the
gradient of s = Σ w·y (w a fixed random weighting) compared with up to three oracles:

- finite differences: (s(x + ε) − s(x − ε)) / 2ε through `mgsparse.gradcheck` (every case);
- dense equivalent: the same math on densified sparse operands through the Tensor engine
  alone (sparse ops, graph layers);
- scalar: the computation recomputed entry by entry from micrograd `Value`s (dense and sparse
  ops, small size only: the scalar engine is slow by design).

An entry passes when |analytic − oracle| ≤ atol + rtol·|oracle|; the dense and scalar oracles
also compare the output itself. A sparse op whose hand-written backward raised and was
rescued by its scalar fallback fails: the fallback would hide the very bug a check looks for.
Names are `group.op` (group: engine, sparse, nn); `select_ops` also takes a bare op name
(`spmm`, or `relu` for both engine.relu and sparse.relu) or a whole group.

The cases live next to what they check; this module runs them. In registry order: the dense
ops of `mgsparse.engine.cases.ENGINE_OPS`, the losses of `mgsparse.nn.cases.LOSS_CASES`, the
sparse ops of `mgsparse.sparse.cases.SPARSE_OPS`, then the layers: GCNConv and GCN's learned
edge weights here plus every entry of `mgsparse.nn.cases.LAYER_CASES` (one entry there is one
check here; those run on their own fixed small graph whatever the size).
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mgsparse.engine import Tensor, no_grad
from mgsparse.engine.cases import ENGINE_OPS, OpCase, by_name, leaf, normal
from mgsparse.engine.gradcheck import gradcheck
from mgsparse.errors import ConfigError
from mgsparse.nn.cases import LAYER_CASES, LOSS_CASES, random_graph
from mgsparse.nn.conv import GCNConv
from mgsparse.nn.models import GCN
from mgsparse.sparse import SPARSE_OPS, ScalarFallbackWarning, SparseTensor
from mgsparse.sparse.cases import analytic_grads, scalar_grads

SIZES = ("small", "medium")
LAYER_SIZES = {"small": (6, 4, 3, 12), "medium": (20, 8, 5, 60)}  # nodes, F_in, F_out, edges
FINITE_DIFFERENCES, DENSE, SCALAR = "finite differences", "dense equivalent", "scalar"
FD_EPS, FD_ATOL, FD_RTOL = 1e-6, 1e-6, 1e-5
EXACT_ATOL, EXACT_RTOL = 1e-9, 1e-7  # two analytic routes in float64 differ by round-off only


@dataclass(frozen=True)
class Case:
    """One checked computation: `build(rng, size)` → inputs, `fn(*inputs)` → Tensor.

    Inputs are Tensors (checked when `requires_grad`) and constants passed through (sparse
    patterns, edge lists, integer targets). `dense` and `scalar` follow `fn`'s signature;
    `scalar` receives object arrays of `Value`s in place of Tensors.
    """

    name: str
    build: Callable[[np.random.Generator, str], tuple]
    fn: Callable[..., Tensor]
    dense: Callable[..., Tensor] | None = None
    scalar: Callable[..., np.ndarray] | None = None

    def __repr__(self) -> str:
        oracles = [o for o, f in ((DENSE, self.dense), (SCALAR, self.scalar)) if f]
        return f"Case({self.name!r}, oracles={[FINITE_DIFFERENCES, *oracles]})"


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

    def to_dict(self) -> dict:
        """JSON-ready: an error that could not be measured (NaN) becomes null."""
        errors = [x if math.isfinite(x) else None for x in (self.max_abs_err, self.max_rel_err)]
        return {"op": self.op, "input_shapes": [list(s) for s in self.input_shapes],
                "nnz": self.nnz, "max_abs_err": errors[0], "max_rel_err": errors[1],
                "oracle": self.oracle, "verdict": self.verdict, "detail": self.detail}


# ---------------------------------------------------------------- engine ops and losses


def _dense_case(group: str, op: OpCase) -> Case:
    """An `OpCase` of mgsparse.engine.cases (an engine op, or a loss of mgsparse.nn.cases):
    finite differences and, where it has one, the scalar oracle."""
    return Case(f"{group}.{op.name}", op.build, op.fn, scalar=op.scalar)


# ---------------------------------------------------------------- sparse ops


def _sparse_case(op) -> Case:
    """An `OpCase` of mgsparse.sparse.cases, in float64, with its three oracles."""
    return Case(f"sparse.{op.name}", lambda rng, size: op.build(rng, size, np.float64),
                op.sparse, op.dense, op.scalar)


# ---------------------------------------------------------------- layers


class _Layer:
    """The last input of a layer case: the layer's forward, bound to the Tensors it is given
    (gradcheck perturbs its own float64 copies, so the layer must use those), plus an
    optional dense-adjacency route and the graph's edge count."""

    def __init__(self, fn: Callable, dense: Callable | None = None, edges: int | None = None):
        self.fn, self.dense, self.edges = fn, dense, edges

    def __repr__(self) -> str:
        return f"_Layer(edges={self.edges}, dense={self.dense is not None})"


def _layer_case(name: str, build: Callable, dense: bool = False) -> Case:
    """A whole-layer case from `build(rng, size) -> (fn, inputs[, dense_fn[, edges]])`:
    the protocol of `mgsparse.nn.cases.LAYER_CASES` (whose builds take `rng` only and have
    one size) with an optional dense route and edge count."""
    def build_inputs(rng, size):
        fn, inputs, *more = build(rng, size)
        return (*inputs, _Layer(fn, *more))
    route = (lambda *a: a[-1].dense(*a[:-1])) if dense else None
    return Case(name, build_inputs, lambda *a: a[-1].fn(*a[:-1]), route)


def _bind(module, call: Callable) -> tuple[Callable, tuple]:
    """fn(x, *params, *rest) → call(module, x, *rest) with `params` installed as the module's
    parameters (dotted names walk submodules), and float64 copies of the current ones."""
    names = [name.split(".") for name, _ in module.named_parameters()]

    def fn(x: Tensor, *tensors: Tensor) -> Tensor:
        for (*path, attr), tensor in zip(names, tensors):
            owner = module
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, attr, tensor)
        return call(module, x, *tensors[len(names):])
    return fn, tuple(leaf(p.data) for _, p in module.named_parameters())


def _dense_gcn_norm(edges: np.ndarray, n: int) -> Tensor:
    """Â as a dense Tensor computed by the engine alone (the gcn_norm case's dense route)."""
    A = SparseTensor.from_edge_index(edges, n, dtype=np.float64)
    return SPARSE_OPS["gcn_norm"].dense(A.values, A)


def _gcn_conv(rng: np.random.Generator, size: str):
    """GCNConv on a fixed graph, against the same layer given the dense Â."""
    n, f_in, f_out, e = LAYER_SIZES[size]
    edges = random_graph(rng, n, e)
    conv = GCNConv(f_in, f_out, rng=rng, dtype=np.float64)
    fn, params = _bind(conv, lambda m, x: m(x, edges))
    dense, _ = _bind(conv, lambda m, x: m(x, _dense_gcn_norm(edges, n)))
    return fn, (normal(rng, (n, f_in)), *params), dense, edges.shape[1]


def _gcn_learn_edge_weight(rng: np.random.Generator, size: str):
    """A two-layer GCN learning one weight per edge (eval mode: no dropout)."""
    n, f_in, f_out, e = LAYER_SIZES[size]
    edges = random_graph(rng, n, e)
    model = GCN(f_in, 5, f_out, rng=rng, dtype=np.float64, edge_index=edges,
                learn_edge_weight=True).eval()
    fn, params = _bind(model, lambda m, x: m(x, None))
    return fn, (normal(rng, (n, f_in)), *params), None, edges.shape[1]


_LAYER_CASES = [
    _layer_case("nn.gcn_conv", _gcn_conv, dense=True),
    _layer_case("nn.gcn_learn_edge_weight", _gcn_learn_edge_weight),
    *(_layer_case(f"nn.{name}", lambda rng, size, build=build: build(rng))
      for name, build in LAYER_CASES.items()),
]


CASES: dict[str, Case] = by_name([
    *(_dense_case("engine", op) for op in ENGINE_OPS.values()),
    *(_dense_case("nn", op) for op in LOSS_CASES.values()),
    *(_sparse_case(op) for op in SPARSE_OPS.values()),
    *_LAYER_CASES,
])
KNOWN_OPS: tuple[str, ...] = tuple(CASES)
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(name.split(".")[0] for name in KNOWN_OPS))


# ---------------------------------------------------------------- selection


def check_size(size: str) -> str:
    if size not in SIZES:
        raise ConfigError(f"unknown size {size!r}; known sizes: {', '.join(SIZES)}")
    return size


def _matches(name: str) -> list[str]:
    """A full name, a group (`sparse`) or a bare op name (`spmm`, `relu`: every group's)."""
    if name in CASES:
        return [name]
    return [k for k in KNOWN_OPS if name in (k.split(".")[0], k.split(".", 1)[1])]


def _did_you_mean(name: str) -> str:
    """The closest full name, compared by full name and by bare op name."""
    spellings = {**{k.split(".", 1)[1]: k for k in KNOWN_OPS}, **{k: k for k in KNOWN_OPS}}
    close = difflib.get_close_matches(name, spellings, n=1)
    return f" (did you mean {spellings[close[0]]!r}?)" if close else ""


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


# ---------------------------------------------------------------- oracles


def _relative(abs_err: float, arrays: list) -> float:
    """abs_err over the largest |entry| of `arrays`: an error relative to the gradient's scale
    (an entry-wise ratio would divide finite-difference noise by a true zero)."""
    scale = max((float(np.max(np.abs(a), initial=0.0)) for a in arrays), default=0.0)
    return abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else math.inf)


def _weights(case: Case, inputs: tuple, seed: int) -> np.ndarray:
    with no_grad():
        shape = case.fn(*inputs).shape
    return np.random.default_rng(seed).standard_normal(shape)


def _finite_differences(case: Case, inputs: tuple, seed: int) -> tuple[float, float, bool]:
    r = gradcheck(case.fn, inputs, eps=FD_EPS, atol=FD_ATOL, rtol=FD_RTOL,
                  raise_exception=False, seed=seed)
    _, grads = analytic_grads(case.fn, inputs, _weights(case, inputs, seed))  # same weighting
    return r.max_abs_err, _relative(r.max_abs_err, grads), r.passed


def _compare(got: tuple, want: tuple) -> tuple[float, float, bool]:
    """(output, grads) of the op against an oracle's: max abs and rel error, and the verdict."""
    (out, grads), (ref_out, ref_grads) = got, want
    pairs = list(zip([out, *grads], [ref_out, *ref_grads]))
    if len(grads) != len(ref_grads) or any(np.shape(a) != np.shape(b) for a, b in pairs):
        return math.inf, math.inf, False
    err = [np.abs(np.subtract(a, b, dtype=np.float64)) for a, b in pairs]
    passed = all(np.all(e <= EXACT_ATOL + EXACT_RTOL * np.abs(b)) for e, (_, b) in zip(err, pairs))
    abs_err = max(float(np.max(e, initial=0.0)) for e in err)
    return abs_err, _relative(abs_err, [b for _, b in pairs]), passed


def _dense_equivalent(case: Case, inputs: tuple, seed: int) -> tuple[float, float, bool]:
    w = _weights(case, inputs, seed)
    return _compare(analytic_grads(case.fn, inputs, w), analytic_grads(case.dense, inputs, w))


def _scalar(case: Case, inputs: tuple, seed: int) -> tuple[float, float, bool]:
    w = _weights(case, inputs, seed)
    return _compare(analytic_grads(case.fn, inputs, w), scalar_grads(case, inputs, w))


def _guarded(check: Callable, case: Case, inputs: tuple, seed: int) -> tuple:
    """check's (abs err, rel err, passed, detail); an exception or a scalar fallback fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScalarFallbackWarning)
        try:
            abs_err, rel_err, passed = check(case, inputs, seed)
        except Exception as err:  # noqa: BLE001 — a crashing op is a failed check, not a crash
            return math.nan, math.nan, False, f"{type(err).__name__}: {err}"
    fallbacks = [w for w in caught if issubclass(w.category, ScalarFallbackWarning)]
    for w in caught:
        if w not in fallbacks:  # let every other warning through, as if never caught
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if fallbacks:
        return abs_err, rel_err, False, f"hand-written backward failed: {fallbacks[0].message}"
    return abs_err, rel_err, passed, ""


# ---------------------------------------------------------------- running


def _stored_entries(inputs: tuple) -> int | None:
    """nnz of the sparse operands, or the edge count of a layer's graph (when it says)."""
    if inputs and isinstance(inputs[-1], _Layer):
        return inputs[-1].edges
    sparse = [a.nnz for a in inputs if isinstance(a, SparseTensor)]
    return sum(sparse) if sparse else None


def _shapes(inputs: tuple) -> tuple[tuple[int, ...], ...]:
    """Shapes of the Tensors, sparse patterns and index arrays (not of boolean masks)."""
    return tuple(tuple(a.shape) for a in inputs if isinstance(a, (Tensor, SparseTensor))
                 or (isinstance(a, np.ndarray) and a.dtype != bool))


def check_case(case: Case, seed: int = 0, size: str = "small") -> list[CheckRow]:
    """One row per oracle: finite differences, then dense equivalent, then scalar (small)."""
    try:
        inputs = case.build(np.random.default_rng(seed), check_size(size))
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 — e.g. a layer whose constructor broke
        detail = f"building the inputs failed: {type(err).__name__}: {err}"
        return [CheckRow(case.name, (), None, math.nan, math.nan, "-", False, detail)]
    oracles = [(FINITE_DIFFERENCES, _finite_differences)]
    if case.dense is not None:
        oracles.append((DENSE, _dense_equivalent))
    if case.scalar is not None and size == "small":
        oracles.append((SCALAR, _scalar))
    shapes, nnz = _shapes(inputs), _stored_entries(inputs)
    rows = []
    for oracle, check in oracles:
        abs_err, rel_err, passed, detail = _guarded(check, case, inputs, seed)
        rows.append(CheckRow(case.name, shapes, nnz, abs_err, rel_err, oracle, passed, detail))
    return rows


def run_checks(ops: Sequence[str] | None = None, seed: int = 0, size: str = "small",
               progress: Callable[[int, int, str], None] | None = None) -> list[CheckRow]:
    """Check the selected ops (all when `ops` is empty) in float64; never raises on a failing
    op (its rows say FAIL), only on a bad argument (ConfigError).

    `progress(done, total, name)` is called before each case and once at the end.
    """
    check_size(size)
    names = select_ops(ops)
    rows: list[CheckRow] = []
    for done, name in enumerate(names):
        if progress is not None:
            progress(done, len(names), name)
        rows.extend(check_case(CASES[name], seed, size))
    if progress is not None:
        progress(len(names), len(names), "")
    return rows
