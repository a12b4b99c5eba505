"""The fast-path sweep (`checks.fast_paths`): every gradcheck case under `kernels.tiny()` at 1 and 2
threads, against finite differences, 1 thread against 2 and `kernels.reference()`; every fast
path taken somewhere; and one-line bugs planted in a fast path, invisible to the plain
gradcheck, failing it."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import kernels
from mgsparse.checks import KNOWN_OPS, check_ops, run_checks, sweep
from mgsparse.checks import fast_paths as sweeping
from mgsparse.kernels import modes, tuning
from mgsparse.kernels.slices import ColumnSlices


def by_op(rows) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r.op, []).append(r)
    return out


def failing(report) -> dict[str, list[str]]:
    return {op: [r.oracle for r in rows if not r.passed]
            for op, rows in by_op(report.rows).items() if not all(r.passed for r in rows)}


def test_every_case_passes_at_one_and_two_threads_and_every_fast_path_is_taken():
    before = {name: getattr(tuning, name) for name in tuning.TINY}
    report = sweep()
    assert failing(report) == {}
    assert report.missing == () and report.passed
    assert set(sweeping.PATHS.values()) <= set(report.seen)
    assert report.ops == list(KNOWN_OPS) and report.threads == (1, 2)
    regrouped_cases = 0
    for op, rows in by_op(report.rows).items():
        oracles = [r.oracle for r in rows]
        regrouped = any(k in report.paths[op] for k in sweeping.REGROUPED)
        regrouped_cases += regrouped
        tail = ([sweeping.SAME_THREADS, "tiny ≈ reference (regrouped)",
                 "tiny, sums as one call = reference, bitwise"] if regrouped
                else [sweeping.SAME_THREADS, "tiny = reference, bitwise"])
        assert oracles[-len(tail):] == tail, op
        assert oracles[:-len(tail)] in ([], ["tiny, 1 thread: finite differences",
                                             "tiny, 2 threads: finite differences"]), op
        assert rows[-len(tail)].max_abs_err == 0, op  # 1 thread = 2: not one bit apart
        assert rows[-1].max_abs_err == 0, op  # every path but the regrouping ones: bitwise
    assert 20 < regrouped_cases < len(KNOWN_OPS) - 20
    # a path that regroups a sum stays within a few ulps of the one call
    assert max(r.max_rel_err for r in report.rows if r.oracle.endswith("(regrouped)")) < 1e-14
    assert {name: getattr(tuning, name) for name in tuning.TINY} == before
    assert modes.COUNTS is None and modes.State.reference is False


def test_reference_takes_no_fast_path_and_the_plain_run_none_that_tiny_adds():
    with kernels.num_threads(2), kernels.reference(), modes.counting() as seen:
        assert all(r.passed for r in run_checks())
    assert seen == {}
    with kernels.num_threads(2), modes.counting() as seen:
        assert all(r.passed for r in run_checks())
    # at its own thresholds the registry takes only the two paths that apply at any size
    assert set(seen) == {"CSC read", "symmetric scatter"}


def test_the_comparisons_see_one_ulp_and_tolerate_a_regrouped_sum_only():
    a = np.array([1.0, 2.0, 3.0])
    nudged = a.copy()
    nudged[1] = np.nextafter(2.0, 3.0)
    assert sweeping.bitwise((a, [a]), (a, [a]))[2]
    assert not sweeping.bitwise((a, [nudged]), (a, [a]))[2]
    assert sweeping.within((a, [nudged]), (a, [a]))[2]
    assert not sweeping.within((a, [a * (1 + 1e-9)]), (a, [a]))[2]
    assert not sweeping.bitwise((a, [a[:2]]), (a, [a]))[2]  # shapes differ


# ---------------------------------------------------------------- planted bugs


def test_a_row_record_one_row_short_fails_the_sweep_and_passes_the_plain_gradcheck(monkeypatch):
    """`mark_rows` recording all but the last row: at its own thresholds no record is read
    (MIN_BLOCK_ROWS rows at least), so every plain check passes; under tiny() the products
    below a loss on one node read the record and miss a row."""
    mark_rows = kernels.rows.mark_rows
    short = lambda g, rows: mark_rows(g, rows[:-1])
    monkeypatch.setattr(kernels.rows, "mark_rows", short)
    monkeypatch.setattr(kernels, "mark_rows", short)
    assert check_ops().passed
    report = sweep(["nn.gcn_loss_rows", "nn.gcn_conv", "sparse.spmm"])
    assert failing(report) == {"nn.gcn_loss_rows": [
        "tiny, 1 thread: finite differences", "tiny, 2 threads: finite differences",
        "tiny ≈ reference (regrouped)", "tiny, sums as one call = reference, bitwise"]}


def test_a_slice_boundary_off_by_one_fails_the_sweep_and_passes_the_plain_gradcheck(monkeypatch):
    """Entries cut into column slices by boundaries one column past the ranges the slices
    zero and own: the first column of each slice but the first is lost (at one thread; at
    two, whichever slice runs last decides). Slices run only on outputs of SLICE_BYTES and
    more, so every plain check passes."""
    cut_positions = ColumnSlices._cut_positions

    def off_by_one(self):
        true = self.bounds
        self.bounds = [true[0], *(b + 1 for b in true[1:-1]), true[-1]]
        try:
            return cut_positions(self)
        finally:
            self.bounds = true
    monkeypatch.setattr(ColumnSlices, "_cut_positions", off_by_one)
    assert check_ops().passed
    report = sweep(["nn.gcn_conv", "nn.gcn_conv_undirected", "nn.gat_conv", "sparse.spmm"])
    assert set(failing(report)) == {"nn.gcn_conv", "nn.gcn_conv_undirected", "nn.gat_conv"}
    assert "tiny, 1 thread: finite differences" in failing(report)["nn.gat_conv"]


def test_a_fast_path_one_ulp_off_fails_only_the_bitwise_comparison(monkeypatch):
    """A tiled bias add one ulp off in its first entry: within finite differences' tolerance
    (and the regrouping tolerance), but not the one call's bits."""
    add_rows = kernels.dense.add_rows

    def nudged(a, b, out):
        tiled = a.ndim == 2 and b.ndim == 1 and len(a) >= tuning.TILED_ROWS
        result = add_rows(a, b, out)
        if tiled and result.size:
            result.flat[0] = np.nextafter(result.flat[0], np.inf)
        return result
    monkeypatch.setattr(kernels.dense, "add_rows", nudged)
    monkeypatch.setattr(kernels, "add_rows", nudged)
    assert check_ops(["engine.add", "nn.linear"]).passed
    report = sweep(["engine.add", "nn.linear"])
    assert all(r.passed for r in report.rows if r.oracle.endswith("finite differences"))
    assert failing(report)["engine.add"] == ["tiny = reference, bitwise"]
    # a case that regroups a sum elsewhere: within the tolerance, but not the bits
    assert "tiny ≈ reference (regrouped)" not in failing(report)["nn.linear"]
    assert failing(report)["nn.linear"][-1] == "tiny, sums as one call = reference, bitwise"
    assert 0 < max(r.max_abs_err for r in report.rows if not r.passed) < 1e-14


@pytest.mark.slow
def test_the_sweep_passes_at_the_medium_size_too():
    report = sweep(size="medium")
    assert failing(report) == {} and report.passed
