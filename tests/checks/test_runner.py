"""The runner: rows, selection, usage errors, progress, the report, and wrong gradients failing."""

from __future__ import annotations

import json
import math

import pytest

from mgsparse import checks
from mgsparse.checks import (
    CASES,
    DENSE,
    FINITE_DIFFERENCES,
    KNOWN_OPS,
    SCALAR,
    SHAPES,
    SIZES,
    check_ops,
    run_checks,
)
from mgsparse.checks import nn as nn_cases
from mgsparse.engine import ops
from mgsparse.errors import ConfigError
from mgsparse.sparse.graph import AttentionSoftmax
from mgsparse.sparse.ops import ScatterAdd, SpMM


def by_op(rows) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r.op, []).append(r)
    return out


def double_values_grad(original):
    """SpMM's backward with dA doubled: wrong values, no exception (so no scalar fallback)."""
    def vjp(ctx, g):
        dv, *rest = original(ctx, g)  # (dX, None) and, with a bias, its gradient
        return (None if dv is None else 2 * dv), *rest
    return staticmethod(vjp)


# ---------------------------------------------------------------- rows


def test_all_rows_in_registry_order_grouped_by_package():
    rows = run_checks(seed=0, size="small")
    assert list(by_op(rows)) == list(KNOWN_OPS)
    assert checks.GROUPS == ("engine", "sparse", "nn")
    assert [c.group for c in CASES.values()] == sorted(
        (c.group for c in CASES.values()), key=checks.GROUPS.index)
    assert all(r.passed for r in rows)


def test_rows_carry_shapes_and_nnz():
    spmm = run_checks(["spmm"])[0]
    assert spmm.input_shapes == ((12,), (5, 3), (6, 5)) and spmm.nnz == 12
    gcn = run_checks(["nn.gcn_conv"])[0]
    assert gcn.input_shapes == ((7, 4), (4, 3), (3,)) and gcn.nnz == 16  # x, W, b; edges
    assert run_checks(["engine.add"])[0].nnz is None


def test_medium_size_skips_the_scalar_oracle():
    rows = run_checks(["sparse.spmm", "engine.matmul", "nn.gat_conv"], seed=3, size="medium")
    assert [(r.op, r.oracle) for r in rows] == [
        ("engine.matmul", FINITE_DIFFERENCES), ("sparse.spmm", FINITE_DIFFERENCES),
        ("sparse.spmm", DENSE), ("nn.gat_conv", FINITE_DIFFERENCES)]
    assert rows[1].input_shapes == ((90,), (18, 3), (24, 18))


def test_size_one_is_a_one_by_one_matrix_with_every_oracle():
    rows = run_checks(["sparse.spmm"], size="one")
    assert [r.oracle for r in rows] == [FINITE_DIFFERENCES, DENSE, SCALAR]
    assert rows[0].input_shapes == ((1,), (1, 3), (1, 1)) and rows[0].nnz == 1


def test_an_all_empty_case_is_a_shapes_only_row_not_a_gradient_check():
    rows = by_op(run_checks(["sparse.sum_rows", "sparse.spmm"], size="empty"))
    row, = rows["sparse.sum_rows"]  # only the (0,) values to check: nothing to compare
    assert (row.oracle, row.passed, row.nnz, row.is_gradient_check) == (SHAPES, True, 0, False)
    assert math.isnan(row.max_abs_err) and row.to_dict()["max_abs_err"] is None
    # spmm's X is not empty: its gradient (zeros) is still compared with every oracle
    assert [r.oracle for r in rows["sparse.spmm"]] == [FINITE_DIFFERENCES, DENSE, SCALAR]


def test_seed_changes_the_inputs_and_repeats_exactly():
    a, b, c = (run_checks(["engine.tanh"], seed=s)[0] for s in (1, 1, 2))
    assert a == b and a.max_abs_err != c.max_abs_err


# ---------------------------------------------------------------- selection and errors


def test_select_by_full_name_bare_name_and_group():
    assert checks.select_ops(["spmm"]) == ["sparse.spmm"]
    assert checks.select_ops(["relu"]) == ["engine.relu", "sparse.relu"]
    assert checks.select_ops(["sparse.relu", "relu"]) == ["engine.relu", "sparse.relu"]
    assert checks.select_ops(["nn.gcn_conv"]) == ["nn.gcn_conv"]
    assert checks.select_ops(["sparse"]) == [n for n in KNOWN_OPS if n.startswith("sparse.")]
    assert checks.select_ops(None) == checks.select_ops([]) == list(KNOWN_OPS)


