"""`mgsparse gradcheck` driven as a user would: exit codes, the table, the JSON file."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from mgsparse.checks import CASES, DENSE, FINITE_DIFFERENCES, KNOWN_OPS, SCALAR, SHAPES, SIZES
from mgsparse.checks.case import is_empty
from mgsparse.cli import gradcheck as command
from mgsparse.cli.render_checks import DelayedBar
from mgsparse.engine import ops
from mgsparse.sparse.ops import SpMM
from tests.conftest import gradcheck_sizes, one_line_error

ROW_KEYS = {"op", "input_shapes", "nnz", "max_abs_err", "max_rel_err", "oracle", "verdict",
            "detail"}


@pytest.fixture
def run(cli):
    """`mgsparse gradcheck ARGS` through the suite's one CLI fixture."""
    return lambda *args: cli("gradcheck", *args)


@pytest.mark.parametrize("size", gradcheck_sizes())
def test_every_size_passes_and_lists_every_op(run, tmp_path, size):
    path = tmp_path / f"{size}.json"
    result = run("--size", size, "--json", path)
    assert result.exit_code == 0, result.output
    table_ops = {line.split()[0] for line in result.output.splitlines() if line.strip()}
    assert [name for name in KNOWN_OPS if name not in table_ops] == []
    report = json.loads(path.read_text())
    assert report["passed"] is True and report["failed"] == 0 and report["size"] == size
    assert report["ops"] == len(KNOWN_OPS) == len({r["op"] for r in report["rows"]})
    empty = [n for n, c in CASES.items() if is_empty(c.inputs(size))]
    assert report["shapes_only"] == len(empty)
    assert report["checks"] == len(report["rows"]) - len(empty)
    shapes = f" (+{len(empty)} shapes only: no entries)" if empty else ""
    assert f"all {report['checks']} checks of {len(KNOWN_OPS)} ops passed{shapes}" in " ".join(
        result.output.split())
    assert "FAIL" not in result.output


def test_spmm_json_has_the_expected_schema(run, tmp_path):
    path = tmp_path / "out.json"
    result = run("--op", "spmm", "--json", path)
    assert result.exit_code == 0, result.output
    report = json.loads(path.read_text())
    assert set(report) == {"seed", "size", "passed", "checks", "shapes_only", "failed", "ops",
                           "seconds", "rows"}
    assert (report["seed"], report["size"], report["checks"], report["ops"]) == (0, "small", 3, 1)
    rows = report["rows"]
    assert [r["oracle"] for r in rows] == [FINITE_DIFFERENCES, DENSE, SCALAR]
    for r in rows:
        assert set(r) == ROW_KEYS
        assert r["op"] == "sparse.spmm" and r["verdict"] == "PASS" and r["detail"] == ""
        assert r["input_shapes"] == [[12], [5, 3], [6, 5]] and r["nnz"] == 12
        assert 0 <= r["max_abs_err"] < 1e-7 and 0 <= r["max_rel_err"] < 1e-7


def test_a_shapes_only_row_shows_no_error(run, tmp_path):
    path = tmp_path / "empty.json"
    result = run("--op", "sparse.sum_rows", "--size", "empty", "--json", path)
    assert result.exit_code == 0, result.output
    row, = json.loads(path.read_text())["rows"]
    assert (row["oracle"], row["max_abs_err"], row["verdict"]) == (SHAPES, None, "PASS")
    line = next(line for line in result.output.splitlines() if "sparse.sum_rows" in line)
    assert line.split()[-5:] == ["-", "-", "shapes", "only", "PASS"]


