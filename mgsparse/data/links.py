"""Held-out edges for link prediction, split without leaks: `split_edges` -> `EdgeSplit`.

Link prediction hides some edges and asks a model, trained on the rest, to tell them apart
from pairs that are not edges. The commonest bug of the field is an evaluation edge that
still reaches the encoder: a held-out edge left in the message-passing graph (or in the
normalised adjacency built from it) is an edge the model sees. Here:

- an undirected graph's edge {u, v} is one candidate (stored u < v); holding it out removes
  both u -> v and v -> u from the training graph, which holds the training edges only;
- validation and test negatives are fixed pairs drawn once, none an edge of the *whole*
  graph, none a self-loop, none drawn twice (across both splits);
- training negatives are drawn anew every epoch (`EdgeSplit.sample_negatives`) among the
  pairs that are not *training* edges: rejecting the held-out positives as well would tell
  training which pairs they are.

Rejection is a sorted-key lookup: a pair (u, v) is the key u·N + v, the edges' keys are
sorted once, and `np.searchsorted` finds a drawn key among them; candidates are drawn in
vectorised rounds, never one pair at a time. Self-loops of the input are not candidates (a
GCN adds its own). A leaf: numpy and the errors only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mgsparse.errors import ConfigError

MAX_ROUNDS = 64  # rounds of drawing; each round draws twice what is still missing


def pair_keys(pairs: np.ndarray, num_nodes: int) -> np.ndarray:
    """u·N + v for each column (u, v) of `pairs` (2, P): one int64 per directed pair."""
    return pairs[0].astype(np.int64) * num_nodes + pairs[1].astype(np.int64)


def contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Which of `keys` occur in `sorted_keys` (ascending): one binary search each."""
    at = np.searchsorted(sorted_keys, keys)
    hit = np.zeros(len(keys), dtype=bool)
    inside = at < len(sorted_keys)
    hit[inside] = sorted_keys[at[inside]] == keys[inside]
    return hit


def both_ways(pairs: np.ndarray) -> np.ndarray:
    """(2, 2P): each pair and its reverse, the directed edges of undirected pairs."""
    return np.concatenate([pairs, pairs[::-1]], axis=1)


