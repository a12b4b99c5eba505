"""Graphs and point clouds that need no download: Zachary's karate club, a stochastic block
model that scales to millions of nodes, and the classic 2-D toy sets (moons, circles, blobs).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mgsparse.data.graph import Graph, sorted_unique, undirected_edges
from mgsparse.data.transforms import default_split_sizes, index_to_mask, random_split
from mgsparse.errors import ConfigError

# --- Zachary's karate club ---------------------------------------------------------------------

# The 78 friendships of W. W. Zachary (1977), 0-indexed as in networkx.karate_club_graph().
KARATE_EDGES = (
    (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 10), (0, 11),
    (0, 12), (0, 13), (0, 17), (0, 19), (0, 21), (0, 31), (1, 2), (1, 3), (1, 7), (1, 13),
    (1, 17), (1, 19), (1, 21), (1, 30), (2, 3), (2, 7), (2, 8), (2, 9), (2, 13), (2, 27),
    (2, 28), (2, 32), (3, 7), (3, 12), (3, 13), (4, 6), (4, 10), (5, 6), (5, 10), (5, 16),
    (6, 16), (8, 30), (8, 32), (8, 33), (9, 33), (13, 33), (14, 32), (14, 33), (15, 32),
    (15, 33), (18, 32), (18, 33), (19, 33), (20, 32), (20, 33), (22, 32), (22, 33), (23, 25),
    (23, 27), (23, 29), (23, 32), (23, 33), (24, 25), (24, 27), (24, 31), (25, 31), (26, 29),
    (26, 33), (27, 33), (28, 31), (28, 33), (29, 32), (29, 33), (30, 32), (30, 33), (31, 32),
    (31, 33), (32, 33),
)
KARATE_FACTIONS = ("Mr. Hi", "Officer")
# Members who followed the instructor, Mr. Hi (networkx's `club` attribute); the rest
# followed the officer.
KARATE_MR_HI = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 16, 17, 19, 21)
KARATE_TRAIN = (0, 33)  # the two leaders: one labelled node per faction
KARATE_VAL = (1, 2, 3, 9, 14, 15)  # three members of each faction


def karate_club() -> Graph:
    """Zachary's karate club: 34 nodes, 78 undirected (156 directed) edges, 2 classes.

    Features are the identity (each member is its own one-hot feature), labels the faction
    each member joined (0 = Mr. Hi, 1 = Officer; 17 each). Split: the two leaders train
    (nodes 0 and 33), six members validate (1, 2, 3, 9, 14, 15), the other 26 test -- the
    semi-supervised setting of Kipf & Welling's karate demo with a small validation set.
    """
    num_nodes = 34
    pairs = np.array(KARATE_EDGES, dtype=np.int64).T
    y = np.ones(num_nodes, dtype=np.int64)
    y[list(KARATE_MR_HI)] = 0
    train = index_to_mask(np.array(KARATE_TRAIN), num_nodes)
    val = index_to_mask(np.array(KARATE_VAL), num_nodes)
    return Graph(x=sp.identity(num_nodes, dtype=np.float32, format="csr"), y=y,
                 edge_index=undirected_edges(pairs[0], pairs[1], num_nodes),
                 num_nodes=num_nodes, num_classes=2, train_mask=train, val_mask=val,
                 test_mask=~(train | val), name="karate")


# --- stochastic block model ---------------------------------------------------------------------

def sbm(num_nodes: int = 2000, num_classes: int = 4, avg_degree: float = 10.0,
        homophily: float = 0.8, num_features: int = 128, seed: int = 0, *,
        words_per_node: int = 8, feature_signal: float = 0.5,
        num_train_per_class: int | None = None, num_val: int | None = None,
        num_test: int | None = None, name: str = "synthetic") -> Graph:
    """A planted-partition stochastic block model with bag-of-words features.

    Nodes get balanced classes. Each of ``num_nodes * avg_degree / 2`` undirected edges picks
    a uniform source, then a target uniform within the source's class with probability
    ``homophily`` and within a uniform other class otherwise -- so the edge homophily (share
    of edges joining equal labels) is ``homophily`` in expectation. Self loops and duplicate
    pairs are dropped and redrawn. Each node draws ``words_per_node`` words: with probability
    ``feature_signal`` from its class's block of ``num_features / num_classes`` topic words,
    otherwise uniformly, giving a sparse CSR count matrix. Split sizes left None take
    `default_split_sizes` (20 per class / 500 / 1000 on large graphs).

    Everything is vectorised and no N x N object exists: 1,000,000 nodes with average
    degree 10 (~10,000,000 directed edges) take seconds (benchmarks/datasets.py).
    """
    _check_sbm(num_nodes, num_classes, avg_degree, homophily, num_features, words_per_node,
               feature_signal)
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(num_nodes, dtype=np.int64) % num_classes)
    pairs = _sbm_pairs(y, num_classes, round(num_nodes * avg_degree / 2), homophily, rng)
    edge_index = undirected_edges(pairs // num_nodes, pairs % num_nodes, num_nodes)
    x = _bag_of_words(y, num_classes, num_features, words_per_node, feature_signal, rng)
    asked = {"num_train_per_class": num_train_per_class, "num_val": num_val,
             "num_test": num_test}
    sizes = {**default_split_sizes(y), **{k: v for k, v in asked.items() if v is not None}}
    train, val, test = random_split(y, seed=seed, **sizes)
    return Graph(x=x, y=y, edge_index=edge_index, num_nodes=num_nodes,
                 num_classes=num_classes, train_mask=train, val_mask=val, test_mask=test,
                 name=name)


def _check_sbm(num_nodes, num_classes, avg_degree, homophily, num_features, words_per_node,
               feature_signal) -> None:
    if num_classes < 1 or num_nodes < 2 * num_classes:
        raise ConfigError(f"sbm: need num_classes >= 1 and num_nodes >= 2 * num_classes, got "
                          f"num_nodes={num_nodes}, num_classes={num_classes}")
    if not 0 <= avg_degree < num_nodes - 1:
        raise ConfigError(f"sbm: avg_degree must be in [0, num_nodes - 1), got {avg_degree}")
    for label, value in (("homophily", homophily), ("feature_signal", feature_signal)):
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"sbm: {label} must be in [0, 1], got {value}")
    if num_classes == 1 and homophily < 1.0:
        raise ConfigError("sbm: one class cannot have edges between classes; use homophily=1")
    if num_features < 1 or words_per_node < 1:
        raise ConfigError("sbm: num_features and words_per_node must be >= 1")


def _sbm_pairs(y: np.ndarray, num_classes: int, num_pairs: int, homophily: float,
               rng: np.random.Generator, max_rounds: int = 20) -> np.ndarray:
    """Sorted unique keys ``lo * N + hi`` (lo < hi) of about ``num_pairs`` node pairs.

    Nodes sorted by class make "a uniform node of class c" one index computation:
    ``members[start[c] + floor(u * count[c])]``. Round k redraws exactly what round k-1 lost
    to self loops and duplicates, so the count never overshoots.
    """
    num_nodes = y.size
    members = np.argsort(y, kind="stable")
    count = np.bincount(y, minlength=num_classes)
    start = np.cumsum(count) - count
    keys = np.empty(0, dtype=np.int64)
    for _ in range(max_rounds):
        need = num_pairs - keys.size
        if need <= 0:
            break
        src = rng.integers(0, num_nodes, need)
        cls = y[src]
        if num_classes > 1:
            other = (cls + rng.integers(1, num_classes, need)) % num_classes
            cls = np.where(rng.random(need) < homophily, cls, other)
        dst = members[start[cls] + (rng.random(need) * count[cls]).astype(np.int64)]
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        new = (lo * num_nodes + hi)[lo != hi]
        keys = sorted_unique(np.concatenate([keys, new]))
    return keys


def _bag_of_words(y: np.ndarray, num_classes: int, num_features: int, words_per_node: int,
                  feature_signal: float, rng: np.random.Generator) -> sp.csr_matrix:
    """(N, F) CSR float32 word counts; class c's topic words are the block starting at
    ``c * F // C`` (blocks wrap around when F < C)."""
    n, k = y.size, words_per_node
    block = max(1, num_features // num_classes)
    topic = (y[:, None] * block + rng.integers(0, block, (n, k))) % num_features
    noise = rng.integers(0, num_features, (n, k))
    words = np.where(rng.random((n, k)) < feature_signal, topic, noise).astype(np.int32)
    x = sp.csr_matrix((np.ones(n * k, dtype=np.float32), words.ravel(),
                       np.arange(0, n * k + 1, k, dtype=np.int64)), shape=(n, num_features))
    x.sum_duplicates()  # a word drawn twice counts 2
    return x


# --- 2-D toy point clouds -----------------------------------------------------------------------

def make_moons(n: int = 200, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles (as scikit-learn's): X (n, 2) float32, y (n,) int64."""
    rng = np.random.default_rng(seed)
    n_out = n // 2
    n_in = n - n_out
    t_out, t_in = np.linspace(0, np.pi, n_out), np.linspace(0, np.pi, n_in)
    outer = np.stack([np.cos(t_out), np.sin(t_out)], axis=1)
    inner = np.stack([1 - np.cos(t_in), 1 - np.sin(t_in) - 0.5], axis=1)
    return _shuffled(np.vstack([outer, inner]), _two_labels(n_out, n_in), noise, rng)


def make_circles(n: int = 200, noise: float = 0.05, factor: float = 0.5,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A circle of radius 1 (label 0) around one of radius ``factor`` (label 1)."""
    if not 0 < factor < 1:
        raise ConfigError(f"make_circles: factor must be in (0, 1), got {factor}")
    rng = np.random.default_rng(seed)
    n_out = n // 2
    n_in = n - n_out
    t_out = np.linspace(0, 2 * np.pi, n_out, endpoint=False)
    t_in = np.linspace(0, 2 * np.pi, n_in, endpoint=False)
    outer = np.stack([np.cos(t_out), np.sin(t_out)], axis=1)
    inner = factor * np.stack([np.cos(t_in), np.sin(t_in)], axis=1)
    return _shuffled(np.vstack([outer, inner]), _two_labels(n_out, n_in), noise, rng)


def make_blobs(n: int = 200, centers: int | np.ndarray = 3, std: float = 1.0,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Isotropic gaussian blobs; ``centers`` is a count (drawn in [-10, 10]^2) or a (C, D)
    array. Points are shared out as evenly as possible: X (n, D) float32, y (n,) int64."""
    rng = np.random.default_rng(seed)
    if np.ndim(centers) == 0:
        if int(centers) < 1:
            raise ConfigError(f"make_blobs: centers must be >= 1, got {centers}")
        centers = rng.uniform(-10.0, 10.0, size=(int(centers), 2))
    centers = np.asarray(centers, dtype=np.float64)
    y = np.arange(n, dtype=np.int64) % centers.shape[0]
    return _shuffled(centers[y], y, std, rng)


def _two_labels(n_zero: int, n_one: int) -> np.ndarray:
    return np.concatenate([np.zeros(n_zero, np.int64), np.ones(n_one, np.int64)])


def _shuffled(points: np.ndarray, y: np.ndarray, noise: float,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    points = points + rng.normal(0.0, noise, size=points.shape) if noise else points
    order = rng.permutation(y.size)
    return points[order].astype(np.float32), y[order]
