"""Pair decoders and graph auto-encoders: the pair score against its definition, bad pairs as one
line, the VGAE's reparameterisation drawn from its generator and its KL term by hand; the
gradients themselves are the registry's cases (nn.pair_dot, nn.gae, nn.vgae,
nn.gae_mlp_decoder, run by tests/checks)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.checks import CASES, check_case
from mgsparse.engine import Tensor
from mgsparse.errors import ShapeError
from mgsparse.nn.decode import InnerProductDecoder, MLPDecoder, pair_dot
from mgsparse.nn.gae import (
    GAE,
    VGAE,
    full_reconstruction_loss,
    kl_normal,
    reconstruction_weights,
)
from mgsparse.nn.gcn import GCN


def test_pair_dot_is_the_row_wise_dot_product_and_its_backward_the_scatter():
    z = Tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    pairs = np.array([[0, 1, 0, 3], [1, 1, 2, 0]])
    s = pair_dot(z, pairs)
    assert s.data.tolist() == [0 * 3 + 1 * 4 + 2 * 5, 9 + 16 + 25, 0 * 6 + 7 + 2 * 8,
                               9 * 0 + 10 * 1 + 11 * 2]
    s.backward(np.array([1.0, 2.0, 3.0, 4.0]))
    zd = z.data
    expected = np.zeros_like(zd)
    for g, (u, v) in zip([1.0, 2.0, 3.0, 4.0], pairs.T):
        expected[u] += g * zd[v]
        expected[v] += g * zd[u]
    assert np.allclose(z.grad, expected)  # the self pair (1, 1) counts both ends: 2·g·z_1


@pytest.mark.parametrize("pairs, message", [
    (np.array([0, 1]), r"^pairs must be a \(2, P\) integer array, got int64 \(2,\)$"),
    (np.array([[0.0], [1.0]]), r"^pairs must be a \(2, P\) integer array, got float64"),
    (np.array([[0], [4]]), r"^pairs name nodes 0..4 outside the 4 rows of the embedding$"),
])
def test_bad_pairs_are_one_line_errors(pairs, message):
    with pytest.raises(ShapeError, match=message):
        InnerProductDecoder()(Tensor(np.zeros((4, 2))), pairs)


def test_the_mlp_decoder_is_symmetric_in_the_pair():
    rng = np.random.default_rng(0)
    z = Tensor(rng.standard_normal((5, 3)))
    d = MLPDecoder(3, 4, rng=rng, dtype=np.float64)
    pairs = np.array([[0, 2, 4], [1, 3, 0]])
    assert np.allclose(d(z, pairs).data, d(z, pairs[::-1]).data)
    assert d(z, pairs).shape == (3,)


def test_kl_matches_the_closed_form():
    mu, logstd = np.array([[0.5, -1.0], [0.0, 2.0]]), np.array([[0.1, -0.3], [0.0, 0.2]])
    by_hand = np.mean([-0.5 * sum(1 + 2 * ls - m * m - np.exp(ls) ** 2
                                  for m, ls in zip(mu_i, ls_i))
                       for mu_i, ls_i in zip(mu, logstd)])
    assert float(kl_normal(Tensor(mu), Tensor(logstd)).data) == pytest.approx(by_hand)
    assert float(kl_normal(Tensor(np.zeros((3, 2))), Tensor(np.zeros((3, 2)))).data) == 0.0


def _vgae(seed: int) -> VGAE:
    rng = np.random.default_rng(seed)
    def gcn(a, b):
        return GCN(a, 4, b, layers=1, dropout=0.0, rng=rng, dtype=np.float64)
    return VGAE(gcn(3, 4), gcn(4, 2), gcn(4, 2), InnerProductDecoder(), rng=rng)


def test_vgae_samples_from_its_generator_while_training_and_reads_mu_otherwise():
    x, edges = Tensor(np.random.default_rng(1).standard_normal((6, 3))), np.array(
        [[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    a, b = _vgae(0), _vgae(0)
    mu, logstd = a.gaussian(x, edges)
    za, kla = a.train().encode(x, edges)
    zb, _ = b.train().encode(x, edges)
    assert za.data.tobytes() == zb.data.tobytes()  # one seed, one draw
    assert not np.allclose(za.data, mu.data)
    eps = (za.data - mu.data) / np.exp(logstd.data)
    assert abs(eps.mean()) < 1.5 and 0.2 < eps.std() < 3  # a standard normal draw
    assert float(kla.data) == pytest.approx(float(kl_normal(mu, logstd).data) / 6)
    z, regulariser = a.eval().encode(x, edges)
    assert regulariser is None and np.array_equal(z.data, a.gaussian(x, edges)[0].data)


def test_gae_encodes_with_its_encoder_and_scores_with_its_decoder():
    rng = np.random.default_rng(0)
    model = GAE(GCN(3, 4, 2, dropout=0.0, rng=rng, dtype=np.float64), InnerProductDecoder())
    x, edges = Tensor(rng.standard_normal((5, 3))), np.array([[0, 1, 2], [1, 2, 3]])
    z, regulariser = model.encode(x, edges)
    assert regulariser is None and z.shape == (5, 2)
    assert np.allclose(model.decode(z, np.array([[0], [3]])).data, z.data[0] @ z.data[3])
    assert np.array_equal(model.embed(x, edges).data, z.data)


def test_the_full_reconstruction_is_kipfs_weighted_bce_over_every_entry():
    """Their code: labels = adj_train + I, but pos_weight and norm from adj_train.sum(),
    the edges without the self-loops."""
    rng = np.random.default_rng(0)
    z = rng.standard_normal((6, 3))
    edges = np.array([[0, 1, 2, 3], [1, 0, 3, 2]])
    y = np.eye(6)
    y[edges[0], edges[1]] = 1
    logits, e = z @ z.T, edges.shape[1]
    pos_weight, norm = (36 - e) / e, 36 / (2 * (36 - e))
    by_hand = norm * np.mean(pos_weight * y * np.logaddexp(0, -logits)
                             + (1 - y) * np.logaddexp(0, logits))  # their code's loss
    assert float(full_reconstruction_loss(Tensor(z), edges).data) == pytest.approx(by_hand)
    assert reconstruction_weights(6, 4) == (8.0, 36 / 64)
    with pytest.raises(ShapeError, match="needs at least one edge and one pair"):
        full_reconstruction_loss(Tensor(z[:1]), np.array([[0], [0]]))


def test_the_full_reconstruction_weighs_cora_as_kipfs_code(mirror_env):
    """On Cora's split (5 % validation, 10 % test, as their `mask_test_edges`), their
    pos_weight is (N² − E)/E = 816.0 over the 8,976 training edges; counting the 2,708
    self-loops as well would give 626.6."""
    from mgsparse.data import load_dataset
    from mgsparse.data.links import split_edges

    graph = load_dataset("cora")
    split = split_edges(graph.edge_index, graph.num_nodes, 0.05, 0.10, seed=0)
    n, e = graph.num_nodes, split.train_graph.shape[1]
    assert (n, e) == (2708, 8976)
    pos_weight, norm = reconstruction_weights(n, e)
    assert round(pos_weight, 1) == 816.0 and norm == pytest.approx(0.50061, abs=1e-5)
    z = np.zeros((n, 2))  # every logit 0: loss = norm · log 2 · (N² + (w − 1)(E + N)) / N²
    expect = norm * np.log(2) * (n * n + (pos_weight - 1) * (e + n)) / (n * n)
    loss = float(full_reconstruction_loss(Tensor(z), split.train_graph).data)
    assert loss == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("name", ["nn.pair_dot", "nn.gae", "nn.vgae", "nn.gae_mlp_decoder",
                                  "nn.full_reconstruction"])
def test_the_link_cases_are_registered_and_pass(name):
    rows = check_case(CASES[name], seed=1, size="medium")
    assert rows and all(r.passed for r in rows)
