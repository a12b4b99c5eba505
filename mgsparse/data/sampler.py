"""Neighbour sampling for mini-batch GNN training (GraphSAGE, Hamilton et al. 2017; PyG's
`NeighborLoader`, DGL's `NeighborSampler`): blocks of sampled in-edges, one per layer.

A graph is read through its in-CSR (row = target, its entries = the sources of the edges
j → i), built once. For a set of target nodes and a fanout k, `NeighborSampler.block` draws
up to k in-neighbours of each target without replacement (all of them when the in-degree is
≤ k; k = -1 takes all) and relabels the sources locally, targets first (as PyG and DGL do):
a `Block` is then the rectangular (T, S) matrix of the sampled edges with T ≤ S, and the
first T sources are the targets themselves, so a layer's root/self term reads rows [:T].

Without replacement, vectorised: every candidate edge of a row with more than k in-edges
gets a random 32-bit key; one stable argsort of (row << 32 | key) orders each such row's
candidates by key (the rows already come in order, so timsort's merges are near-linear: ~3x
faster than the default sort here), and the first k of each row form a uniform k-subset,
written back in CSR order. Rows taken whole are not sorted.

Relabelling, one scatter and one gather over a scratch array of N slots, no sort: with ids =
targets + sources, every position p writes p into its node's slot, then each target writes
its own position, so the write that lands in a target's slot is the target's. Reading the
slots back gives every position its node's representative, and exactly one position per
distinct node reads its own number; ranking the representatives (a cumsum) numbers the nodes:
targets 0..T-1 in their order, then the other sources in the order of their representatives
(NumPy's fancy assignment writes in order, so the last write lands: the order of last
appearance). Every slot read was written in the same call, so the scratch is never cleaned.
The scratch holds positions as int32 when they fit (fewer cache misses); the index arrays are
int64 (int32 ones take a slower path in NumPy) and gathers use `take` (~10% faster than a[i]).
No Python loop runs over nodes or edges; the cost is a few gathers per sampled edge plus one
sort of the over-full rows' edges.

`sample(seeds, rng)` builds the L blocks of an L-layer model from the innermost one (the
seeds' neighbours, fanouts[-1]) outwards, each block's sources becoming the next block's
targets; `SampledBatch.blocks[0]` reads the input features of `SampledBatch.n_id`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from mgsparse.data.graph import check_edge_data
from mgsparse.errors import HyperparameterError, ShapeError

KEY_BITS = 32  # random key per candidate edge; rows above it (row < 2**31 targets per block)


@dataclass(frozen=True, eq=False)
class Block:
    """The sampled in-edges of T target nodes as a (T, S) bipartite matrix.

    ``n_id`` (S,) global ids of the sources, the T targets first; ``row`` (nnz,) local target
    and ``col`` (nnz,) local source of each sampled edge j → i, rows sorted; ``edge_id``
    (nnz,) the edge's column in the graph's edge_index (None unless the sampler was built
    with ``edge_ids=True``: one more gather per block); ``degree`` (S,) the full-graph
    in-degree of each source (GCN's normalisation needs the true degrees), gathered on first
    use from ``graph_degree`` (N,), the sampler's own array (shared, not copied): SAGE and GAT
    never read it, and the gather costs over a quarter of a block's sampling time.
    ``edge_attr`` (nnz, F_e) and ``edge_type`` (nnz,): the graph's rows for the sampled
    edges, in the block's entry order (None unless the sampler was given them: the sampler
    then keeps edge ids and slices them per block).
    """

    n_id: np.ndarray
    row: np.ndarray
    col: np.ndarray
    edge_id: np.ndarray | None
    graph_degree: np.ndarray
    num_targets: int
    edge_attr: np.ndarray | None = None
    edge_type: np.ndarray | None = None

    @property
    def degree(self) -> np.ndarray:
        return self.graph_degree.take(self.n_id)

    @property
    def shape(self) -> tuple[int, int]:
        return self.num_targets, len(self.n_id)

    @property
    def nnz(self) -> int:
        return len(self.row)

    @property
    def num_sampled(self) -> np.ndarray:
        """(T,) sampled in-edges per target (= min(degree, k))."""
        return np.bincount(self.row, minlength=self.num_targets)

    def __repr__(self) -> str:
        return f"Block(targets={self.num_targets}, sources={len(self.n_id)}, nnz={self.nnz})"


@dataclass(frozen=True)
class SampledBatch:
    """The blocks of one mini-batch, outermost first: ``blocks[0]`` reads x[n_id] and the
    last block's targets are the seed nodes (the rows the loss is taken on, in seed order)."""

    blocks: tuple[Block, ...]

    n_id = property(lambda self: self.blocks[0].n_id)
    seeds = property(lambda self: self.blocks[-1].n_id[: self.blocks[-1].num_targets])
    nnz = property(lambda self: sum(b.nnz for b in self.blocks))
    num_nodes = property(lambda self: len(self.blocks[0].n_id))

    def __repr__(self) -> str:
        return f"SampledBatch(seeds={len(self.seeds)}, nodes={self.num_nodes}, nnz={self.nnz})"


