"""benchmarks/speed_table.py builds the README's peer table from what the scripts recorded,
and only from that: ratios land in the file BENCH_RATIOS names, a cell shows them in thread
order, a peer that recorded nothing says so, `--write` touches only the text between the
markers, and the README's table is the one the command writes (same rows, same commands).
No timing is asserted."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import speed_table  # a benchmark script, found through the path above

README = Path(__file__).resolve().parents[2] / "README.md"


def test_record_appends_a_line_only_where_the_variable_points(tmp_path, monkeypatch):
    monkeypatch.delenv(speed_table.ENV, raising=False)
    speed_table.record_ratio("PyG", 1, 30.0, 100.0)  # unset: writes nothing anywhere
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv(speed_table.ENV, str(out))
    speed_table.record_ratio("PyG", 1, 30.0, 100.0)
    speed_table.record_ratio("DGL", 2, 50.0, 40.0, side="mgsparse, whole graph")
    lines = speed_table.read(out)
    assert [(x["peer"], x["threads"], x["side"]) for x in lines] == [
        ("PyG", 1, "mgsparse"), ("DGL", 2, "mgsparse, whole graph")]
    assert lines[0]["ratio"] == pytest.approx(0.3) and lines[1]["ratio"] == pytest.approx(1.25)
    assert speed_table.read(tmp_path / "absent.jsonl") == []


def line(peer, threads, ours, theirs, side="mgsparse"):
    return {"side": side, "peer": peer, "threads": threads, "ours_ms": ours,
            "peer_ms": theirs, "ratio": ours / theirs}


def test_a_cell_shows_the_side_against_its_peer_in_thread_order():
    got = [line("PyG", 2, 60.0, 200.0), line("PyG", 1, 100.0, 250.0),
           line("PyG", 1, 999.0, 1.0, side="mgsparse, whole graph"), line("DGL", 1, 100.0, 80.0)]
    assert speed_table.cell(got, "PyG", "mgsparse") == "PyG 0.400 · 0.300"
    assert speed_table.cell(got, "DGL", "mgsparse") == "DGL 1.250"
    assert speed_table.cell(got, "numpy floor", "mgsparse") == "numpy floor not measured"
    assert speed_table.thread_gain(got) == "1.67×"  # 100 ms at 1 thread, 60 at 2
    assert speed_table.thread_gain([line("DGL", 1, 100.0, 80.0)]) == "–"
    own = line("1 thread", 2, 50.0, 90.0)  # thread_gain.py: 90 ms at 1 thread, 50 at 2
    assert speed_table.thread_gain([*got, own]) == "1.80×"  # taken before the side-by-side's


def test_the_table_lists_measured_rows_with_their_commands():
    text = speed_table.table({"gat": [line("PyG", 1, 40.0, 100.0), line("PyG", 2, 30.0, 90.0)]})
    rows = text.splitlines()
    assert len(rows) == 3  # header, rule, the one measured row
    assert rows[2].startswith("| GAT step, 100k-node graph (whole graph) | PyG 0.400 · 0.333; "
                              "DGL not measured | 1.33× | `python benchmarks/compare_gat.py")


def test_write_replaces_only_the_text_between_the_markers(tmp_path):
    page = tmp_path / "README.md"
    page.write_text(f"intro\n{speed_table.BEGIN}\nold table\n{speed_table.END}\noutro\n")
    speed_table.write_between_markers(page, "new table")
    assert page.read_text() == f"intro\n{speed_table.BEGIN}\nnew table\n{speed_table.END}\noutro\n"
    page.write_text("no markers\n")
    with pytest.raises(SystemExit, match="needs one"):
        speed_table.write_between_markers(page, "x")


def test_the_readme_table_is_the_one_the_command_writes():
    text = README.read_text(encoding="utf-8")
    block = text.split(speed_table.BEGIN)[1].split(speed_table.END)[0]
    rows = [r for r in block.strip().splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert [r.split(" | ")[0][2:] for r in rows] == [row.work for row in speed_table.ROWS]
    for row, text_row in zip(speed_table.ROWS, rows):
        assert re.findall(r"`python benchmarks/([^`]+)`", text_row) == list(
            dict.fromkeys(c for _, c in row.runs))
    assert "Written by `python benchmarks/speed_table.py`" in block


def test_a_bad_write_target_or_interpreter_is_refused_before_measuring(tmp_path, monkeypatch):
    """Measuring takes minutes: a --write file without markers, or missing, and an interpreter
    that does not exist are refused at once, in one line, before any script runs."""
    monkeypatch.setattr(speed_table, "measure", lambda *a: pytest.fail("measured anyway"))
    page = tmp_path / "README.md"
    page.write_text("no markers\n")
    for argv, message in ((["--write", str(page)], "needs one"),
                          (["--write", str(tmp_path / "absent.md")], "cannot read"),
                          (["--dgl-python", str(tmp_path / "python")], None)):
        monkeypatch.setattr(sys, "argv", ["speed_table.py", "--rows", "cora", *argv])
        with pytest.raises(SystemExit) as stop:
            speed_table.main()
        if message is None:
            assert stop.value.code == 2  # argparse's usage error
        else:
            assert message in str(stop.value.code) and "\n" not in str(stop.value.code)


def test_the_runs_drop_the_hosts_openblas_pins_unless_asked_to_keep_them(monkeypatch):
    """A host's OPENBLAS_CORETYPE would hold numpy to older kernels than torch's MKL picks:
    the runs go without it (and OPENBLAS_L2_SIZE) unless `--keep-openblas-env`, and the
    child names the kernels it then loads."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    monkeypatch.setenv("PYTHONPATH", "elsewhere")
    dropped, kept = speed_table.run_env(False), speed_table.run_env(True)
    assert not set(speed_table.HOST_BLAS) & set(dropped)
    assert kept["OPENBLAS_CORETYPE"] == "Haswell" and kept["OPENBLAS_L2_SIZE"] == "512"
    for env in (dropped, kept):
        assert env["OMP_WAIT_POLICY"] == "PASSIVE"
        assert env["PYTHONPATH"].split(os.pathsep) == [str(speed_table.HERE.parent), "elsewhere"]
    if platform.machine() in ("x86_64", "AMD64"):  # OpenBLAS's own x86 names
        assert speed_table.blas_core(sys.executable, kept) == "Haswell"  # as pinned
    assert speed_table.blas_core(sys.executable, dropped) not in ("", "unknown")
