"""`FixedProduct`: Â·X kept for a frozen Â and frozen features, and only for them."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.kernels.inplace import freeze
from mgsparse.nn.edges import FixedProduct
from mgsparse.nn.gcn import GCNConv, normalized_adjacency
from mgsparse.sparse import ops as sparse_ops

EDGE_INDEX = np.array([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
N = 4


def frozen_pair(rng, dtype=np.float64, f_in=6):
    """A Â and features X (4 × f_in), both frozen, as a task places them."""
    adj = normalized_adjacency(EDGE_INDEX, N, dtype=dtype)
    x = Tensor(rng.standard_normal((N, f_in)), dtype=dtype)
    freeze(adj.values.data)
    freeze(x.data)
    return adj, x


def count_sparse_products(monkeypatch) -> list:
    calls = []
    forward = sparse_ops.SpMM.forward

    def counted(ctx, *args):
        calls.append(args[1].shape)
        return forward(ctx, *args)
    monkeypatch.setattr(sparse_ops.SpMM, "forward", staticmethod(counted))
    return calls


def test_it_applies_only_to_two_frozen_operands_that_need_no_gradient(rng):
    adj, x = frozen_pair(rng)
    assert FixedProduct.applies(adj, x)
    loose = Tensor(x.data.copy())  # writeable: it could change under a kept product
    assert not FixedProduct.applies(adj, loose)
    assert not FixedProduct.applies(normalized_adjacency(EDGE_INDEX, N, dtype=np.float64), x)
    assert not FixedProduct.applies(adj, Tensor(x.data, requires_grad=True))
    assert not FixedProduct.applies(adj.to_tensor(), x)  # a dense Â: nothing to save
    assert not FixedProduct.applies(adj, SparseTensor.from_dense(x.data))  # sparse features


def test_a_first_layer_on_fixed_operands_runs_one_sparse_product_for_every_call(rng,
                                                                                monkeypatch):
    """A 6 → 2 layer multiplies by W first (2 columns through Â) on writeable features; on
    frozen ones, Â·X (6 columns) once, then (Â·X)·W + b: the same numbers to rounding."""
    adj, x = frozen_pair(rng)
    conv = GCNConv(6, 2, rng=rng, dtype=np.float64)
    conv.bias.data[:] = rng.standard_normal(2)
    calls = count_sparse_products(monkeypatch)
    loose = [conv(Tensor(x.data.copy()), adj).data for _ in range(3)]
    assert calls == [(N, 2)] * 3
    calls.clear()
    fixed = [conv(x, adj).data for _ in range(3)]
    assert calls == [(N, 6)]  # once, on the features' width
    expected = adj.to_tensor().data @ x.data @ conv.weight.data + conv.bias.data
    for out in loose + fixed:
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    conv.weight.data[:] += 1.0  # the weights change between calls: the product does not
    np.testing.assert_allclose(conv(x, adj).data,
                               adj.to_tensor().data @ x.data @ conv.weight.data + conv.bias.data,
                               rtol=1e-12, atol=1e-12)
    assert len(calls) == 1


def test_gradients_through_the_kept_product_match_finite_differences(rng):
    adj, x = frozen_pair(rng)
    conv = GCNConv(6, 3, rng=rng, dtype=np.float64)

    def f(w, b):
        conv.weight, conv.bias = w, b
        return conv(x, adj).tanh()

    result = gradcheck(f, [conv.weight, conv.bias])
    assert result.passed and result.max_abs_err < 1e-7


def test_an_uncached_layer_keeps_nothing(rng, monkeypatch):
    adj, x = frozen_pair(rng)
    conv = GCNConv(6, 2, cached=False, rng=rng, dtype=np.float64)
    calls = count_sparse_products(monkeypatch)
    conv(x, adj), conv(x, adj)
    assert calls == [(N, 2)] * 2 and not conv._fixed._kept


def test_one_product_per_pair_each_gone_with_either_operand(rng):
    adj, x = frozen_pair(rng)
    kept = FixedProduct()
    first = kept.get(adj, x)
    assert kept.get(adj, x) is first
    other_adj, other_x = frozen_pair(rng)
    second = kept.get(adj, other_x)
    np.testing.assert_allclose(second.data, adj.to_tensor().data @ other_x.data, atol=1e-12)
    third = kept.get(other_adj, other_x)
    assert len({id(first), id(second), id(third)}) == 3
    assert kept.get(adj, x) is first and kept.get(adj, other_x) is second  # all three kept
    del other_x, second, third
    gc.collect()
    assert list(kept._kept) == [(id(adj), id(x))]  # the features went: their products too
    del adj
    gc.collect()
    assert not kept._kept


def test_placed_features_refuse_a_write(rng):
    from mgsparse.run.placed import place

    features, _ = place(rng.standard_normal((5, 3)), 0.1, np.float32)
    with pytest.raises(ValueError, match="read-only"):
        features.data[0, 0] = 1.0