def _segments(start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(segment id, position) of every element of the ranges [start_i, start_i + length_i)."""
    end = np.cumsum(length)  # where each segment ends in the output
    seg = np.repeat(np.arange(len(length), dtype=np.int64), length)
    pos = np.arange(end[-1] if len(end) else 0, dtype=np.int64)
    pos += np.repeat(start - end + length, length)
    return seg, pos


def _choose(start: np.ndarray, deg: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(len(start)·k,) CSR positions of k of the deg in-edges of each row, uniformly without
    replacement, in CSR order within each row."""
    group, cand = _segments(start, deg)
    keys = (group << KEY_BITS) | rng.integers(0, 1 << KEY_BITS, len(cand), dtype=np.int64)
    # rows stay grouped (group is the high part), shuffled inside (see the module docstring)
    order = np.argsort(keys, kind="stable")
    limit = np.repeat(np.cumsum(deg) - deg + k, deg)  # sorted position i is in its row's first k
    chosen = np.zeros(len(cand), dtype=bool)
    chosen[order[np.arange(len(cand)) < limit]] = True
    return cand[chosen]


def check_fanouts(fanouts: Sequence[int]) -> tuple[int, ...]:
    fanouts = tuple(int(k) for k in fanouts)
    if not fanouts or any(k == 0 or k < -1 for k in fanouts):
        raise HyperparameterError(f"sampler fanouts must be positive or -1 (all), got {list(fanouts)}")
    return fanouts


class NeighborSampler:
    """Per-layer neighbour sampling on a graph's in-CSR (see the module docstring).

    Holds the CSR (O(E)) and one O(N) scratch array for relabelling, so a sampler must not
    be shared between threads. Targets passed to `block`/`sample` must be distinct.
    `edge_attr` (E, F_e) and `edge_type` (E,), aligned with `edge_index`, are sliced into
    every block by its edge ids (which they switch on).
    """

    def __init__(self, edge_index: np.ndarray, num_nodes: int, fanouts: Sequence[int],
                 edge_ids: bool = False, edge_attr: np.ndarray | None = None,
                 edge_type: np.ndarray | None = None):
        edge_index = np.asarray(edge_index, dtype=np.int64)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise ShapeError(f"NeighborSampler: edge_index must be (2, E), got {edge_index.shape}")
        self.num_nodes, self.fanouts = int(num_nodes), check_fanouts(fanouts)
        source, target = edge_index
        # Node ids as int32 when they fit: the sampler is bound by random gathers, and half
        # the bytes is fewer cache misses (1M nodes, 10M edges: ~30% faster).
        small = np.int32 if self.num_nodes < np.iinfo(np.int32).max else np.int64
        check_edge_data("NeighborSampler", edge_index.shape[1], edge_attr, edge_type)
        self.edge_attr, self.edge_type = edge_attr, edge_type
        edge_ids = edge_ids or edge_attr is not None or edge_type is not None
        order = np.argsort(target, kind="stable")  # CSR position -> edge column
        self.edge_ids = order if edge_ids else None
        self.indices = source[order].astype(small)
        self.degree = np.bincount(target, minlength=self.num_nodes).astype(small)
        self.indptr = np.concatenate([[0], np.cumsum(self.degree, dtype=np.int64)])
        # Scratch for relabelling: only slots written in the same call are read (`_relabel`).
        self._local = np.zeros(self.num_nodes, dtype=small)

    def __repr__(self) -> str:
        return (f"NeighborSampler(num_nodes={self.num_nodes}, edges={len(self.indices)}, "
                f"fanouts={list(self.fanouts)})")

    def _pick(self, targets: np.ndarray, k: int,
              rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
        """(local row, CSR position) of the chosen in-edges, rows ascending.

        The output is built at its own size: the first min(deg, k) in-edges of every row, then
        the k slots of each over-full row overwritten by its sample (`_choose`), so no array
        the size of all candidates is built or compressed unless it is sorted anyway.
        """
        start = self.indptr.take(targets)
        deg = self.indptr.take(targets + 1) - start  # the same cache lines as start: no 3rd gather
        if k < 0 or not (over := np.flatnonzero(deg > k)).size:
            return _segments(start, deg)
        if rng is None:
            raise HyperparameterError("NeighborSampler: sampling fewer than all neighbours "
                                      "needs a random generator")
        take = np.minimum(deg, k)
        row, pos = _segments(start, take)  # the first `take` in-edges of each row, ...
        first = np.cumsum(take)[over] - k  # ... those of the over-full rows replaced below
        pos[_segments(first, np.full(len(over), k))[1]] = _choose(start[over], deg[over], k, rng)
        return row, pos

    def _relabel(self, targets: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n_id, col): the distinct ids of targets + sources, targets first, and the local
        number of each source (see the module docstring)."""
        t = len(targets)
        ids = np.concatenate([targets, sources])  # int64: NumPy indexes fastest with intp
        local = self._local
        if len(ids) > np.iinfo(local.dtype).max:  # positions overflow the small scratch
            local = np.empty(self.num_nodes, dtype=np.int64)
        k = np.arange(len(ids), dtype=local.dtype)
        local[ids] = k
        local[targets] = k[:t]  # each target represents itself
        winner = local.take(ids)
        first = winner == k
        rank = np.cumsum(first, dtype=local.dtype)  # (bool -> int64: ~10x slower, NumPy 2.4)
        rank -= 1
        col = rank.take(winner[t:]).astype(np.int64)
        return np.compress(first, ids), col

    def block(self, targets: np.ndarray, k: int = -1,
              rng: np.random.Generator | None = None) -> Block:
        """Up to k sampled in-edges of each target (k = -1: all), relabelled targets first."""
        targets = np.asarray(targets, dtype=np.int64)
        row, pos = self._pick(targets, int(k), rng)
        n_id, col = self._relabel(targets, self.indices.take(pos))
        edge_id = None if self.edge_ids is None else self.edge_ids.take(pos)
        attr, kind = (None if a is None else a.take(edge_id, axis=0)
                      for a in (self.edge_attr, self.edge_type))
        return Block(n_id=n_id, row=row, col=col, edge_id=edge_id, graph_degree=self.degree,
                     num_targets=len(targets), edge_attr=attr, edge_type=kind)

    def sample(self, seeds: np.ndarray, rng: np.random.Generator | None) -> SampledBatch:
        """The blocks of one batch: innermost (fanouts[-1]) around the seeds first."""
        blocks: list[Block] = []
        targets = np.asarray(seeds, dtype=np.int64)
        for k in reversed(self.fanouts):
            blocks.append(self.block(targets, k, rng))
            targets = blocks[-1].n_id
        return SampledBatch(tuple(reversed(blocks)))

    def nnz_bound(self, seeds: np.ndarray) -> np.ndarray:
        """(len(seeds),) an upper bound on the block entries each seed can bring to a batch.

        Innermost layer: e₁ = min(deg, k_L) exactly. Layer l outwards has at most
        t_{l-1} = 1 + e₁ + … + e_{l-1} targets per seed, each with at most k'_l = min(k_l,
        max degree) sampled edges: e_l = t_{l-1}·k'_l. Overlap between seeds only lowers the
        real count, so a batch whose bounds sum to ≤ m holds ≤ m block entries. The targets'
        own rows are what the 1 in t counts: a seed is a target of every block. Without
        overlap and with every degree ≥ k (disjoint in-trees, two layers) the bound is met.
        """
        max_deg = int(self.degree.max()) if self.num_nodes else 0
        ks = [max_deg if k < 0 else min(k, max_deg) for k in reversed(self.fanouts)]
        deg = self.degree[np.asarray(seeds, dtype=np.int64)].astype(np.int64)
        e = deg if self.fanouts[-1] < 0 else np.minimum(deg, ks[0])
        total, t = e.copy(), 1 + e
        for k in ks[1:]:
            e = t * k
            total, t = total + e, t + e
        return total


def plan_batches(nodes: np.ndarray, batch_size: int | None, bound: np.ndarray | None = None,
                 max_batch_nnz: int | None = None) -> list[np.ndarray]:
    """Consecutive slices of `nodes` of at most `batch_size` nodes whose `bound`s sum to at
    most `max_batch_nnz` (one searchsorted per batch on the running sum, no loop over nodes).
    A node whose bound alone exceeds the cap is an error: no batch could hold it."""
    n = len(nodes)
    size = n if batch_size is None else int(batch_size)
    if size < 1:
        raise HyperparameterError(f"batch_size must be >= 1, got {batch_size}")
    if max_batch_nnz is None:
        return [nodes[i:i + size] for i in range(0, n, size)]
    if n and int(bound.max()) > max_batch_nnz:
        raise HyperparameterError(f"sampler.max_batch_nnz={max_batch_nnz} is below one node's "
                                  f"block bound ({int(bound.max())}); raise it or lower the fanouts")
    running = np.concatenate([[0], np.cumsum(bound)])
    out, start = [], 0
    while start < n:
        stop = int(np.searchsorted(running, running[start] + max_batch_nnz, side="right")) - 1
        stop = min(stop, start + size, n)
        out.append(nodes[start:stop])
        start = stop
    return out


class NeighborLoader:
    """Batches of sampled blocks over `nodes` (the training nodes), one epoch per iteration.

    Each epoch shuffles `nodes` (if `shuffle`) and cuts them into batches of `batch_size`
    seeds (None: one batch); with `max_batch_nnz` a batch also stops before its seeds' block
    bounds (`NeighborSampler.nnz_bound`) exceed the cap. All randomness comes from one
    generator, seeded with `seed` for `iter(loader)` or passed to `epoch(rng)`: the same seed
    gives bitwise the same batches.
    """

    def __init__(self, sampler: NeighborSampler, nodes: np.ndarray, batch_size: int | None,
                 shuffle: bool = True, seed: int = 0, max_batch_nnz: int | None = None):
        self.sampler, self.nodes = sampler, np.asarray(nodes, dtype=np.int64)
        self.batch_size, self.shuffle, self.max_batch_nnz = batch_size, shuffle, max_batch_nnz
        self.rng = np.random.default_rng(seed)
        self._bound = None if max_batch_nnz is None else sampler.nnz_bound(self.nodes)

    def plan(self, rng: np.random.Generator | None = None) -> list[np.ndarray]:
        """One epoch's seed batches, shuffled with `rng` (default: the loader's generator)."""
        rng = self.rng if rng is None else rng
        if self.shuffle:
            perm = rng.permutation(len(self.nodes))
            nodes, bound = self.nodes[perm], None if self._bound is None else self._bound[perm]
        else:
            nodes, bound = self.nodes, self._bound
        return plan_batches(nodes, self.batch_size, bound, self.max_batch_nnz)

    def epoch(self, rng: np.random.Generator) -> Iterator[SampledBatch]:
        """One epoch whose shuffle and draws all come from `rng` (a run's own generator)."""
        for seeds in self.plan(rng):
            yield self.sampler.sample(seeds, rng)

    def __iter__(self) -> Iterator[SampledBatch]:
        return self.epoch(self.rng)

    def __repr__(self) -> str:
        return (f"NeighborLoader(nodes={len(self.nodes)}, batch_size={self.batch_size}, "
                f"max_batch_nnz={self.max_batch_nnz}, shuffle={self.shuffle})")
