"""The floor: one GCN epoch written by hand in numpy/scipy, with no autograd at all.

The model and recipe of benchmarks/compare_pyg.py (Kipf & Welling: 2 layers, hidden 16,
dropout 0.5 before each layer, ReLU, Adam lr 0.01, weight decay 5e-4 on the first layer only,
no clipping), its forward and backward derived by hand:

    Xd = drop(X),  Z1 = Â (Xd W1) + b1,  R = relu(Z1),  Rd = drop(R),  Z2 = Â (Rd W2) + b2
    dZ2 = (softmax(Z2) − onehot(y)) / n at the n training rows, 0 elsewhere
    dW2 = Rdᵀ (Âᵀ dZ2),  db2 = Σ_rows dZ2,  dR = drop'((Âᵀ dZ2) W2ᵀ),  dZ1 = dR·[Z1 > 0]
    dW1 = Xdᵀ (Âᵀ dZ1) + 5e-4·W1,  db1 = Σ_rows dZ1

Written as a careful numpy programmer would: float32 throughout, Â and Âᵀ as scipy CSR built
once, dropout as ``rng.random(shape, dtype=float32) >= p`` times 1/(1−p) (the same
semantics as mgsparse's and torch's dropout), Adam in place. scipy's kernels run on one core,
which is what numpy/scipy alone give. An epoch is one training step plus one evaluation pass.

`synthetic_graph(num_nodes)` is the graph the large comparisons use: a stochastic block model
(5 classes, average degree 10) with 64 dense features (class centroid plus noise).
`arxiv_shaped_graph()` has ogbn-arxiv's shape: 169,343 nodes, average degree 14 (about
2.37M directed edges, both directions of each pair), 128 dense features, 40 classes and
ogbn-arxiv's split sizes (90,941 train = 54%, 29,799 val, 48,603 test), so the training
rows' receptive field is the whole graph.

    python benchmarks/floor_gcn.py [--nodes 100000] [--epochs 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
import scipy.sparse as sp

from mgsparse.data import sbm

RECIPE = {"hidden": 16, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4}
F32 = np.float32


def synthetic_graph(num_nodes: int, features: int = 64, seed: int = 0):
    """An SBM graph (5 classes, average degree 10) with dense float32 features."""
    graph = sbm(num_nodes=num_nodes, num_classes=5, avg_degree=10.0, num_features=16,
                seed=seed, name=f"sbm-{num_nodes}")
    rng = np.random.default_rng(seed + 1)
    centroids = rng.standard_normal((5, features)).astype(F32) * F32(0.5)
    x = centroids[graph.y] + rng.standard_normal((num_nodes, features), dtype=F32)
    return dataclasses.replace(graph, x=x)


ARXIV = {"nodes": 169_343, "avg_degree": 14.0, "features": 128, "classes": 40,
         "split": (90_941, 29_799, 48_603)}


def arxiv_shaped_graph(seed: int = 0):
    """An SBM with ogbn-arxiv's shape (ARXIV above): a permutation of the nodes is cut into
    its train / val / test sizes."""
    n, c = ARXIV["nodes"], ARXIV["classes"]
    graph = sbm(num_nodes=n, num_classes=c, avg_degree=ARXIV["avg_degree"], num_features=c,
                seed=seed, name="arxiv-shaped")
    rng = np.random.default_rng(seed + 1)
    centroids = rng.standard_normal((c, ARXIV["features"])).astype(F32) * F32(0.5)
    x = centroids[graph.y] + rng.standard_normal((n, ARXIV["features"]), dtype=F32)
    order, cuts = rng.permutation(n), np.cumsum(ARXIV["split"])[:-1]
    train, val, test = (np.isin(np.arange(n), part) for part in np.split(order, cuts))
    return dataclasses.replace(graph, x=x, train_mask=train, val_mask=val, test_mask=test)


def load_graph(name: str, nodes: int = 0):
    """The graphs of the comparisons: "cora" (row-normalised features, the public split),
    "synthetic" (`synthetic_graph(nodes)`) or "arxiv-shaped" (`arxiv_shaped_graph()`)."""
    if name == "cora":
        from mgsparse.data import load_dataset

        return load_dataset("cora", normalize_features=True)
    return arxiv_shaped_graph() if name == "arxiv-shaped" else synthetic_graph(nodes)


def gcn_adjacency(edge_index: np.ndarray, n: int) -> sp.csr_matrix:
    """Â = D^-1/2 (A + I) D^-1/2 as float32 CSR."""
    loops = np.arange(n)
    row = np.concatenate([edge_index[0], loops])
    col = np.concatenate([edge_index[1], loops])
    A = sp.csr_matrix((np.ones(len(row), F32), (row, col)), shape=(n, n))
    d = np.asarray(A.sum(axis=1)).ravel().astype(F32) ** F32(-0.5)
    return (sp.diags(d) @ A @ sp.diags(d)).tocsr().astype(F32)


def glorot(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    a = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, (fan_in, fan_out)).astype(F32)


class Adam:
    """torch.optim.Adam's update, in place."""

    def __init__(self, params, lr):
        self.params, self.lr, self.t = params, lr, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads):
        self.t += 1
        b1, b2 = 0.9, 0.999
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= (self.lr / c1) * m / (np.sqrt(v / c2) + 1e-8)


