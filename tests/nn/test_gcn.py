"""GCNConv and the GCN model: the normalisation by hand, gradients, sparse = dense, caching,
and the block operand (exact with every in-edge, unbiased under sampling)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.data.sampler import NeighborSampler
from mgsparse.errors import ShapeError
from mgsparse.nn.gcn import GCN, GCNConv, gcn_block_adjacency, normalized_adjacency
from tests.data.test_sampler import random_digraph

# A hand-written 4-node graph: a path 0-1-2 plus the edge 1-3 (undirected, both directions).
EDGE_INDEX = np.array([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
N = 4


def dense_norm_adj() -> np.ndarray:
    """Â = D^-1/2 (A + I) D^-1/2, written out densely."""
    A = np.zeros((N, N))
    A[EDGE_INDEX[0], EDGE_INDEX[1]] = 1.0
    A_hat = A + np.eye(N)
    d = A_hat.sum(1) ** -0.5
    return d[:, None] * A_hat * d[None, :]


# The directed path 0 → 1 → 2 (node 3 alone in the 4-node version), Â derived by hand below.
PATH = np.array([[0, 1], [1, 2]])
PATH_A_HAT = np.array([[1.0, 0.0, 0.0],
                       [2**-0.5, 0.5, 0.0],
                       [0.0, 0.5, 0.5]])
PATH_A_HAT_4 = np.pad(PATH_A_HAT, (0, 1)) + np.diag([0, 0, 0, 1.0])


def test_gcn_aggregates_along_the_edge_direction_as_pyg():
    """Issue #12, defect 1: Â was built A[source, target] with out-degrees (PyG's transpose).

    Messages flow source → target and D is the in-degree with the self loop, d = (1, 2, 2):
        Â[0, 0] = 1/1, Â[1, 0] = 1/√(2·1), Â[1, 1] = 1/2, Â[2, 1] = 1/√(2·2), Â[2, 2] = 1/2.
    PyG's GCNConv (bias off, W = I) on x = I gives these rows, as quoted in issue #12:
        [[1, 0, 0], [.707, .5, 0], [0, .5, .5]]   (mgsparse gave [[.5, .5, 0], [0, .5, .707],
        [0, 0, 1]], PyG's numbers on the reversed edges).
    """
    np.testing.assert_allclose(normalized_adjacency(PATH, 3, dtype=np.float64).to_dense(),
                               PATH_A_HAT, atol=1e-15)
    conv = GCNConv(3, 3, bias=False, dtype=np.float64)
    conv.weight.data[...] = np.eye(3)
    np.testing.assert_allclose(conv(Tensor(np.eye(3)), PATH).data, PATH_A_HAT, atol=1e-15)
    # 2 → 1 → 0, in-degrees (2, 2, 1): what the old code gave for 0 → 1 → 2 (issue #12)
    reverse = normalized_adjacency(PATH[::-1], 3, dtype=np.float64).to_dense()
    np.testing.assert_allclose(reverse, [[0.5, 0.5, 0], [0, 0.5, 2**-0.5], [0, 0, 1]], atol=1e-15)


def test_normalized_adjacency_matches_the_formula():
    norm_adj = normalized_adjacency(EDGE_INDEX, N, dtype=np.float64)
    assert isinstance(norm_adj, SparseTensor)
    np.testing.assert_allclose(norm_adj.to_dense(), dense_norm_adj(), atol=1e-12)
    # degrees with self loops are 2, 4, 2, 2: entry (0, 1) = 1/sqrt(2·4)
    assert norm_adj.to_dense()[0, 1] == pytest.approx(1 / np.sqrt(8))


def test_threshold_turns_the_adjacency_dense():
    assert isinstance(normalized_adjacency(EDGE_INDEX, N, sparsity_threshold=1.0), SparseTensor)
    dense = normalized_adjacency(EDGE_INDEX, N, sparsity_threshold=0.0, dtype=np.float64)
    assert isinstance(dense, Tensor)
    np.testing.assert_allclose(dense.data, dense_norm_adj(), atol=1e-12)


def _conv(rng, bias=True) -> GCNConv:
    return GCNConv(3, 2, bias=bias, rng=rng, dtype=np.float64)


def test_gcnconv_forward_is_a_hat_x_w_plus_b(rng):
    conv = _conv(rng)
    conv.bias.data[:] = [0.5, -1.0]
    x = rng.standard_normal((N, 3))
    out = conv(Tensor(x), EDGE_INDEX)
    np.testing.assert_allclose(out.data, dense_norm_adj() @ x @ conv.weight.data + [0.5, -1.0],
                               atol=1e-12)


def test_gcnconv_gradients_match_finite_differences(rng):
    conv = _conv(rng)
    x = Tensor(rng.standard_normal((N, 3)), requires_grad=True)

    def f(x, w, b):
        conv.weight, conv.bias = w, b
        return conv(x, EDGE_INDEX)

    result = gradcheck(f, [x, conv.weight, conv.bias])
    assert result.passed and result.max_abs_err < 1e-7


def test_sparse_and_dense_adjacency_give_the_same_output_and_gradients(rng):
    """Threshold 1.0 keeps Â sparse, 0.0 makes it dense: both give Â X W + b and its gradients."""
    x = rng.standard_normal((N, 3))
    outs = []
    for threshold, kind in ((1.0, SparseTensor), (0.0, Tensor)):
        conv = GCNConv(3, 2, rng=np.random.default_rng(1), dtype=np.float64)
        adj = normalized_adjacency(EDGE_INDEX, N, sparsity_threshold=threshold, dtype=np.float64)
        assert isinstance(adj, kind)
        xt = Tensor(x, requires_grad=True)
        out = conv(xt, adj)
        (out * out).sum().backward()
        outs.append((out.data, xt.grad, conv.weight.grad))
    np.testing.assert_allclose(outs[0][0], dense_norm_adj() @ x @ conv.weight.data, atol=1e-12)
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_sparse_features_times_weights_equal_dense_features(rng):
    x = (rng.random((N, 3)) < 0.4) * 1.0
    conv = _conv(rng)
    dense_out = conv(Tensor(x), EDGE_INDEX).data
    sparse_out = conv(SparseTensor.from_dense(x), EDGE_INDEX).data
    np.testing.assert_allclose(sparse_out, dense_out, atol=1e-12)


def test_normalisation_is_cached_per_graph(rng):
    conv = _conv(rng)
    x = Tensor(rng.standard_normal((N, 3)))
    first = conv.norm_adj(EDGE_INDEX, N)
    assert conv.norm_adj(EDGE_INDEX, N) is first
    assert conv.norm_adj(EDGE_INDEX.copy(), N) is first  # the same graph, compared by value
    uncached = GCNConv(3, 2, cached=False, rng=rng, dtype=np.float64)
    assert uncached.norm_adj(EDGE_INDEX, N) is not uncached.norm_adj(EDGE_INDEX, N)
    np.testing.assert_allclose(conv(x, EDGE_INDEX).data,
                               dense_norm_adj() @ x.data @ conv.weight.data + conv.bias.data)


def test_a_cached_layer_never_reuses_another_graphs_normalisation(rng):
    """Issue #12, defect 4: the first graph's Â was returned for every later edge_index."""
    conv = _conv(rng, bias=False)
    x = Tensor(rng.standard_normal((N, 3)))
    conv(x, EDGE_INDEX)
    path = np.array([[0, 1], [1, 2]])  # 0 → 1 → 2, node 3 alone
    np.testing.assert_allclose(conv(x, path).data, PATH_A_HAT_4 @ x.data @ conv.weight.data,
                               atol=1e-12)
    edges = EDGE_INDEX.copy()
    conv(x, edges)
    edges[:, :2] = [[0, 0], [3, 3]]  # changed in place: 0-1 becomes 0 → 3 twice
    np.testing.assert_allclose(conv.norm_adj(edges, N).to_dense(),
                               normalized_adjacency(edges.copy(), N, dtype=np.float64).to_dense())
    weights = np.array([1.0, 2.0, 1.0, 1.0, 1.0, 1.0])
    with_weights = conv.norm_adj(EDGE_INDEX, N, Tensor(weights)).to_dense()
    assert with_weights[0, 1] == pytest.approx(2 / np.sqrt(3 * 4))  # w(1 → 0) = 2; d = 3, 4
    assert conv.norm_adj(EDGE_INDEX, N, Tensor(2 * weights)).to_dense()[0, 1] != \
        pytest.approx(with_weights[0, 1])


def test_an_edge_list_may_be_a_python_list(rng):
    """Issue #12, defect 5: a list was taken for a dense 2×E matrix."""
    conv = _conv(rng)
    x = Tensor(rng.standard_normal((N, 3)))
    out = conv(x, EDGE_INDEX.tolist())
    assert out.shape == (N, 2)
    np.testing.assert_allclose(out.data, conv(x, EDGE_INDEX).data, atol=1e-12)


def test_a_negative_node_id_is_named(rng):
    with pytest.raises(ShapeError, match="refers to node -1 but the features have 4 rows"):
        _conv(rng)(Tensor(np.ones((N, 3))), np.array([[0, -1], [1, 2]]))


def test_learnable_edge_weight_is_not_cached_and_gets_a_gradient(rng):
    conv = _conv(rng)
    w = Tensor(np.ones(EDGE_INDEX.shape[1]), requires_grad=True)
    out = conv(Tensor(rng.standard_normal((N, 3))), EDGE_INDEX, edge_weight=w)
    out.sum().backward()
    assert conv._norm_adj.get(EDGE_INDEX, N, w.data) is None
    assert w.grad is not None and w.grad.shape == (6,) and np.abs(w.grad).sum() > 0


def test_whole_gcn_gradients_match_finite_differences(rng):
    """Every parameter of a 2-layer GCN through a masked cross-entropy (dropout off)."""
    from mgsparse.nn.functional import cross_entropy

    model = GCN(3, 4, 2, layers=2, dropout=0.0, rng=rng, dtype=np.float64)
    x = SparseTensor.from_dense((rng.random((N, 3)) < 0.5) * rng.random((N, 3)))
    adj = normalized_adjacency(EDGE_INDEX, N, dtype=np.float64)
    y, train = np.array([0, 1, 1, 0]), np.array([0, 2, 3])
    params = model.parameters()
    # the finite differences perturb copies, routed into the model on every call
    copies = [Tensor(p.data.copy(), requires_grad=True) for p in params]

    def f(*ps):
        for p, new in zip(params, ps):
            p.data = new.data
        return cross_entropy(model(x, adj), y, train)

    model.zero_grad()
    f(*copies).backward()
    analytic = [p.grad.copy() for p in params]
    eps = 1e-6
    for k, p in enumerate(params):
        base = copies[k].data.copy()
        flat = base.reshape(-1)
        numeric = np.zeros_like(flat)
        for i in range(flat.size):
            for sign in (1, -1):
                trial = flat.copy()
                trial[i] += sign * eps
                ps = list(copies)
                ps[k] = Tensor(trial.reshape(base.shape))
                numeric[i] += sign * float(f(*ps).data) / (2 * eps)
        np.testing.assert_allclose(analytic[k].reshape(-1), numeric, atol=1e-7, rtol=1e-5)
    f(*copies)  # restore the originals


def test_gcn_shapes_and_layer_count(rng):
    gcn = GCN(5, 8, 3, layers=3, rng=rng)
    assert [c.weight.shape for c in gcn.convs] == [(5, 8), (8, 8), (8, 3)]
    out = gcn(Tensor(rng.standard_normal((N, 5)).astype(np.float32)), EDGE_INDEX)
    assert out.shape == (N, 3) and out.dtype == np.float32


# ---------------------------------------------------------------- the block operand

M = 60  # nodes of the random directed graph the blocks are sampled from


@pytest.fixture
def digraph(rng):
    return random_digraph(rng, M, 300)


def dense_in_adjacency(edge_index, n) -> np.ndarray:
    """A_in[i, j] = number of edges j → i."""
    A = np.zeros((n, n))
    np.add.at(A, (edge_index[1], edge_index[0]), 1.0)
    return A


def test_gcn_block_with_all_neighbours_is_rows_of_the_in_degree_gcn_norm(digraph, rng):
    A = dense_in_adjacency(digraph, M) + np.eye(M)
    d = A.sum(axis=1) ** -0.5
    norm = d[:, None] * A * d[None, :]  # D^-1/2 (A_in + I) D^-1/2, D the in-degree + 1
    targets = rng.permutation(M)[:25]
    block = NeighborSampler(digraph, M, [-1]).block(targets, -1)
    got = gcn_block_adjacency(block, np.float64).to_dense()
    np.testing.assert_allclose(got, norm[np.ix_(targets, block.n_id)], atol=1e-15)


def test_gcn_block_is_unbiased_under_sampling(digraph):
    """E[Â_block] = Â: each neighbour is kept with probability k/deg and scaled by deg/k."""
    sampler, rng, draws = NeighborSampler(digraph, M, [2]), np.random.default_rng(5), 1500
    total = np.zeros((M, M))
    for _ in range(draws):
        b = sampler.block(np.arange(M), 2, rng)
        A = gcn_block_adjacency(b, np.float64)
        np.add.at(total, (A.row, b.n_id[A.col]), A.values.data)  # targets are 0..M-1
    A_in = dense_in_adjacency(digraph, M)
    d = (A_in.sum(axis=1) + 1) ** -0.5
    want = d[:, None] * (A_in + np.eye(M)) * d[None, :]
    # one draw of a neighbour entry is a·deg/k with probability k/deg: variance a²(deg/k − 1)
    deg = A_in.sum(axis=1, keepdims=True)
    sd = want * (A_in > 0) * np.sqrt(np.maximum(deg / np.clip(deg, 1, 2) - 1, 0) / draws)
    assert np.all(np.abs(total / draws - want) <= 5.5 * sd + 1e-12)
    assert np.abs(total / draws - want).max() > 0  # sampled, not exact


# ---------------------------------------------------------------- which side is propagated


def test_the_narrower_side_is_propagated():
    """PyG's rule through the cost model: on an ogbn-arxiv-shaped Â (169,343 rows, 2.54M
    entries with the self loops) a 128 → 16 layer multiplies by W first (the product runs on
    16 columns), a 16 → 40 layer propagates its 16 columns first; sparse features and a dense
    Â always take W first; a block of few targets over many sources takes W after (T rows)."""
    from mgsparse.nn.gcn import propagates_first

    class Adj(SparseTensor):  # only the shape and nnz are read
        def __init__(self, shape, nnz):
            self._shape, self._nnz = shape, nnz

        shape = property(lambda self: self._shape)
        nnz = property(lambda self: self._nnz)

    n, nnz = 169_343, 2_540_145
    whole = Adj((n, n), nnz)
    assert not propagates_first(whole, Tensor(np.zeros((1, 128))), 16)
    assert propagates_first(whole, Tensor(np.zeros((1, 16))), 40)
    assert not propagates_first(whole, SparseTensor.from_dense(np.eye(3)), 40)
    assert not propagates_first(Tensor(np.zeros((4, 4))), Tensor(np.zeros((1, 16))), 40)
    # a sampled block: 1,024 targets, 25 in-edges each, from 25,600 sources, 128 → 16
    block = Adj((1024, 25_600), 25_600)
    assert propagates_first(block, Tensor(np.zeros((1, 128))), 16)


def test_propagating_first_gives_a_hat_x_w_plus_b_and_its_gradients(rng):
    """A 2 → 5 layer propagates first, (Â X) W + b, with the gradients of Â (X W) + b."""
    from mgsparse.nn.gcn import propagates_first

    conv = GCNConv(2, 5, rng=rng, dtype=np.float64)
    conv.bias.data[:] = rng.standard_normal(5)
    x = Tensor(rng.standard_normal((N, 2)), requires_grad=True)
    assert propagates_first(conv.norm_adj(EDGE_INDEX, N), x, 5)
    np.testing.assert_allclose(conv(x, EDGE_INDEX).data,
                               dense_norm_adj() @ x.data @ conv.weight.data + conv.bias.data,
                               atol=1e-12)

    def f(x, w, b):
        conv.weight, conv.bias = w, b
        return conv(x, EDGE_INDEX)

    result = gradcheck(f, [x, conv.weight, conv.bias])
    assert result.passed and result.max_abs_err < 1e-7


def test_a_layer_given_its_input_dropout_draws_the_stacks_mask_for_any_input(rng):
    """`GCNConv(x, adj, dropout=(p, rng))` for sparse features or a narrow dense x (nothing to
    fuse with): the mask the stack's own dropout draws from the same generator."""
    from mgsparse.nn.stack import dropout

    conv = GCNConv(5, 3, rng=rng)
    dense = rng.standard_normal((4, 5)).astype(np.float32)
    for x in (Tensor(dense), SparseTensor.from_dense(np.where(dense > 0, dense, 0))):
        out = conv(x, EDGE_INDEX, dropout=(0.5, np.random.default_rng(2)))
        want = conv(dropout(x, 0.5, True, np.random.default_rng(2)), EDGE_INDEX)
        np.testing.assert_allclose(out.data, want.data, rtol=1e-6, atol=1e-6)


def test_a_few_labelled_rows_reach_every_backward_product_without_a_scan(rng, row_scans):
    """Whole graph, loss on 60 of 12,288 rows: the cross-entropy records its rows and each op
    below carries them (ReLU-dropout, x·W, the sparse product's columns met), so no
    `sparse_rows` of the backward reads a whole gradient; the gradients are bitwise those of
    the same step with nothing recorded."""
    from mgsparse import kernels
    from mgsparse.nn import functional as F

    n = 3 * kernels.tuning.MIN_BLOCK_ROWS
    edges = rng.integers(0, n, (2, 4 * n))
    x = Tensor(rng.standard_normal((n, 8)).astype(np.float32))
    y, rows = rng.integers(0, 3, n), np.sort(rng.choice(n, 60, replace=False))

    def build():
        return GCN(8, 16, 3, dropout=0.5, rng=np.random.default_rng(1))

    def loss(model):
        return F.cross_entropy(model(x, edges), y, rows)
    (recorded_scans, recorded), (plain_scans, plain) = (row_scans(build, loss, True),
                                                        row_scans(build, loss, False))
    assert recorded_scans == 0 and plain_scans >= 2  # the unrecorded step reads its gradients
    assert all(a.tobytes() == b.tobytes() for a, b in zip(recorded, plain))
