"""The shape the code keeps, measured: an op reads as its math, the fast part lives in kernels.

Each `Function` / `SparseFunction` class of `engine/` and `sparse/` is a forward and a backward
side by side, the backward's docstring stating its math; the row blocks, pools and row records
are `kernels` calls. Measured with `ast` (a class's lines, docstrings and blank lines included,
as a reader meets them): the median class stays at 10 lines or fewer and none grows past 25, so
an op that needs more moves its body into `kernels` or a function beside it. `sparse/structure.py`
is the pattern only (its products are `kernels.csr`'s).
"""

from __future__ import annotations

import ast
import statistics
from pathlib import Path

import mgsparse

PACKAGE = Path(mgsparse.__file__).parent
BASES = ("Function", "SparseFunction")


def op_classes() -> dict[str, ast.ClassDef]:
    """Every class of engine/ and sparse/ whose bases name Function or SparseFunction."""
    found = {}
    for pkg in ("engine", "sparse"):
        for path in sorted((PACKAGE / pkg).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                        getattr(b, "id", getattr(b, "attr", "")) in BASES for b in node.bases):
                    found[f"{pkg}/{path.name}:{node.name}"] = node
    return found


def length(node: ast.ClassDef) -> int:
    return node.end_lineno - node.lineno + 1


def test_the_walk_finds_the_ops():
    names = {name.rpartition(":")[2] for name in op_classes()}
    assert len(names) >= 30
    assert {"Relu", "MatMul", "SpMM", "AttentionSoftmax", "SegmentMax", "SparseFunction"} <= names


def test_an_op_class_is_short_a_median_of_at_most_ten_lines():
    lengths = {name: length(node) for name, node in op_classes().items()}
    longest = sorted(lengths.items(), key=lambda kv: -kv[1])[:5]
    assert statistics.median(lengths.values()) <= 10, longest
    assert max(lengths.values()) <= 25, longest


def test_every_op_states_its_backward_math_in_a_docstring():
    missing = []
    for name, node in op_classes().items():
        methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
        if "forward" not in methods:
            continue  # a base (SparseFunction): no math of its own
        backward = methods.get("vjp", methods.get("backward"))
        if backward is None or not ast.get_docstring(backward):
            missing.append(name)
    assert not missing


def test_the_sparse_structure_is_the_pattern_only():
    lines = (PACKAGE / "sparse" / "structure.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
