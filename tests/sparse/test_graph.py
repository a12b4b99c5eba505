"""Graph ops: self loops, GCN normalisation, row softmax — hand values, edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import kernels
from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.sparse import (
    SparseTensor,
    add_self_loops,
    attention_softmax,
    gcn_norm,
    graph,
    num_threads,
    row_softmax,
)
from mgsparse.sparse.ops import Gather

# Every op's gradient against its three oracles at every size: tests/checks (the registry).

# a 4-node path 0-1-2-3 stored in both directions, plus an isolated node 4
PATH = np.array([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])


def test_add_self_loops_is_a_plain_add():
    A = SparseTensor([[0, 1, 1], [1, 0, 1]], [1.0, 1.0, 5.0], (3, 3))  # node 1 has a loop
    L = add_self_loops(A, fill=2.0)
    assert L.is_coalesced() and L.nnz == 5
    np.testing.assert_array_equal(L.to_dense(), [[2, 1, 0], [1, 7, 0], [0, 0, 2]])
    with pytest.raises(ShapeError, match=r"add_self_loops: needs a square adjacency, got shape \(2, 3\)"):
        add_self_loops(SparseTensor([[0], [2]], [1.0], (2, 3)))


def test_gcn_norm_matches_the_formula_on_a_path_with_an_isolated_node():
    A = SparseTensor.from_edge_index(PATH, num_nodes=5, dtype=np.float64)
    N = gcn_norm(A)
    Ahat = A.to_dense() + np.eye(5)
    d = Ahat.sum(axis=1) ** -0.5
    np.testing.assert_allclose(N.to_dense(), d[:, None] * Ahat * d[None, :], rtol=1e-12)
    assert N.to_dense()[4, 4] == 1.0  # an isolated node keeps itself, weight 1/1
    np.testing.assert_allclose(N.to_dense()[0, 1], 1 / np.sqrt(2 * 3))


def test_gcn_norm_zero_degree_gives_zeros_and_finite_gradients():
    A = SparseTensor.from_edge_index(PATH, num_nodes=5, dtype=np.float64)
    A = A.with_values(Tensor(A.values.data, requires_grad=True))
    N = gcn_norm(A, add_loops=False)  # node 4: degree 0
    dense = N.to_dense()
    assert np.isfinite(dense).all() and not dense[4].any()
    N.values.sum().backward()
    assert np.isfinite(A.values.grad).all()
    # a negative degree is treated like zero, not turned into NaN
    neg = SparseTensor([[0, 1], [1, 1]], Tensor([-1.0, 4.0], requires_grad=True), (2, 2))
    out = gcn_norm(neg, add_loops=False)  # degrees -1 and 4
    np.testing.assert_array_equal(out.values.data, [0, 1])
    out.values.sum().backward()
    assert np.isfinite(neg.values.grad).all()


def test_gcn_norm_output_shares_the_pattern_of_a_plus_i():
    A = SparseTensor.from_edge_index(PATH, num_nodes=5)
    N = gcn_norm(A)
    assert N.nnz == len(PATH[0]) + 5 and N.is_coalesced() and N.dtype == np.float32


def test_row_softmax_by_hand_and_stable_for_large_values():
    A = SparseTensor([[0, 0, 2], [0, 1, 1]], [1000.0, 1001.0, -5.0], (3, 2))
    S = row_softmax(A)
    e = np.exp([-1.0, 0.0])
    np.testing.assert_allclose(S.values.data, [*(e / e.sum()), 1.0], rtol=1e-6)
    assert S._structure is A._structure
    np.testing.assert_allclose(S.sum(axis=1).data, [1, 0, 1], rtol=1e-6)  # empty row stays 0


def test_row_softmax_backward_by_hand():
    A = SparseTensor([[0, 0], [0, 1]], Tensor([0.0, 0.0], requires_grad=True), (1, 2))
    row_softmax(A).values.backward(np.array([1.0, 0.0], dtype=np.float32))
    np.testing.assert_allclose(A.values.grad, [0.25, -0.25])  # s(1-s), -s·s at s = 1/2


def test_row_softmax_counts_duplicates_separately():
    A = SparseTensor([[0, 0], [1, 1]], [0.0, 0.0], (1, 2))
    np.testing.assert_allclose(row_softmax(A).values.data, [0.5, 0.5])
    np.testing.assert_allclose(row_softmax(A.coalesce()).values.data, [1.0])


@pytest.mark.parametrize("row_sorted", [True, False])
def test_attention_softmax_is_bitwise_the_composite(row_sorted):
    """The fused op gives the same float32 values and gradients, bit for bit, as gathers +
    sum + leaky_relu + row_softmax (a row-sorted pattern takes the reduceat path)."""
    rng = np.random.default_rng(3)
    rows, cols = 300, 200
    keys = np.sort(rng.choice(rows * cols, 3000, replace=False))
    idx = np.stack([keys // cols, keys % cols])
    idx = idx if row_sorted else idx[:, rng.permutation(idx.shape[1])]
    A = SparseTensor(idx, np.zeros(idx.shape[1], np.float32), (rows, cols))
    dst0 = rng.standard_normal(rows).astype(np.float32) * 3
    src0 = rng.standard_normal(cols).astype(np.float32) * 3
    g = rng.standard_normal(A.nnz).astype(np.float32)
    out = []
    for fused in (True, False):
        dst, src = Tensor(dst0, requires_grad=True), Tensor(src0, requires_grad=True)
        if fused:
            alpha = attention_softmax(A, dst, src, 0.2).values
        else:
            logits = Gather.apply(dst, A.row) + Gather.apply(src, A.col)
            alpha = row_softmax(A.with_values(logits.leaky_relu(0.2))).values
        alpha.backward(g)
        out.append((alpha.data, dst.grad, src.grad))
    for fused, composite in zip(*out):
        assert fused.dtype == np.float32
        np.testing.assert_array_equal(fused, composite)
    sums = np.bincount(A.row, weights=out[0][0], minlength=rows)
    np.testing.assert_allclose(sums[np.unique(A.row)], 1.0, rtol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_attention_softmax_by_row_blocks_is_bitwise_one_pass(monkeypatch, threads):
    """Row blocks of about 64 entries (whole rows: row 11 holds 400; some rows empty) on 1 or
    2 threads give the one-pass op's bits, forward and backward."""
    rng = np.random.default_rng(5)
    rows, cols = 500, 450
    keys = np.sort(rng.choice(rows * cols, 6000, replace=False))
    keys = keys[(keys // cols) % 7 != 3]  # every seventh row empty
    keys = np.union1d(keys, 11 * cols + np.arange(400))  # row 11: 400 entries
    A = SparseTensor(np.stack([keys // cols, keys % cols]), np.zeros(len(keys), np.float32),
                     (rows, cols))
    dst0 = rng.standard_normal(rows).astype(np.float32) * 3
    src0 = rng.standard_normal(cols).astype(np.float32) * 3
    g = rng.standard_normal(A.nnz).astype(np.float32)
    out = []
    for blocks in (True, False):
        A = A.with_values(np.zeros(A.nnz, np.float32))
        A._structure.csr().entry_blocks = None
        monkeypatch.setattr(kernels.tuning, "ENTRIES_PER_BLOCK", 64)
        if blocks:
            cut = graph._entry_blocks(A._structure)
            assert len(cut) > 50 and cut[0][0] == 0 and cut[-1][1] == rows
        else:
            monkeypatch.setattr(graph, "_entry_blocks", lambda s: None)
        dst, src = Tensor(dst0, requires_grad=True), Tensor(src0, requires_grad=True)
        with num_threads(threads):
            alpha = attention_softmax(A, dst, src, 0.2).values
            alpha.backward(g)
        out.append((alpha.data, dst.grad, src.grad))
    for by_blocks, one_pass in zip(*out):
        np.testing.assert_array_equal(by_blocks, one_pass)


def test_attention_softmax_names_the_wrong_score_shape():
    A = SparseTensor(PATH, np.ones(6), (5, 5))
    with pytest.raises(ShapeError, match=r"attention_softmax: pattern \(5, 5\) needs dst \(5,\) "
                                         r"and src \(5,\), got \(4,\) and \(5,\)"):
        attention_softmax(A, np.zeros(4), np.zeros(5))
