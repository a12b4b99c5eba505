"""engine.draw: to_dot and summarize: op counts per use, labels, escaping, DOT that parses, the size limit."""

import re
import shutil
import subprocess
import time

import numpy as np
import pytest

from mgsparse.engine import Function, Tensor, Value
from mgsparse.engine.draw import summarize, to_dot
from mgsparse.errors import MgsparseError

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz `dot` not installed (apt-get install graphviz)")


def _param(*shape):
    return Tensor(np.ones(shape), requires_grad=True)  # float64


def _node_named(dot, label_start):
    """The DOT name (n3) of the node whose label starts with `label_start`."""
    (name,) = re.findall(rf'  (n\d+) \[[^\]]*label="{re.escape(label_start)}', dot)
    return name


def _op_named(dot, op):
    return re.findall(rf'  (op\d+) \[shape=ellipse, label="{re.escape(op)}"\];', dot)


def _parse_with_dot(text):
    result = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "<svg" in result.stdout
    return result.stdout


class FakeSparse:
    """Anything with `nnz` and `shape` is drawn as sparse (draw never imports mgsparse.sparse)."""

    def __init__(self, dense, values):
        self.dense, self.shape, self.values = dense, dense.shape, values
        self.nnz, self.dtype = int(np.count_nonzero(dense)), values.dtype


class FakeSpMM(Function):
    @staticmethod
    def forward(ctx, A, X):
        return A.dense @ X


# ---------------------------------------------------------------- Tensor graphs


def test_every_op_once_per_use_and_every_use_an_edge():
    x = _param(2, 3)
    y = x * x + x
    assert summarize(y) == {"Add": 1, "Mul": 1}
    dot = to_dot(y)
    (mul,), (add,) = _op_named(dot, "Mul"), _op_named(dot, "Add")
    x_node = _node_named(dot, "param\\n(2, 3) float64")
    assert dot.count(f"  {x_node} -> {mul};") == 2  # x*x: two uses, two edges
    assert dot.count(f"  {x_node} -> {add};") == 1
    assert dot.count(f"  {x_node} -> ") == 3
    assert _node_named(dot, "Add\\n(2, 3) float64") == "n0"  # the root is drawn first
    assert 'n0 [shape=box, label="Add\\n(2, 3) float64", peripheries=2]' in dot


def test_two_layer_network_counts_and_leaf_labels():
    A = Tensor(np.eye(4, dtype=np.float32))  # a constant input: "leaf"
    X = Tensor(np.ones((4, 3), dtype=np.float32))
    W1 = Tensor(np.ones((3, 5), np.float32), requires_grad=True)
    W2 = Tensor(np.ones((5, 2), np.float32), requires_grad=True)
    loss = (A @ (A @ (X @ W1)).relu() @ W2).sum()
    assert summarize(loss) == {"MatMul": 4, "Relu": 1, "Sum": 1}
    dot = to_dot(loss)
    a_node = _node_named(dot, "leaf\\n(4, 4) float32")
    assert len(re.findall(rf"  {a_node} -> op\d+;", dot)) == 2  # A is used twice
    assert dot.count('label="param\\n') == 2 and 'label="param\\n(3, 5) float32"' in dot
    assert dot.count("[shape=ellipse") == 6


def test_sparse_structure_is_labelled_with_shape_and_nnz():
    values = Tensor(np.array([1.0, 2.0, 3.0, 4.0]), requires_grad=True)
    A = FakeSparse(np.diag([1.0, 2.0, 3.0, 4.0]), values)
    out = FakeSpMM.apply(A, _param(4, 2)).sum()
    assert summarize(out) == {"FakeSpMM": 1, "Sum": 1}
    dot = to_dot(out)
    a_node = _node_named(dot, "sparse\\n(4, 4) nnz=4 float64")
    v_node = _node_named(dot, "param\\n(4,) float64")
    assert f"  {v_node} -> {a_node};" in dot  # the stored values feed the structure
    (spmm,) = _op_named(dot, "FakeSpMM")
    assert f"  {a_node} -> {spmm};" in dot


def test_deep_tensor_chain_needs_no_recursion():
    y = _param(1)
    for _ in range(3000):
        y = y * 1.0
    assert summarize(y) == {"Mul": 3000}
    assert to_dot(y, max_nodes=10_000).count("[shape=ellipse") == 3000


def test_output_is_deterministic():
    x = _param(3)
    y = (x.exp() + x.tanh() * x).sum()
    assert to_dot(y) == to_dot(y)