def canonical_edges(edge_index: np.ndarray, num_nodes: int, undirected: bool) -> np.ndarray:
    """The candidate edges of a graph, once each, sorted by key: self-loops and repeats
    dropped; an undirected graph's edges as u < v. An undirected split of a graph that is
    not symmetric (some u -> v without v -> u) is a usage error: its held-out edges could
    not be removed in both directions."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    e = e[:, e[0] != e[1]]
    keys = np.unique(pair_keys(e, num_nodes))
    if undirected:
        reverse = np.unique(pair_keys(e[::-1], num_nodes))
        if len(reverse) != len(keys) or not np.array_equal(reverse, keys):
            raise ConfigError("link.undirected: true, but the graph is directed (some edge "
                              "u -> v has no v -> u); set link.undirected: false")
        keys = keys[keys // num_nodes < keys % num_nodes]
    return np.stack([keys // num_nodes, keys % num_nodes])


@dataclass(frozen=True)
class EdgeSplit:
    """Positive pairs of each split (columns of (2, P) arrays; an undirected pair once, u < v),
    fixed negatives for validation and test, and the training message-passing graph.

    `train_graph` (2, E_train) is what the encoder reads: the training pairs (both directions
    when undirected), sorted by key. `train_keys` are its sorted keys, the edges a training
    negative must not be.
    """

    num_nodes: int
    undirected: bool
    train_pos: np.ndarray
    val_pos: np.ndarray
    val_neg: np.ndarray
    test_pos: np.ndarray
    test_neg: np.ndarray
    train_graph: np.ndarray
    train_keys: np.ndarray

    def sample_negatives(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """(2, count) distinct pairs that are neither training edges nor self-loops (u < v
        when undirected), drawn from `rng`: an epoch's training negatives."""
        return draw_non_edges(self.train_keys, self.num_nodes, count, rng, self.undirected)

    def num_non_edges(self) -> int:
        """How many distinct pairs `sample_negatives` can draw from (u < v when undirected)."""
        return count_non_edges(self.train_keys, self.num_nodes, self.undirected)

    def sizes(self) -> dict[str, int]:
        return {name: getattr(self, name).shape[1] for name in
                ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg", "train_graph")}


def count_non_edges(sorted_keys: np.ndarray, num_nodes: int, undirected: bool) -> int:
    """Pairs of distinct nodes that are not keys of `sorted_keys` (see `draw_non_edges`)."""
    n = num_nodes
    space = n * (n - 1) // (2 if undirected else 1)
    taken = len(sorted_keys) // (2 if undirected and _has_reverse(sorted_keys, n) else 1)
    return max(space - taken, 0)


def draw_non_edges(sorted_keys: np.ndarray, num_nodes: int, count: int,
                   rng: np.random.Generator, undirected: bool) -> np.ndarray:
    """`count` distinct pairs (2, count), in the order drawn, none a self-loop nor a key of
    `sorted_keys` (undirected: as u < v, the keys holding both directions or u < v only).

    Each round draws twice the number still missing, rejects self-loops, edges and repeats
    by sorted-key lookups, and keeps the first survivors; a graph too dense to have `count`
    non-edges is refused before drawing."""
    n, free = num_nodes, count_non_edges(sorted_keys, num_nodes, undirected)
    if count > free:
        raise ConfigError(f"the graph has {free} node pairs that are not "
                          f"edges, fewer than the {count} negatives asked for")
    chosen = np.zeros(0, dtype=np.int64)
    for _ in range(MAX_ROUNDS):
        missing = count - len(chosen)
        if missing <= 0:
            break
        u, v = rng.integers(0, n, size=(2, 2 * missing + 16), dtype=np.int64)
        if undirected:
            u, v = np.minimum(u, v), np.maximum(u, v)
        keys = u * n + v
        keys = keys[(u != v) & ~contains(sorted_keys, keys)]
        keys = np.concatenate([chosen, keys])
        _, first = np.unique(keys, return_index=True)  # a repeat keeps its first draw
        chosen = keys[np.sort(first)][:count]
    if len(chosen) < count:
        raise ConfigError(f"could not draw {count} negative pairs in {MAX_ROUNDS} rounds: "
                          f"the graph is nearly complete")
    return np.stack([chosen // n, chosen % n])


def _has_reverse(sorted_keys: np.ndarray, n: int) -> bool:
    """Whether the keys hold both directions of each pair (a message graph) or u < v only."""
    return bool(len(sorted_keys)) and bool((sorted_keys // n > sorted_keys % n).any())


def split_counts(num_edges: int, val: float, test: float) -> tuple[int, int, int]:
    """(train, val, test) counts of `num_edges` candidates: floor(val·M), floor(test·M), the
    rest; each must hold at least one edge."""
    if val + test >= 1:
        raise ConfigError(f"link.val + link.test must be < 1 (got {val:g} + {test:g})")
    n_val, n_test = math.floor(val * num_edges), math.floor(test * num_edges)
    n_train = num_edges - n_val - n_test
    if min(n_val, n_test, n_train) < 1:
        raise ConfigError(f"the graph has too few edges to split: {num_edges} candidate edges "
                          f"give {n_train} training, {n_val} validation and {n_test} test "
                          f"edges (each needs at least one; raise link.val / link.test)")
    return n_train, n_val, n_test


def split_edges(edge_index: np.ndarray, num_nodes: int, val: float = 0.05, test: float = 0.10,
                seed: int = 0, undirected: bool = True) -> EdgeSplit:
    """Hold out floor(val·M) and floor(test·M) of a graph's M candidate edges (see the
    module), with as many fixed negatives each, all from one generator seeded by `seed`:
    the same seed gives the same split, bit for bit."""
    edges = canonical_edges(edge_index, num_nodes, undirected)
    _, n_val, n_test = split_counts(edges.shape[1], val, test)
    rng = np.random.default_rng(seed)
    shuffled = edges[:, rng.permutation(edges.shape[1])]
    val_pos, test_pos = shuffled[:, :n_val], shuffled[:, n_val:n_val + n_test]
    train_pos = shuffled[:, n_val + n_test:]
    all_keys = np.sort(pair_keys(edges, num_nodes))  # u < v when undirected: so are draws
    negatives = draw_non_edges(all_keys, num_nodes, n_val + n_test, rng, undirected)
    train_graph = both_ways(train_pos) if undirected else train_pos
    train_keys = pair_keys(train_graph, num_nodes)
    order = np.argsort(train_keys, kind="stable")
    return EdgeSplit(num_nodes, undirected, train_pos, val_pos, negatives[:, :n_val],
                     test_pos, negatives[:, n_val:], train_graph[:, order], train_keys[order])
