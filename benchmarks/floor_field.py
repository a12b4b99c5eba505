"""The floor on the receptive field: one Cora GCN epoch written by hand in numpy/scipy, with no
autograd at all, on exactly the rows that `mgsparse train configs/cora.yaml` computes.

benchmarks/floor_gcn.py computes every layer on every node with dense features. mgsparse
trains Cora on the receptive field of its 140 training rows instead (mgsparse/run/field.py):
layer 2 on those rows from 644 hidden rows, layer 1 on the 644 from 1,664 input rows (of
2,708), the input rows gathered once and kept sparse. Its scores read 1,640 rows, more than
half of the graph, so under `train.receptive_field: auto` they run on the whole graph. This
floor does exactly that work, so that mgsparse's epoch can be held to it (issue 27: at most
1.1x on one thread).

The recipe is configs/cora.yaml's (Kipf & Welling): 2 layers, hidden 16, dropout 0.5 before
each layer, ReLU, Adam lr 0.01, weight decay 5e-4 on the first layer's weight and bias, the
global gradient norm clipped to 1.0. With Â = D^-1/2 (A + I) D^-1/2 (row i: i's in-edges,
D the in-degree), the blocks are rows of Â: B2 = Â[train, hid], B1 = Â[hid, inp], where hid
and inp list the sources of the rows before them (the rows themselves first, then their other
in-neighbours by last appearance: mgsparse's order). On those blocks, with X the input rows:

    Xd = drop(X) (stored values only),  Z1 = B1 (Xd W1) + b1,  R = relu(Z1),  Rd = drop(R)
    Z2 = B2 (Rd W2) + b2,  loss = mean over the n training rows of −log softmax(Z2)[y]
    dZ2 = (softmax(Z2) − onehot(y)) / n,  db2 = Σ_rows dZ2,  G2 = B2ᵀ dZ2,  dW2 = Rdᵀ G2
    dZ1 = (G2 W2ᵀ)·s·[Rd > 0]  (s = 1/(1−p): drop' and relu' in one mask),  db1 = Σ_rows dZ1
    G1 = B1ᵀ dZ1,  dW1 = Xdᵀ G1;  then clip (g ← g·c/(‖g‖ + 1e-6) when ‖g‖ > c = 1.0),
    add 5e-4·(W1, b1), Adam.
    scores: Z = Â (relu(Â (X W1) + b1) W2) + b2 on every node; the validation loss and the
    accuracy of argmax Z on the training, validation and test rows.

Written as a careful numpy programmer would: float32 throughout; the blocks, their transposes
and the gathered input rows as scipy CSR built once, outside the timed epoch; column sums by
BLAS (ones @ dZ); dropout keeps one random bit per entry (p = 0.5, as mgsparse draws it: the
same generator gives the same masks) and writes the kept values, pre-scaled by 1/(1−p), into
a CSR kept from step to step; Adam in place (floor_gcn.py's). scipy's kernels run on one core.

The side-by-side alternates mgsparse's epoch (`MgsparseEpoch`: the task, model and optimizer
that `mgsparse train configs/cora.yaml` builds, one `train_epoch` then `task.evaluate`, as the
training loop runs them) with the floor's, the order swapped every round, round 0 untimed:

    MGSPARSE_PLANETOID_URL=<planetoid folder> python benchmarks/floor_field.py \\
        [--epochs 200] [--threads 1]

`--thread-gain` times mgsparse's epoch against itself instead: one run at 1 thread, one at 2
(each built the same way, from the same seed), alternating the same way, the pool switched
outside the timed region. It prints the 2-thread epoch over the 1-thread one (at most 1.0:
"never slower on small work", issue 27) and whether the two runs' scores are bitwise equal
(the thread count must not change a result).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from floor_gcn import Adam, gcn_adjacency, glorot
from speed_table import record_ratio

from mgsparse.config import Config, load_config
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.run import build_optimizer, make_task, train_epoch
from mgsparse.run.placed import load_graph
from mgsparse.run.task import shuffle_generator
from mgsparse.sparse import set_num_threads

F32 = np.float32
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cora.yaml"


def cora_config(*overrides: str) -> Config:
    """configs/cora.yaml with `--set` style overrides ("sparse.threads=1", ...)."""
    return load_config(CONFIG, overrides)


def recipe(config: Config) -> dict:
    """The floor's hyperparameters, read from the config mgsparse trains with."""
    m, o, t = config.model, config.optim, config.train
    assert m.kind == "gcn" and m.layers == 2 and m.activation == "relu" and o.name == "adam"
    assert o.weight_decay_first_layer_only and not m.learn_edge_weight
    return {"hidden": m.hidden, "dropout": m.dropout, "lr": o.lr,
            "weight_decay": o.weight_decay, "clip": t.grad_clip_norm}