def test_freed_graph_is_a_clear_error():
    y = (_param(2) * 2.0).sum()
    y.backward()
    with pytest.raises(MgsparseError, match=r"freed by backward\(\); draw it before backward\(\)"):
        to_dot(y)


def test_leaf_alone():
    assert summarize(Tensor([1.0, 2.0])) == {}
    expected = 'n0 [shape=box, label="leaf\\n(2,) float32", peripheries=2];'
    assert expected in to_dot(Tensor([1.0, 2.0]))


@pytest.mark.parametrize("root, max_nodes, message", [
    (3.0, 10, "expected a Tensor, a Value or a sparse tensor, got float"),
    (Value(1.0), 0, "max_nodes must be a positive int, got 0"),
])
def test_bad_arguments(root, max_nodes, message):
    with pytest.raises(MgsparseError, match=message):
        to_dot(root, max_nodes=max_nodes)


# ---------------------------------------------------------------- Value graphs


def test_value_graph_uses_micrograd_records():
    a = Value(2.0)
    b = a * a + a
    b.backward()
    assert summarize(b) == {"*": 1, "+": 1}
    dot = to_dot(b)
    assert 'n0 [shape=record, label="{ data 6 | grad 1 }", peripheries=2];' in dot
    a_node = _node_named(dot, "{ data 2 | grad 5 }")  # d(a² + a)/da = 2a + 1 = 5
    (mul,) = _op_named(dot, "*")
    assert dot.count(f"  {a_node} -> {mul};") == 2


def test_labels_are_escaped():
    odd = Value(1.0, (Value(2.0),), 'a"b\\c{d}|<e>\nf')
    dot = to_dot(odd)
    assert 'label="a\\"b\\\\c{d}|<e>\\nf"' in dot
    weird_fn = type('We"ird', (FakeSpMM,), {})
    dot2 = to_dot(weird_fn.apply(FakeSparse(np.eye(2), Tensor(np.ones(2))), _param(2, 1)))
    assert 'label="We\\"ird\\n(2, 1) float64"' in dot2


# ---------------------------------------------------------------- the size limit


def test_over_the_limit_returns_a_summary_and_warns():
    x = _param(2)
    y = ((x * x + x) * x).sum()
    with pytest.warns(UserWarning, match="the graph has 5 values, more than max_nodes=3"):
        dot = to_dot(y, max_nodes=3)  # x, x*x, x*x + x, (…)*x, sum
    assert "shape=ellipse" not in dot and dot.count("[shape=box") == 1
    assert ("graph too large to draw: 5 values (max_nodes=3)\\l4 op applications:\\l"
            "Mul: 2\\lAdd: 1\\lSum: 1\\l") in dot
    assert to_dot(y, max_nodes=5).count("[shape=ellipse") == 4  # at the limit: drawn


@pytest.mark.slow  # builds a million Values (~5 s)
def test_a_million_value_chain_is_summarised_not_drawn():
    v = Value(0.0)
    for _ in range(999_999):
        v = Value(0.0, (v,), "+")  # a bare chain: no closures to build, same walk
    start = time.perf_counter()
    with pytest.warns(UserWarning, match="1000000 values"):
        dot = to_dot(v)
    elapsed = time.perf_counter() - start
    assert "999999 op applications:\\l+: 999999\\l" in dot
    assert elapsed < 5.0  # about 0.6 s on a 2-core machine; generous for loaded CI


# ---------------------------------------------------------------- Graphviz parses it


@needs_dot
def test_dot_parses_every_kind_of_graph():
    x = _param(2, 3)
    _parse_with_dot(to_dot((x * x + x).sum()))
    a = Value(-1.5)
    (a * a).tanh().backward()
    _parse_with_dot(to_dot((a * a).tanh()))
    A = FakeSparse(np.eye(3), Tensor(np.ones(3), requires_grad=True))
    _parse_with_dot(to_dot(FakeSpMM.apply(A, _param(3, 2)).relu()))
    with pytest.warns(UserWarning):
        _parse_with_dot(to_dot((x * x + x).sum(), max_nodes=1))


@needs_dot
def test_dot_parses_escaped_labels():
    svg = _parse_with_dot(to_dot(Value(1.0, (Value(2.0),), 'a"b\\c{d}|<e>\nf')))
    assert "a&quot;b\\c{d}|&lt;e&gt;" in svg
