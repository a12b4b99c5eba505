"""The floor for graph classification: one GIN epoch on NCI1 written by hand in numpy/scipy,
with no autograd at all.

The model and recipe of configs/nci1-gin.yaml (and of benchmarks/compare_pyg_graphs.py):
4 GIN-0 layers, hidden 64, each MLP Linear → BatchNorm1d → ReLU → Linear, then BatchNorm1d
and ReLU; a mean readout of every level (the input's too) through dropout 0.5 and its own
linear head, the heads summed; softmax cross-entropy; Adam lr 0.01; batches of 128 graphs.
Per layer, with A the batch's block-diagonal sum adjacency and BN(z) = (z − μ)/σ̂ · γ + β:

    S = A H + H,   Z1 = S W1 + b1,   R = relu(BN1(Z1)),   Z2 = R W2 + b2,   H' = relu(BN2(Z2))
    backward of relu∘BN (x̂ = (z − μ)/σ̂, dy = g·[y > 0]):
        dz = γ/σ̂ · (dy − mean(dy) − x̂ · mean(dy · x̂)),  dγ = Σ dy·x̂,  dβ = Σ dy
    dW = inputᵀ dz,  db = Σ dz,  d input = dz Wᵀ,  dH = Aᵀ dS + dS

Written as a careful numpy programmer would: float32 throughout, every batch's A, Aᵀ and
pooling matrix as scipy CSR (built from the same vectorised batch gather mgsparse uses), column
sums by BLAS, elementwise work in place, dropout masks from ``rng.random(shape, float32) >= p``,
Adam in place. An epoch is every training step plus one evaluation pass over every graph (BN
with its running statistics folded into the Linear before it), as in the side-by-side.

    MGSPARSE_TU_URL=<folder of the TU zips> python benchmarks/floor_gin.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import scipy.sparse as sp
from floor_gcn import Adam, glorot

from mgsparse.data import load_dataset
from mgsparse.data.graphset import GraphSet
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.run.tasks.graphs import EVAL_GRAPHS
from mgsparse.sparse import set_num_threads

F32 = np.float32
RECIPE = {"layers": 4, "hidden": 64, "dropout": 0.5, "lr": 0.01, "batch": 128,
          "eval_graphs": EVAL_GRAPHS, "eps": 1e-5, "momentum": 0.1}  # configs/nci1-gin.yaml's


class Batch:
    """B graphs as scipy operands: x, A (sum adjacency), Aᵀ, P (B × N: 1/n_b per node for
    the mean readout, 1 for the sum)."""

    def __init__(self, graphs: GraphSet, idx: np.ndarray, readout: str = "mean"):
        sub = graphs.subset(idx)
        n, b = sub.num_nodes, sub.num_graphs
        self.x, self.y = np.ascontiguousarray(sub.x, dtype=F32), sub.y
        src, dst = sub.edge_index
        self.A = sp.csr_matrix((np.ones(len(src), F32), (dst, src)), shape=(n, n))
        self.AT = self.A.T.tocsr()
        counts = sub.nodes_per_graph
        batch = np.repeat(np.arange(b), counts)
        weight = 1.0 / np.maximum(counts, 1) if readout == "mean" else np.ones(b)
        self.P = sp.csr_matrix((weight[batch].astype(F32),
                                (batch, np.arange(n))), shape=(b, n))
        self.PT = self.P.T.tocsr()


def bn_relu_train(z: np.ndarray, gamma, beta, stats: list):
    """relu(BN(z)) over the rows with batch statistics; z is overwritten with z − μ.
    Returns (out, saved for the backward); the running statistics move as torch's."""
    n = z.shape[0]
    ones = np.ones(n, F32)
    mean = (ones @ z) / F32(n)
    z -= mean
    sq = np.multiply(z, z)
    var = (ones @ sq) / F32(n)
    inv = F32(1) / np.sqrt(var + F32(RECIPE["eps"]))
    scale = inv * gamma
    out = np.multiply(z, scale, out=sq)
    out += beta
    positive = out > 0
    out *= positive
    m = F32(RECIPE["momentum"])
    stats[0] *= 1 - m
    stats[0] += m * mean
    stats[1] *= 1 - m
    stats[1] += m * var * F32(n / (n - 1))
    return out, (z, inv, scale, positive, ones)


