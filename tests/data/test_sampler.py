"""Neighbour sampler: each sample is a subset of the in-neighbours of the right size without
repeats, uniform over subsets, bitwise reproducible from a seed; batches honour max_batch_nnz."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import chi2

from mgsparse.data.sampler import NeighborLoader, NeighborSampler, SampledBatch, plan_batches
from mgsparse.errors import HyperparameterError


def random_digraph(rng, n=60, e=400) -> np.ndarray:
    """Distinct directed edges (self loops allowed) in shuffled order; node n-1 has none."""
    keys = rng.choice((n - 1) * (n - 1), size=e, replace=False)
    return np.stack([keys // (n - 1), keys % (n - 1)]).astype(np.int64)


@pytest.fixture
def graph(rng):
    return random_digraph(rng), 60


def in_neighbours(edge_index, i) -> list[int]:
    return sorted(edge_index[0, edge_index[1] == i].tolist())


@pytest.mark.parametrize("k", [1, 3, 8, -1])
def test_each_sample_is_a_subset_of_the_in_neighbours_of_the_right_size(graph, rng, k):
    edge_index, n = graph
    sampler = NeighborSampler(edge_index, n, [k], edge_ids=True)
    targets = rng.permutation(n)[:40]
    block = sampler.block(targets, k, rng)
    assert np.array_equal(block.n_id[:40], targets)  # targets first, in the given order
    assert len(np.unique(block.n_id)) == len(block.n_id)
    assert np.all(np.diff(block.row) >= 0)
    assert np.all(np.diff(block.edge_id)[np.diff(block.row) == 0] > 0)  # CSR order in a row
    # each sampled entry is the edge it names
    assert np.array_equal(edge_index[:, block.edge_id],
                          np.stack([block.n_id[block.col], block.n_id[block.row]]))
    for i, t in enumerate(targets):
        picked = block.n_id[block.col[block.row == i]].tolist()
        true = in_neighbours(edge_index, t)
        want = len(true) if k < 0 else min(len(true), k)
        assert len(picked) == want and len(set(picked)) == want  # right size, no repeats
        assert set(picked) <= set(true)
        assert block.degree[i] == len(true)
    assert np.array_equal(block.num_sampled, [min(len(in_neighbours(edge_index, t)), k)
                                              if k > 0 else len(in_neighbours(edge_index, t))
                                              for t in targets])


def last_appearance_relabel(targets, sources) -> tuple[np.ndarray, np.ndarray]:
    """Reference (n_id, col): the targets, then the other distinct sources in the order of
    their last appearance (the order the sampler's scatter gives), by np.unique."""
    rest = sources[~np.isin(sources, targets)][::-1]
    new, first_reversed = np.unique(rest, return_index=True)
    n_id = np.concatenate([targets, new[np.argsort(-first_reversed)]])
    order = np.argsort(n_id)
    return n_id, order[np.searchsorted(n_id, sources, sorter=order)]


@pytest.mark.parametrize("scratch", [None, np.int8])  # int8: positions overflow the scratch
@pytest.mark.parametrize("k", [3, -1])
def test_relabelling_matches_a_unique_based_reference(rng, scratch, k):
    for _ in range(5):
        edge_index = random_digraph(rng)
        sampler = NeighborSampler(edge_index, 60, [k], edge_ids=True)
        if scratch is not None:
            sampler._local = np.zeros(60, dtype=scratch)
        targets = rng.permutation(60)[:40]
        block = sampler.block(targets, k, rng)
        sources = edge_index[0, block.edge_id]  # the truth, independent of the relabelling
        assert len(np.unique(sources)) < len(sources) and np.isin(targets, sources).any()
        n_id, col = last_appearance_relabel(targets, sources)
        assert np.array_equal(block.n_id, n_id) and np.array_equal(block.col, col)
        assert block.col.dtype == np.int64 and block.n_id.dtype == np.int64


def star_draws(rng, k, deg=6, copies=500, rounds=20) -> np.ndarray:
    """(copies·rounds, deg) 0/1 rows: which of a target's `deg` in-neighbours were drawn."""
    targets = np.arange(copies)
    sources = copies + np.arange(deg)
    edge_index = np.stack([np.tile(sources, copies), np.repeat(targets, deg)])
    sampler = NeighborSampler(edge_index, copies + deg, [k])
    hits = []
    for _ in range(rounds):
        b = sampler.block(targets, k, rng)
        chosen = np.zeros((copies, deg), dtype=int)
        chosen[b.row, b.n_id[b.col] - copies] = 1
        hits.append(chosen)
    return np.concatenate(hits)


def subset_pvalue(draws: np.ndarray, k: int) -> float:
    """Chi-square p-value of the drawn k-subsets against the uniform law over all C(deg, k)."""
    deg = draws.shape[1]
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(deg), k))}
    codes = [subsets[tuple(np.flatnonzero(r))] for r in draws]
    observed = np.bincount(codes, minlength=len(subsets))
    expected = len(draws) / len(subsets)
    stat = ((observed - expected) ** 2 / expected).sum()
    return float(chi2.sf(stat, len(subsets) - 1))