def test_a_broken_sparse_backward_exits_1_with_a_fail_row(run, monkeypatch, tmp_path):
    original = SpMM.vjp

    def wrong(ctx, g):  # a wrong value, not an exception: no scalar fallback kicks in
        dv, dX, ds = original(ctx, g)
        return (None if dv is None else -dv), dX, ds

    monkeypatch.setattr(SpMM, "vjp", staticmethod(wrong))
    path = tmp_path / "broken.json"
    result = run("--op", "spmm", "--op", "engine.add", "--json", path)
    assert result.exit_code == 1, result.output
    verdicts = {(r["op"], r["oracle"]): r["verdict"] for r in json.loads(path.read_text())["rows"]}
    assert verdicts[("sparse.spmm", FINITE_DIFFERENCES)] == "FAIL"
    assert verdicts[("sparse.spmm", SCALAR)] == "FAIL"
    assert verdicts[("engine.add", FINITE_DIFFERENCES)] == "PASS"
    assert "1 of 2 ops failed: sparse.spmm" in result.output
    assert result.output.count("FAIL") == 3


def test_a_broken_dense_backward_exits_1(run, monkeypatch):
    def wrong(ctx, g):
        a, b = ctx.saved_tensors
        return ops.unbroadcast(g * a, a.shape), ops.unbroadcast(g * a, b.shape)  # da uses a
    monkeypatch.setattr(ops.Mul, "backward", staticmethod(wrong))
    result = run("--op", "engine.mul")
    assert result.exit_code == 1, result.output
    assert "1 of 1 op failed: engine.mul" in result.output
    verdicts = [line.split()[-1] for line in result.output.splitlines()
                if line.split() and line.split()[-1] in ("PASS", "FAIL")]
    assert verdicts == ["FAIL", "FAIL"]  # finite differences and scalar


def test_a_backward_that_raises_is_explained(run, monkeypatch):
    def broken(ctx, g):
        raise ValueError("no")
    monkeypatch.setattr(SpMM, "vjp", staticmethod(broken))
    result = run("--op", "sparse.spmm", "--size", "one")
    assert result.exit_code == 1
    assert ("FAIL sparse.spmm (finite differences): hand-written backward failed: spmm: "
            "backward failed (ValueError: no)") in result.output


def test_medium_size_has_no_scalar_rows(run, tmp_path):
    path = tmp_path / "medium.json"
    result = run("--op", "spmm", "--op", "nn.gcn_conv", "--size", "medium", "--seed", 5,
                 "--json", path)
    assert result.exit_code == 0, result.output
    report = json.loads(path.read_text())
    assert (report["seed"], report["size"]) == (5, "medium")
    assert [(r["op"], r["oracle"]) for r in report["rows"]] == [
        ("sparse.spmm", FINITE_DIFFERENCES), ("sparse.spmm", DENSE),
        ("nn.gcn_conv", FINITE_DIFFERENCES), ("nn.gcn_conv", DENSE)]


def test_unknown_op_exits_2_listing_the_known_ones(run):
    line = one_line_error(run("--op", "spmm", "--op", "spmn"), 2,
                          "unknown op 'spmn' (did you mean 'sparse.spmm'?); known ops:")
    assert all(name in line for name in KNOWN_OPS)


def test_bad_size_exits_2_naming_every_size(run):
    one_line_error(run("--size", "large"), 2,
                   f"unknown size 'large'; known sizes: {', '.join(SIZES)}")
    assert command.SIZE_NAMES.split("|") == list(SIZES)  # the help shows the same names


def test_json_into_a_missing_folder_creates_it(run, tmp_path):
    """The output rule (cli/outputs.py): missing folders on the way are created."""
    path = tmp_path / "new" / "deeper" / "out.json"
    result = run("--op", "spmm", "--json", path)
    assert result.exit_code == 0, result.output
    assert json.loads(path.read_text())["ops"] == 1