def bn_relu_backward(g: np.ndarray, saved):
    """(dz, dγ, dβ) of relu∘BN (formula in the module docstring)."""
    c, inv, scale, positive, ones = saved
    n = g.shape[0]
    dy = g * positive
    dx = np.multiply(dy, c)
    dgamma, dbeta = (ones @ dx) * inv, ones @ dy
    np.multiply(c, inv * dgamma / F32(n), out=dx)
    np.subtract(dy, dx, out=dx)
    dx -= dbeta / F32(n)
    dx *= scale
    return dx, dgamma, dbeta


class FloorGIN:
    """Parameters in one list, in a fixed order: per layer W1 b1 γ1 β1 W2 b2 γ2 β2, then
    the heads' W b per level."""

    name = "numpy floor"

    def __init__(self, graphs: GraphSet, split, seed: int, readout: str = "mean"):
        rng = np.random.default_rng(seed)
        self.rng, self.graphs, self.split, self.readout = rng, graphs, split, readout
        h, c = RECIPE["hidden"], graphs.num_classes
        widths = [graphs.num_features] + [h] * RECIPE["layers"]
        self.params = []
        for a in widths[:-1]:
            self.params += [glorot(rng, a, h), np.zeros(h, F32), np.ones(h, F32),
                            np.zeros(h, F32), glorot(rng, h, h), np.zeros(h, F32),
                            np.ones(h, F32), np.zeros(h, F32)]
        for w in widths:
            self.params += [glorot(rng, w, c), np.zeros(c, F32)]
        self.running = [[np.zeros(h, F32), np.ones(h, F32)] for _ in range(2 * RECIPE["layers"])]
        self.adam = Adam(self.params, RECIPE["lr"])
        ids = np.arange(graphs.num_graphs)
        size = RECIPE["eval_graphs"]
        self.eval_batches = [Batch(graphs, ids[s:s + size], readout)
                             for s in range(0, len(ids), size)]

    def layer_params(self, layer: int):
        return self.params[8 * layer:8 * layer + 8]

    def head_params(self, level: int):
        base = 8 * RECIPE["layers"] + 2 * level
        return self.params[base:base + 2]

    def train_step(self, batch: Batch) -> None:
        self.adam.step(self.gradients(batch))

    def gradients(self, batch: Batch) -> list[np.ndarray]:
        """d(mean cross-entropy)/d(each parameter) on one batch, in training mode (batch
        statistics, dropout; the running statistics move)."""
        hs, saved = [batch.x], []
        for layer in range(RECIPE["layers"]):
            W1, b1, g1, be1, W2, b2, g2, be2 = self.layer_params(layer)
            s = batch.A @ hs[-1]
            s += hs[-1]
            z1 = s @ W1
            z1 += b1
            r, bn1 = bn_relu_train(z1, g1, be1, self.running[2 * layer])
            z2 = r @ W2
            z2 += b2
            h, bn2 = bn_relu_train(z2, g2, be2, self.running[2 * layer + 1])
            hs.append(h)
            saved.append((s, r, bn1, bn2))
        p, keep = RECIPE["dropout"], []
        logits = 0
        for level, h in enumerate(hs):
            pooled = batch.P @ h
            k = (self.rng.random(pooled.shape, dtype=F32) >= p) * F32(1 / (1 - p))
            pooled *= k
            keep.append((pooled, k))
            W, b = self.head_params(level)
            logits = logits + (pooled @ W + b)
        z = logits - logits.max(axis=1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(axis=1, keepdims=True)
        prob[np.arange(len(batch.y)), batch.y] -= 1
        dlogits = prob / F32(len(batch.y))
        grads = [None] * len(self.params)
        dhs = []
        for level, (pooled, k) in enumerate(keep):
            W, _ = self.head_params(level)
            base = 8 * RECIPE["layers"] + 2 * level
            grads[base], grads[base + 1] = pooled.T @ dlogits, dlogits.sum(axis=0)
            dhs.append(batch.PT @ ((dlogits @ W.T) * k))
        dh = dhs[-1]
        for layer in reversed(range(RECIPE["layers"])):
            W1, _, _, _, W2, _, _, _ = self.layer_params(layer)
            s, r, bn1, bn2 = saved[layer]
            dz2, dg2, dbe2 = bn_relu_backward(dh, bn2)
            dr = dz2 @ W2.T
            dz1, dg1, dbe1 = bn_relu_backward(dr, bn1)
            ones = bn1[-1]
            grads[8 * layer:8 * layer + 8] = [s.T @ dz1, ones @ dz1, dg1, dbe1, r.T @ dz2,
                                              ones @ dz2, dg2, dbe2]
            if layer:
                ds = dz1 @ W1.T
                dh = batch.AT @ ds
                dh += ds
                dh += dhs[layer]
        return grads

    def logits(self, batch: Batch) -> np.ndarray:
        """Eval mode: each BN's running statistics folded into the Linear before it."""
        h = batch.x
        W, b = self.head_params(0)
        out = (batch.P @ h) @ W + b
        for layer in range(RECIPE["layers"]):
            W1, b1, g1, be1, W2, b2, g2, be2 = self.layer_params(layer)
            s = batch.A @ h
            s += h
            for (W_, b_, g_, be_), (rm, rv) in zip(((W1, b1, g1, be1), (W2, b2, g2, be2)),
                                                   self.running[2 * layer:2 * layer + 2]):
                scale = g_ / np.sqrt(rv + F32(RECIPE["eps"]))
                s = s @ (W_ * scale)
                s += (b_ - rm) * scale + be_
                s *= s > 0  # relu: faster than np.maximum here
            h = s
            W, b = self.head_params(layer + 1)
            out = out + (batch.P @ h) @ W + b
        return out

    def products_epoch(self) -> None:
        """The epoch's dense products alone, on arrays of their shapes (contents arbitrary):
        per training batch of N nodes, per layer S·W1 and R·W2 forward, Sᵀ·dZ1, Rᵀ·dZ2,
        dZ2·W2ᵀ and (but the first layer) dZ1·W1ᵀ backward; S·W1' and R·W2' per evaluation
        batch. At the BLAS's peak already, they are what no rewrite of the rest removes."""
        train = self.split[0]
        order = train[self.rng.permutation(len(train))]
        counts = self.graphs.nodes_per_graph
        sizes = [int(counts[order[s:s + RECIPE["batch"]]].sum())
                 for s in range(0, len(order), RECIPE["batch"])]
        sizes_eval = [b.x.shape[0] for b in self.eval_batches]
        h, f0 = RECIPE["hidden"], self.graphs.num_features
        most = max(sizes + sizes_eval)
        big, inputs = np.ones((most, h), F32), np.ones((most, f0), F32)  # both contiguous
        for n, training in [(n, True) for n in sizes] + [(n, False) for n in sizes_eval]:
            a = big[:n]
            for layer in range(RECIPE["layers"]):
                W1, _, _, _, W2 = self.layer_params(layer)[:5]
                s_ = inputs[:n] if layer == 0 else a
                s_ @ W1
                a @ W2
                if training:
                    s_.T @ a
                    a.T @ a
                    a @ W2.T
                    if layer:
                        a @ W1.T

    def epoch(self) -> tuple[float, float]:
        train, val, test = self.split
        order = train[self.rng.permutation(len(train))]
        for s in range(0, len(order), RECIPE["batch"]):
            self.train_step(Batch(self.graphs, order[s:s + RECIPE["batch"]], self.readout))
        pred = np.concatenate([self.logits(b) for b in self.eval_batches]).argmax(axis=1)
        y = self.graphs.y
        return float((pred[val] == y[val]).mean()), float((pred[test] == y[test]).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    set_num_threads(1)  # and OpenBLAS to one thread: scipy's kernels run on one core anyway
    keep_freed_memory()  # as mgsparse train does (fresh pages cost more than the work)
    graphs = load_dataset("nci1")
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(graphs.num_graphs)
    cut = [int(0.8 * len(order)), int(0.9 * len(order))]
    side = FloorGIN(graphs, np.split(order, cut), args.seed)
    t0 = time.perf_counter()
    side.products_epoch()
    print(f"the dense products alone: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        val, test = side.epoch()
        times.append((time.perf_counter() - t0) * 1e3)
        print(f"epoch {times[-1]:7.1f} ms   val {val:.3f}  test {test:.3f}")
    print(f"median epoch {statistics.median(times):.1f} ms")


if __name__ == "__main__":
    main()