def keep_bits(n: int, rng: np.random.Generator) -> np.ndarray:
    """n keep flags, each False with probability 1/2: one random bit per entry."""
    return np.unpackbits(np.frombuffer(rng.bytes(-(-n // 8)), np.uint8), count=n).view(np.bool_)


def sources(A: sp.csr_matrix, targets: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """(Â[targets, ids], ids): the rows of `targets` restricted to their in-neighbours `ids`,
    the targets first, then the other sources by last appearance along the rows (mgsparse's
    order, so that the same generator draws the same dropout masks)."""
    rows = A[targets]
    new = rows.indices[~np.isin(rows.indices, targets)]
    _, last = np.unique(new[::-1], return_index=True)
    ids = np.concatenate([targets, new[np.sort(len(new) - 1 - last)]])
    return rows[:, ids].tocsr(), ids


def receptive_field(A: sp.csr_matrix, rows: np.ndarray, layers: int) -> tuple[list, list]:
    """(blocks, ids), outermost first: block l maps the rows of ids[l] to those of the next."""
    blocks, ids, targets = [], [], rows
    for _ in range(layers):
        block, targets = sources(A, targets)
        blocks.insert(0, block)
        ids.insert(0, targets)
    return blocks, ids


def softmax_loss(Z: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """(mean cross-entropy of the rows of Z against y, softmax(Z))."""
    z = Z - Z.max(axis=1, keepdims=True)
    prob = np.exp(z)
    total = prob.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(total[:, 0]) - z[np.arange(len(y)), y]))
    prob /= total
    return loss, prob


class FloorField:
    """The floor (see the module): the training step on the training rows' receptive field,
    the scores on the whole graph."""

    name = "numpy floor"

    def __init__(self, graph, hyper: dict, seed: int = 0):
        assert hyper["dropout"] in (0.0, 0.5), "one random bit per entry draws p = 0.5"
        self.hyper, self.rng = hyper, np.random.default_rng(seed)
        self.A = gcn_adjacency(np.asarray(graph.edge_index)[::-1], graph.num_nodes)
        self.X = sp.csr_matrix(graph.x, dtype=F32, copy=True)
        self.X.sort_indices()  # canonical CSR, as mgsparse holds it (the masks' order)
        self.y = np.asarray(graph.y)
        self.rows = [np.flatnonzero(m) for m in (graph.train_mask, graph.val_mask,
                                                 graph.test_mask)]
        (self.B1, self.B2), self.ids = receptive_field(self.A, self.rows[0], 2)
        self.B1T, self.B2T = self.B1.T.tocsr(), self.B2.T.tocsr()
        self.Xd = self.X[self.ids[0]]  # the input rows; their values dropped out every step
        self.kept = self.Xd.data / F32(1 - hyper["dropout"])  # a kept value, pre-scaled
        self.y_train = self.y[self.rows[0]]
        self.ones = [np.ones(B.shape[0], F32) for B in (self.B1, self.B2)]  # column sums by BLAS
        h, c = hyper["hidden"], int(graph.num_classes)
        self.params = [glorot(self.rng, self.X.shape[1], h), np.zeros(h, F32),
                       glorot(self.rng, h, c), np.zeros(c, F32)]
        self.adam = Adam(self.params, hyper["lr"])

    def gradients(self) -> tuple[float, list, np.ndarray]:
        """(loss, [dW1, db1, dW2, db2], Z2): one forward and backward on the field."""
        W1, b1, W2, b2 = self.params
        p, Xd = self.hyper["dropout"], self.Xd
        if p:
            np.multiply(self.kept, keep_bits(Xd.nnz, self.rng), out=Xd.data)
        Z1 = self.B1 @ (Xd @ W1)
        Z1 += b1
        R = np.maximum(Z1, 0, out=Z1)
        if p:
            Rd = R * keep_bits(R.size, self.rng).reshape(R.shape)
            Rd *= F32(1 / (1 - p))
        else:
            Rd = R
        Z2 = self.B2 @ (Rd @ W2)
        Z2 += b2
        loss, dZ2 = softmax_loss(Z2, self.y_train)
        dZ2[np.arange(len(dZ2)), self.y_train] -= 1
        dZ2 /= F32(len(dZ2))
        G2 = self.B2T @ dZ2
        dZ1 = G2 @ W2.T
        dZ1 *= Rd > 0
        if p:
            dZ1 *= F32(1 / (1 - p))
        G1 = self.B1T @ dZ1
        grads = [Xd.T @ G1, self.ones[0] @ dZ1, Rd.T @ G2, self.ones[1] @ dZ2]
        return loss, grads, Z2

    def train_step(self) -> float:
        """Gradients, clipping, weight decay on the first layer, Adam; returns the loss."""
        loss, grads, _ = self.gradients()
        clip = self.hyper["clip"]
        if clip:
            norm = math.sqrt(sum(float(np.dot(g.ravel(), g.ravel())) for g in grads))
            if clip / (norm + 1e-6) < 1:
                for g in grads:
                    g *= F32(clip / (norm + 1e-6))
        wd = F32(self.hyper["weight_decay"])
        grads[0] += wd * self.params[0]
        grads[1] += wd * self.params[1]
        self.adam.step(grads)
        return loss

    def scores(self) -> tuple[float, float, float, float]:
        """(val loss, train acc, val acc, test acc) of the whole graph's logits."""
        W1, b1, W2, b2 = self.params
        Z1 = self.A @ (self.X @ W1)
        Z1 += b1
        Z2 = self.A @ (np.maximum(Z1, 0, out=Z1) @ W2)
        Z2 += b2
        train, val, test = self.rows
        val_loss = softmax_loss(Z2[val], self.y[val])[0]
        pred = Z2.argmax(axis=1)
        return (val_loss, *(float(np.mean(pred[r] == self.y[r])) for r in (train, val, test)))

    def epoch(self) -> tuple[float, float, float, float]:
        self.train_step()
        return self.scores()


class MgsparseEpoch:
    """mgsparse's epoch as `mgsparse train` runs it: the task `make_task` builds for the
    config (the training field, the whole graph's scores), the model and optimizer of a run
    from `seed`, then per epoch `train_epoch` (step, clip) and `task.evaluate`."""

    name = "mgsparse"

    def __init__(self, config: Config, seed: int = 0):
        self.config, self.task = config, make_task(config)
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = build_optimizer(config.optim, self.model)
        self.shuffle = shuffle_generator(seed)

    def train_step(self) -> float:
        task = self.task
        return train_epoch(self.model, self.optimizer, task.batches(self.model, self.shuffle),
                           self.config.train.grad_clip_norm, task.reduce_gradients,
                           task.replay(self.model, training=True))[0]

    def scores(self) -> tuple[float, float, float, float]:
        s = self.task.evaluate(self.model)
        return s.val_loss, s.train_acc, s.val_acc, s.test_acc

    def epoch(self) -> tuple[float, float, float, float]:
        self.train_step()
        return self.scores()


class ThreadedEpoch(MgsparseEpoch):
    """`MgsparseEpoch` that sets the thread pool to its own count before each call."""

    def __init__(self, config: Config, threads: int, seed: int = 0):
        super().__init__(config, seed)
        self.threads, self.name = threads, f"mgsparse, {threads} thr"

    def switch(self) -> None:
        set_num_threads(self.threads)


def alternate(sides: list, epochs: int) -> dict[str, dict[str, list]]:
    """Rounds 0..epochs, each side's training step then scores, the order swapped every
    round; per side the ms of the step, of the scores and of both, round 0 left out."""
    record = {s.name: {"step": [], "scores": [], "epoch": [], "last": ()} for s in sides}
    for r in range(epochs + 1):
        for side in sides if r % 2 == 0 else sides[::-1]:
            getattr(side, "switch", lambda: None)()  # a ThreadedEpoch's pool, untimed
            t0 = time.perf_counter()
            side.train_step()
            t1 = time.perf_counter()
            last = side.scores()
            t2 = time.perf_counter()
            if r:
                record[side.name]["step"].append((t1 - t0) * 1e3)
                record[side.name]["scores"].append((t2 - t1) * 1e3)
                record[side.name]["epoch"].append((t2 - t0) * 1e3)
                record[side.name]["last"] = last
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--thread-gain", action="store_true",
                        help="mgsparse at 1 thread against mgsparse at 2 (see the module)")
    args = parser.parse_args()
    keep_freed_memory()  # as mgsparse train does; malloc is the process's, so both sides'
    if args.thread_gain:
        return thread_gain(args.epochs, args.seed)
    config = cora_config(f"sparse.threads={args.threads}")
    mgsparse = MgsparseEpoch(config, args.seed)
    set_num_threads(args.threads)
    floor = FloorField(load_graph(config.dataset), recipe(config), args.seed)
    record = alternate([mgsparse, floor], args.epochs)
    placement = mgsparse.task.placement
    print(f"Cora GCN (configs/cora.yaml), {args.threads} thread(s), {args.epochs} epochs "
          f"alternating, round 0 untimed")
    for rows in ("training", "scored"):
        print(f"  mgsparse's {rows} rows: {placement.get(f'{rows} rows', 'the whole graph')}")
    print(f"  {'side':14}{'epoch ms':>10}{'IQR':>7}{'step ms':>9}{'scores ms':>11}"
          f"{'val loss':>10}{'test acc':>10}")
    medians = {}
    for name, r in record.items():
        q1, q3 = np.percentile(r["epoch"], [25, 75])
        medians[name] = statistics.median(r["epoch"])
        print(f"  {name:14}{medians[name]:>10.3f}{q3 - q1:>7.3f}"
              f"{statistics.median(r['step']):>9.3f}{statistics.median(r['scores']):>11.3f}"
              f"{r['last'][0]:>10.4f}{r['last'][3]:>10.2%}")
    print(f"  mgsparse / floor: {medians['mgsparse'] / medians['numpy floor']:.3f}x "
          f"(median epoch; target <= 1.1)")
    record_ratio("field floor", args.threads, medians["mgsparse"], medians["numpy floor"])


def thread_gain(epochs: int, seed: int) -> None:
    """Cora's epoch at 2 threads over its epoch at 1 (`--thread-gain`)."""
    sides = [ThreadedEpoch(cora_config(f"sparse.threads={n}"), n, seed) for n in (1, 2)]
    record = alternate(sides, epochs)
    print(f"Cora GCN (configs/cora.yaml), mgsparse's epoch at 1 and at 2 threads, {epochs} epochs "
          "alternating, round 0 untimed")
    medians = {}
    for name, r in record.items():
        medians[name] = statistics.median(r["epoch"])
        print(f"  {name:16}{medians[name]:>9.3f} ms  step {statistics.median(r['step']):.3f}"
              f"  scores {statistics.median(r['scores']):.3f}")
    one, two = (medians[s.name] for s in sides)
    same = record[sides[0].name]["last"] == record[sides[1].name]["last"]
    print(f"  2 threads / 1 thread: {two / one:.3f} (median epoch; never slower: <= 1.0); "
          f"scores bitwise equal: {same}")
    record_ratio("1 thread", 2, two, one)  # speed_table's gain column: one / two


if __name__ == "__main__":
    main()