def test_a_json_path_that_cannot_be_written_exits_2_before_running(run, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    one_line_error(run("--op", "engine.neg", "--json", tmp_path), 2, "--json", "is a folder")
    one_line_error(run("--op", "engine.neg", "--json", blocker / "out.json"), 2,
                   f"--json {blocker / 'out.json'}: {blocker} is a file, not a folder")


@pytest.mark.parametrize("terminal, delay, shown", [(True, 0.0, True), (True, 60.0, False),
                                                     (False, 0.0, False)])
def test_progress_bar_only_on_a_terminal_and_only_after_a_moment(terminal, delay, shown):
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=terminal, width=80)
    with DelayedBar(console, delay) as bar:
        for done, name in enumerate(["engine.add", "sparse.spmm", ""]):
            bar(done, 2, name)
    text = stream.getvalue()
    assert ("gradcheck" in text and "2/2" in text) is shown, text
    assert shown or text == ""


def test_the_table_fits_80_columns_with_every_cell_whole():
    """At 80 columns (a terminal's default) every op name, error, oracle and verdict is whole:
    the long oracle names and the verdict header were cut ('finite differenc', 'verd'); the
    input shapes sit under the op's name, wrapped at commas, and the caption names the
    oracles in full."""
    from mgsparse import checks
    from mgsparse.cli.render_checks import gradcheck_table

    report = checks.check_ops(["nn.vgae", "sparse.spmm", "nn.gae_mlp_decoder"], seed=0)
    console = Console(width=80, file=io.StringIO(), color_system=None)
    console.print(gradcheck_table(report))
    text = console.file.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "oracle" in line).split()
    assert header == ["op", "(input", "shapes)", "nnz", "abs", "err", "rel", "err", "oracle",
                      "result"]
    results = [line.split() for line in lines if line.split()[-1:] in (["PASS"], ["FAIL"])]
    assert [r[-2:] for r in results] == [
        ["diff", "PASS"], ["dense", "PASS"], ["scalar", "PASS"],  # sparse.spmm
        ["diff", "PASS"], ["diff", "PASS"]]  # nn.gae_mlp_decoder, nn.vgae
    assert all(r[-3] == "finite" for r in results if r[-2] == "diff")
    assert "7×4, 4×5, 5, 5×3, 3, 5×3, 3" in text  # nn.vgae's shapes, whole on their line
    assert "finite diff: central finite differences" in " ".join(text.split())


# ---------------------------------------------------------------- --fast-paths


def test_fast_paths_prints_the_sweep_and_writes_its_json(run, tmp_path):
    path = tmp_path / "fast.json"
    result = run("--fast-paths", "--op", "engine.add", "--op", "nn.gcn_loss_rows", "--json", path)
    assert result.exit_code == 0, result.output
    assert "fast paths: kernels.tiny() at 1 and 2 threads, float64, size small" in result.output
    for oracle in ("tiny, 1 thread: finite differences", "tiny, 2 threads: finite differences",
                   "1 thread = 2, bitwise", "tiny = reference, bitwise",
                   "tiny ≈ reference (regrouped)", "tiny, sums as one call = reference"):
        assert oracle in result.output, oracle
    assert "2 cases × 2 thread counts: all 9 checks passed" in result.output
    assert "paths taken: Aᵀ·G rows" in result.output and "row record read" in result.output
    report = json.loads(path.read_text())
    assert report["threads"] == [1, 2] and report["missing_paths"] == []
    assert report["paths"]["row record read"] > 0 and report["passed"] is True


def test_fast_paths_exits_1_on_a_planted_fast_path_bug(run, monkeypatch):
    """A row record one row short: the plain command passes, --fast-paths fails the case."""
    from mgsparse import kernels

    mark_rows = kernels.rows.mark_rows
    short = lambda g, rows: mark_rows(g, rows[:-1])
    monkeypatch.setattr(kernels.rows, "mark_rows", short)
    monkeypatch.setattr(kernels, "mark_rows", short)
    assert run("--op", "nn.gcn_loss_rows").exit_code == 0
    result = run("--fast-paths", "--op", "nn.gcn_loss_rows")
    assert result.exit_code == 1
    assert "1 of 1 cases × 2 thread counts failed: nn.gcn_loss_rows" in result.output