def test_unknown_op_and_size_are_usage_errors():
    with pytest.raises(ConfigError) as info:
        run_checks(["spmn"])
    message = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in message
    assert message.startswith("unknown op 'spmn' (did you mean 'sparse.spmm'?); known ops: ")
    assert all(name in message for name in KNOWN_OPS)
    with pytest.raises(ConfigError, match=f"^unknown size 'large'; known sizes: "
                                          f"{', '.join(SIZES)}$"):
        run_checks(["spmm"], size="large")


def test_progress_is_reported_before_each_case_and_at_the_end():
    calls = []
    run_checks(["engine.neg", "sparse.sum_rows"], progress=lambda *a: calls.append(a))
    assert calls == [(0, 2, "engine.neg"), (1, 2, "sparse.sum_rows"), (2, 2, "")]


def test_report_counts_and_its_dict():
    report = check_ops(["sum_rows", "engine.add"], seed=2, size="empty")
    assert report.passed and report.failed_ops == [] and report.ops == ["engine.add",
                                                                        "sparse.sum_rows"]
    assert report.gradient_checks == 2  # engine.add: b (4,) has entries; sum_rows has none
    saved = json.loads(json.dumps(report.to_dict()))  # what --json writes
    assert (saved["checks"], saved["shapes_only"], saved["failed"], saved["seed"]) == (2, 1, 0, 2)


# ---------------------------------------------------------------- negative controls


def test_a_wrong_sparse_backward_fails_all_three_oracles(monkeypatch):
    monkeypatch.setattr(SpMM, "vjp", double_values_grad(SpMM.vjp))
    rows = run_checks(["spmm"])
    assert [(r.oracle, r.verdict) for r in rows] == [
        (FINITE_DIFFERENCES, "FAIL"), (DENSE, "FAIL"), (SCALAR, "FAIL")]
    assert all(r.max_abs_err > 0.1 and r.detail == "" for r in rows)


def test_a_layer_check_reaches_the_sparse_values(monkeypatch):
    """Only the layers with learned edge weights need dA; the fixed-graph layer does not."""
    monkeypatch.setattr(SpMM, "vjp", double_values_grad(SpMM.vjp))
    rows = by_op(run_checks(["nn.gcn_conv", "nn.gcn_conv_edge_weight", "gcn_learn_edge_weight"]))
    assert [r.verdict for r in rows["nn.gcn_conv"]] == ["PASS", "PASS"]
    assert [r.verdict for r in rows["nn.gcn_conv_edge_weight"]] == ["FAIL"]
    assert [r.verdict for r in rows["nn.gcn_learn_edge_weight"]] == ["FAIL"]


def test_a_slightly_wrong_edge_softmax_fails_the_attention_layers(monkeypatch):
    """Negative control for a whole layer: the (fused) edge softmax's backward 1% off."""
    right = AttentionSoftmax.vjp
    monkeypatch.setattr(AttentionSoftmax, "vjp", staticmethod(
        lambda ctx, g: tuple(d if d is None else d * 1.01 for d in right(ctx, g))))
    rows = by_op(run_checks(["gat_conv", "gat_conv_mean", "sage_conv"]))
    assert {op: [r.verdict for r in rs] for op, rs in rows.items()} == {
        "nn.gat_conv": ["FAIL"], "nn.gat_conv_mean": ["FAIL"], "nn.sage_conv": ["PASS"]}


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


def test_a_wrong_gradient_shape_fails_the_shapes_only_row(monkeypatch):
    """At nnz = 0 the row compares no numbers, but a backward of the wrong shape still fails."""
    def wrong(ctx, g):
        return g[ctx.index][:, None], None, None  # (0, 1) for values of shape (0,)
    monkeypatch.setattr(ScatterAdd, "vjp", staticmethod(wrong))
    row, = run_checks(["sparse.sum_rows"], size="empty")
    assert (row.oracle, row.verdict) == (SHAPES, "FAIL")


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
    monkeypatch.setattr(nn_cases.GCNConv, "__init__", broken_init)
    row, = run_checks(["nn.gcn_conv"])
    assert (row.oracle, row.verdict, row.input_shapes) == ("-", "FAIL", ())
    assert row.detail == ("building the inputs failed: TypeError: GCNConv() got an unexpected "
                          "keyword argument 'dtype'")
