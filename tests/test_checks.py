"""The gradcheck registry: every op is covered, every oracle runs, and wrong gradients fail."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgsparse import checks
from mgsparse.checks import CASES, DENSE, FINITE_DIFFERENCES, KNOWN_OPS, SCALAR, run_checks
from mgsparse.engine import Function, ops
from mgsparse.engine.tensor import graph_contexts
from mgsparse.errors import ConfigError
from mgsparse.nn.cases import LAYER_CASES
from mgsparse.sparse import SPARSE_OPS
from mgsparse.sparse.ops import SpMM

REQUIRED_DENSE = [
    "add", "mul", "neg", "pow", "exp", "log", "relu", "leaky_relu", "elu", "sigmoid", "tanh",
    "abs", "clip", "sum", "max", "mean", "softmax", "log_softmax", "reshape", "transpose",
    "getitem", "concatenate", "stack", "matmul", "dropout",
]
REQUIRED_LOSSES = ["cross_entropy", "bce_with_logits", "mse_loss"]


def by_op(rows) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r.op, []).append(r)
    return out


def double_values_grad(original):
    """SpMM's backward with dA doubled: wrong values, no exception (so no scalar fallback)."""
    def vjp(ctx, g):
        dv, dX, ds = original(ctx, g)
        return (None if dv is None else 2 * dv), dX, ds
    return staticmethod(vjp)


# ---------------------------------------------------------------- coverage


def test_registry_names_every_required_op_and_every_sparse_case():
    assert [f"engine.{n}" for n in REQUIRED_DENSE if f"engine.{n}" not in KNOWN_OPS] == []
    assert [f"nn.{n}" for n in REQUIRED_LOSSES if f"nn.{n}" not in KNOWN_OPS] == []
    assert {f"sparse.{n}" for n in SPARSE_OPS} <= set(KNOWN_OPS)
    assert len(SPARSE_OPS) == 22
    assert {f"nn.{n}" for n in LAYER_CASES} <= set(KNOWN_OPS)  # every layer case of nn
    assert {"nn.gcn_conv", "nn.gcn_learn_edge_weight", "nn.gat_conv", "nn.sage_conv"} <= set(
        KNOWN_OPS)
    assert len(set(KNOWN_OPS)) == len(KNOWN_OPS) and set(checks.GROUPS) == {"engine", "sparse", "nn"}


def test_every_engine_function_is_exercised_by_some_case():
    """A Function added to engine/ops.py without a gradcheck case makes this fail."""
    defined = {f for f in vars(ops).values() if isinstance(f, type) and issubclass(f, Function)
               and f.__module__ == ops.__name__}
    used = set()
    for name in KNOWN_OPS:
        if name.startswith(("engine.", "nn.")):
            case = CASES[name]
            used |= {ctx.fn for ctx in graph_contexts(case.fn(*case.build(
                np.random.default_rng(0), "small")))}
    assert sorted(f.__name__ for f in defined - used) == []
    assert len(defined) >= 20


def test_all_checks_pass_at_small_size_with_the_expected_oracles():
    rows = run_checks(seed=0, size="small")
    assert [(r.op, r.oracle, r.detail) for r in rows if not r.passed] == []
    groups = by_op(rows)
    assert list(groups) == list(KNOWN_OPS)
    for name in SPARSE_OPS:  # all three oracles for every sparse op
        assert [r.oracle for r in groups[f"sparse.{name}"]] == [FINITE_DIFFERENCES, DENSE, SCALAR]
    assert [r.oracle for r in groups["engine.exp"]] == [FINITE_DIFFERENCES, SCALAR]
    assert [r.oracle for r in groups["engine.max"]] == [FINITE_DIFFERENCES]
    assert [r.oracle for r in groups["nn.gcn_conv"]] == [FINITE_DIFFERENCES, DENSE]
    assert [r.oracle for r in groups["nn.gat_conv"]] == [FINITE_DIFFERENCES]
    fd = [r for r in rows if r.oracle == FINITE_DIFFERENCES]
    exact = [r for r in rows if r.oracle != FINITE_DIFFERENCES]
    assert max(r.max_abs_err for r in fd) < 1e-7
    assert max(r.max_abs_err for r in exact) < 1e-12  # two analytic routes: round-off only


def test_rows_carry_shapes_and_nnz():
    spmm, = by_op(run_checks(["spmm"]))["sparse.spmm"][:1]
    assert spmm.input_shapes == ((12,), (5, 3), (6, 5)) and spmm.nnz == 12
    gcn = run_checks(["nn.gcn_conv"])[0]
    assert gcn.input_shapes == ((6, 4), (4, 3), (3,)) and gcn.nnz == 12  # x, W, b; edges
    assert run_checks(["engine.add"])[0].nnz is None


def test_medium_size_skips_the_scalar_oracle_and_passes():
    rows = run_checks(["sparse.spmm", "engine.matmul", "nn.gat_conv"], seed=3, size="medium")
    assert [(r.op, r.oracle) for r in rows] == [
        ("engine.matmul", FINITE_DIFFERENCES), ("sparse.spmm", FINITE_DIFFERENCES),
        ("sparse.spmm", DENSE), ("nn.gat_conv", FINITE_DIFFERENCES)]
    assert all(r.passed for r in rows)
    assert rows[1].input_shapes == ((90,), (18, 3), (24, 18))