class FloorSide:
    name = "numpy floor"

    def __init__(self, graph, seed: int):
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.A = gcn_adjacency(np.asarray(graph.edge_index), graph.num_nodes)
        self.AT = self.A.T.tocsr()
        x = graph.x.toarray() if sp.issparse(graph.x) else graph.x
        self.X = np.ascontiguousarray(x, dtype=F32)
        self.y = np.asarray(graph.y)
        self.rows = [np.flatnonzero(m) for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
        h, c = RECIPE["hidden"], int(graph.num_classes)
        self.params = [glorot(rng, self.X.shape[1], h), np.zeros(h, F32),
                       glorot(rng, h, c), np.zeros(c, F32)]
        self.adam = Adam(self.params, RECIPE["lr"])

    def drop(self, x):
        p = RECIPE["dropout"]
        keep = self.rng.random(x.shape, dtype=F32) >= p
        return x * keep * F32(1 / (1 - p)), keep

    def forward(self, training: bool):
        W1, b1, W2, b2 = self.params
        Xd = self.drop(self.X)[0] if training else self.X
        Z1 = self.A @ (Xd @ W1) + b1
        R = np.maximum(Z1, 0)
        Rd, k2 = self.drop(R) if training else (R, None)
        return Xd, Z1, Rd, k2, self.A @ (Rd @ W2) + b2

    def train_step(self) -> None:
        W1, _, W2, _ = self.params
        Xd, Z1, Rd, k2, Z2 = self.forward(True)
        t = self.rows[0]
        z = Z2[t] - Z2[t].max(axis=1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(axis=1, keepdims=True)
        prob[np.arange(len(t)), self.y[t]] -= 1
        dZ2 = np.zeros_like(Z2)
        dZ2[t] = prob / len(t)
        G2 = self.AT @ dZ2
        dR = (G2 @ W2.T) * k2 * F32(1 / (1 - RECIPE["dropout"]))
        dZ1 = dR * (Z1 > 0)
        G1 = self.AT @ dZ1
        dW1 = Xd.T @ G1 + F32(RECIPE["weight_decay"]) * W1
        self.adam.step([dW1, dZ1.sum(axis=0), Rd.T @ G2, dZ2.sum(axis=0)])

    def epoch(self) -> tuple[float, float]:
        """(val acc, test acc) after one training step."""
        self.train_step()
        pred = self.forward(False)[-1].argmax(axis=1)
        return tuple(float((pred[r] == self.y[r]).mean()) for r in self.rows[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    side = FloorSide(synthetic_graph(args.nodes), 0)
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        val, test = side.epoch()
        times.append((time.perf_counter() - t0) * 1e3)
    print(f"floor epoch on {args.nodes:,} nodes: median {statistics.median(times):.1f} ms, "
          f"val {val:.3f}, test {test:.3f}")


if __name__ == "__main__":
    main()