def test_samples_are_uniform_over_subsets(rng):
    draws = star_draws(rng, k=2)  # 10,000 draws over the 15 two-subsets of six neighbours
    assert draws.sum(axis=1).tolist() == [2] * len(draws)
    assert subset_pvalue(draws, 2) > 1e-4
    # each neighbour is drawn with probability k/deg = 1/3 (binomial sd ~ 0.0047)
    np.testing.assert_allclose(draws.mean(axis=0), 1 / 3, atol=0.02)


def test_the_uniformity_check_rejects_a_slightly_biased_sampler(rng):
    """Negative control: keep the uniform draws but replace 5% of them by the subset {0, 1}."""
    draws = star_draws(rng, k=2)
    biased = draws.copy()
    biased[: len(draws) // 20] = [1, 1, 0, 0, 0, 0]
    assert subset_pvalue(biased, 2) < 1e-6


def batches_of(loader, epochs=2) -> list[SampledBatch]:
    return [b for _ in range(epochs) for b in loader]


def assert_same(a: list[SampledBatch], b: list[SampledBatch]) -> bool:
    fields = ("n_id", "row", "col", "edge_id")
    return len(a) == len(b) and all(
        np.array_equal(getattr(x, f), getattr(y, f))
        for p, q in zip(a, b) for x, y in zip(p.blocks, q.blocks) for f in fields)


def test_same_seed_same_batches_bitwise(graph):
    edge_index, n = graph
    sampler = NeighborSampler(edge_index, n, [4, 2], edge_ids=True)
    def make(seed):
        return NeighborLoader(sampler, np.arange(50), 16, seed=seed)

    first, again, other = batches_of(make(3)), batches_of(make(3)), batches_of(make(4))
    assert len(first) == 8  # 4 batches per epoch, 2 epochs
    assert assert_same(first, again)
    assert not assert_same(first, other)
    assert not assert_same(first[:4], first[4:])  # a new shuffle and new draws each epoch
    loader = make(0)  # a run's own generator gives the same epochs as the loader's seed
    assert assert_same(list(loader.epoch(np.random.default_rng(3))), first[:4])


def test_batch_blocks_nest_and_cover_every_node_once(graph):
    edge_index, n = graph
    loader = NeighborLoader(NeighborSampler(edge_index, n, [5, 3]), np.arange(0, 50, 2), 7)
    batches = list(loader)
    assert [len(b.seeds) for b in batches] == [7, 7, 7, 4]
    assert sorted(np.concatenate([b.seeds for b in batches]).tolist()) == list(range(0, 50, 2))
    for b in batches:
        outer, inner = b.blocks
        assert np.array_equal(outer.n_id[: outer.num_targets], inner.n_id)  # sources → targets
        assert inner.num_sampled.max() <= 3 and outer.num_sampled.max() <= 5


def test_all_neighbours_needs_no_generator_and_keeps_every_edge(graph):
    edge_index, n = graph
    block = NeighborSampler(edge_index, n, [-1], edge_ids=True).block(np.arange(n), -1)
    assert block.nnz == edge_index.shape[1]
    assert sorted(block.edge_id.tolist()) == list(range(edge_index.shape[1]))
    with pytest.raises(HyperparameterError, match="random generator"):
        NeighborSampler(edge_index, n, [2]).block(np.arange(n), 2)


@pytest.mark.parametrize("fanouts", [[], [0], [3, -2]])
def test_bad_fanouts_are_one_clear_error(graph, fanouts):
    with pytest.raises(HyperparameterError, match="fanouts must be positive or -1"):
        NeighborSampler(graph[0], graph[1], fanouts)


@pytest.mark.parametrize("fanouts", [[4, 2], [-1, 3]])
def test_max_batch_nnz_caps_every_batch(graph, fanouts):
    edge_index, n = graph
    sampler = NeighborSampler(edge_index, n, fanouts)
    cap = 300
    loader = NeighborLoader(sampler, np.arange(n), batch_size=64, seed=1, max_batch_nnz=cap)
    batches = batches_of(loader, epochs=3)
    for b in batches:
        assert b.nnz <= cap
        assert sampler.nnz_bound(b.seeds).sum() <= cap  # the rule the batches follow
        assert b.nnz <= sampler.nnz_bound(b.seeds).sum()
    assert sum(len(b.seeds) for b in batches) == 3 * n
    assert len(batches) > 3  # the cap, not batch_size=64, cut the epochs
    with pytest.raises(HyperparameterError, match="below one node's block bound"):
        list(NeighborLoader(sampler, np.arange(n), 64, max_batch_nnz=2))



def in_forest(roots: int, branching: int, depth: int) -> tuple[np.ndarray, int]:
    """Disjoint complete in-trees (edges child → parent): no node shares an in-neighbour
    with another, so a batch of roots samples exactly what each root's bound counts."""
    parents, children, n, level = [], [], roots, np.arange(roots)
    for _ in range(depth):
        kids = n + np.arange(len(level) * branching)
        parents.append(np.repeat(level, branching))
        children.append(kids)
        n, level = n + len(kids), kids
    return np.stack([np.concatenate(children), np.concatenate(parents)]), n


class _BoundWithoutTargetRows(NeighborSampler):
    """The bound with a one-line bug: layer l's targets counted as the sampled sources of the
    layer inside (t = e) instead of those plus the targets themselves (t = 1 + e + ...)."""

    def nnz_bound(self, seeds):
        deg = self.degree[np.asarray(seeds)].astype(np.int64)
        ks = [min(k, int(self.degree.max())) for k in reversed(self.fanouts)]
        e = np.minimum(deg, ks[0])
        total, t = e.copy(), e.copy()
        for k in ks[1:]:
            e = t * k
            total, t = total + e, t + e
        return total


@pytest.mark.parametrize("fanouts, per_root",
                         [([3, 2], 2 + 3 * 3), ([4, 3], 3 + 4 * 4), ([-1, 2], 2 + 3 * 4)])
def test_max_batch_nnz_bound_is_exact_without_shared_neighbours(fanouts, per_root):
    """Each root of a forest of 4-ary in-trees brings exactly its bound to a two-layer batch:
    the inner block samples min(4, k₂) children, the outer one min(4, k₁) in-edges of each of
    its 1 + min(4, k₂) targets, the root's own row included. (From three layers on, a root's
    outer rows may re-draw children already sampled: the bound is then an upper bound.)"""
    edge_index, n = in_forest(roots=40, branching=4, depth=2)
    sampler = NeighborSampler(edge_index, n, fanouts)
    roots = np.arange(40)
    np.testing.assert_array_equal(sampler.nnz_bound(roots), per_root)
    cap = 3 * per_root + per_root // 2  # binds: three roots a batch, not batch_size=16
    loader = NeighborLoader(sampler, roots, batch_size=16, seed=2, max_batch_nnz=cap)
    batches = batches_of(loader, epochs=2)
    assert [len(b.seeds) for b in batches] == [3] * 13 + [1] + [3] * 13 + [1]
    for b in batches:
        assert b.nnz == per_root * len(b.seeds) <= cap  # the bound, exactly
    wrong = _BoundWithoutTargetRows(edge_index, n, fanouts)
    loose = NeighborLoader(wrong, roots, batch_size=16, seed=2, max_batch_nnz=cap)
    assert max(b.nnz for b in batches_of(loose, epochs=2)) > cap  # the bug shows

def test_plan_batches_is_cut_by_size_and_by_running_bound():
    nodes = np.arange(10)
    assert [len(b) for b in plan_batches(nodes, 4)] == [4, 4, 2]
    assert [len(b) for b in plan_batches(nodes, None)] == [10]
    bound = np.array([3, 3, 3, 1, 1, 1, 1, 5, 5, 1])
    assert [b.tolist() for b in plan_batches(nodes, 3, bound, 6)] == [
        [0, 1], [2, 3, 4], [5, 6], [7], [8, 9]]