def test_seed_changes_the_inputs_and_repeats_exactly():
    a, b, c = (run_checks(["engine.tanh"], seed=s)[0] for s in (1, 1, 2))
    assert a == b and a.max_abs_err != c.max_abs_err


# ---------------------------------------------------------------- selection


def test_select_by_full_name_bare_name_and_group():
    assert checks.select_ops(["spmm"]) == ["sparse.spmm"]
    assert checks.select_ops(["relu"]) == ["engine.relu", "sparse.relu"]
    assert checks.select_ops(["sparse.relu", "relu"]) == ["engine.relu", "sparse.relu"]
    assert checks.select_ops(["nn.gcn_conv"]) == ["nn.gcn_conv"]
    assert checks.select_ops(["sparse"]) == [f"sparse.{n}" for n in SPARSE_OPS]
    assert checks.select_ops(None) == checks.select_ops([]) == list(KNOWN_OPS)


def test_unknown_op_and_size_are_usage_errors():
    with pytest.raises(ConfigError) as info:
        run_checks(["spmn"])
    message = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in message
    assert message.startswith("unknown op 'spmn' (did you mean 'sparse.spmm'?); known ops: ")
    assert all(name in message for name in KNOWN_OPS)
    with pytest.raises(ConfigError, match="unknown size 'large'; known sizes: small, medium"):
        run_checks(["spmm"], size="large")


def test_progress_is_reported_before_each_case_and_at_the_end():
    calls = []
    run_checks(["engine.neg", "sparse.sum_rows"], progress=lambda *a: calls.append(a))
    assert calls == [(0, 2, "engine.neg"), (1, 2, "sparse.sum_rows"), (2, 2, "")]


# ---------------------------------------------------------------- negative controls


def test_a_wrong_sparse_backward_fails_all_three_oracles(monkeypatch):
    monkeypatch.setattr(SpMM, "vjp", double_values_grad(SpMM.vjp))
    rows = run_checks(["spmm"])
    assert [(r.oracle, r.verdict) for r in rows] == [
        (FINITE_DIFFERENCES, "FAIL"), (DENSE, "FAIL"), (SCALAR, "FAIL")]
    assert all(r.max_abs_err > 0.1 and r.detail == "" for r in rows)


def test_a_layer_check_reaches_the_sparse_values(monkeypatch):
    """Only the layer with a learned edge weight needs dA; the fixed-graph layer does not."""
    monkeypatch.setattr(SpMM, "vjp", double_values_grad(SpMM.vjp))
    rows = by_op(run_checks(["nn.gcn_conv", "nn.gcn_conv_edge_weight", "gcn_learn_edge_weight"]))
    assert [r.verdict for r in rows["nn.gcn_conv"]] == ["PASS", "PASS"]
    assert [r.verdict for r in rows["nn.gcn_conv_edge_weight"]] == ["FAIL"]
    assert [r.verdict for r in rows["nn.gcn_learn_edge_weight"]] == ["FAIL"]


def test_a_backward_rescued_by_the_scalar_fallback_still_fails(monkeypatch):
    def broken(ctx, g):
        raise IndexError("bad index")
    monkeypatch.setattr(SpMM, "vjp", staticmethod(broken))
    rows = run_checks(["spmm"])
    assert all(not r.passed for r in rows)
    assert rows[0].max_abs_err < 1e-6  # the fallback's gradient itself is right...
    assert rows[0].detail.startswith("hand-written backward failed: spmm: backward failed "
                                     "(IndexError: bad index)")  # ...but the op is broken


def test_a_wrong_dense_backward_fails(monkeypatch):
    def wrong(ctx, g):
        a, b = ctx.saved_tensors
        return ops.unbroadcast(g * b, a.shape), ops.unbroadcast(g * a * 1.01, b.shape)
    monkeypatch.setattr(ops.Mul, "backward", staticmethod(wrong))
    rows = by_op(run_checks(["engine.mul", "engine.add"]))
    assert [(r.oracle, r.verdict) for r in rows["engine.mul"]] == [
        (FINITE_DIFFERENCES, "FAIL"), (SCALAR, "FAIL")]
    assert all(r.passed for r in rows["engine.add"])


def test_an_op_that_raises_is_a_failed_row_not_a_crash(monkeypatch):
    def boom(ctx, x):
        raise RuntimeError("exp exploded")
    monkeypatch.setattr(ops.Exp, "forward", staticmethod(boom))
    row = run_checks(["engine.exp"])[0]
    assert not row.passed and math.isnan(row.max_abs_err)
    assert row.detail == "RuntimeError: exp exploded"
    assert row.to_dict()["max_abs_err"] is None and row.to_dict()["verdict"] == "FAIL"


def test_inputs_that_cannot_be_built_are_a_failed_row(monkeypatch):
    def broken_init(self, *args, **kwargs):
        raise TypeError("GCNConv() got an unexpected keyword argument 'dtype'")
    monkeypatch.setattr(checks.GCNConv, "__init__", broken_init)
    row, = run_checks(["nn.gcn_conv"])
    assert (row.oracle, row.verdict, row.input_shapes) == ("-", "FAIL", ())
    assert row.detail == ("building the inputs failed: TypeError: GCNConv() got an unexpected "
                          "keyword argument 'dtype'")
