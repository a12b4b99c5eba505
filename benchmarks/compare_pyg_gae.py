"""A graph auto-encoder on Cora in PyTorch Geometric and in mgsparse, epoch by epoch in one process.

The same recipe on both sides (Kipf & Welling's GAE, PyG's examples/autoencoder.py): a GCN
encoder (input -> 32, ReLU, -> 16, no dropout), the inner-product decoder, Adam lr 0.01, no
weight decay, no clipping; 5% / 10% of the edges held out for validation / test with as many
non-edges; each epoch one full-batch step on the training edges and as many freshly sampled
non-edges (BCE), then AUC and AP of the validation and test pairs; test scores at the epoch
of best validation AUC. Raw binary features, as Kipf's code.

- PyG: `torch_geometric.nn.GAE(encoder)` with two `GCNConv(cached=True)`, the split made by
  `torch_geometric.transforms.RandomLinkSplit`, `GAE.recon_loss` (which draws its negatives
  with `negative_sampling` every call);
- mgsparse: the task `mgsparse train configs/cora-gae.yaml` runs (`task: link`, its own
  leak-free split, mgsparse/run/tasks/links.py), stepped by the library's `train_epoch`.

Both score with the same numpy AUC/AP (`mgsparse.run.metrics`), so the timing compares the
frameworks rather than sklearn against numpy. The sides alternate epoch by epoch (which goes
first turns each epoch), so both see the same machine; `--threads` sets torch's and
mgsparse's thread counts.

    python benchmarks/compare_pyg_gae.py [--epochs 200] [--runs 3] [--threads 1]

Without torch and torch_geometric it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from mgsparse.config import config_from_dict
from mgsparse.data import load_dataset
from mgsparse.run import build_optimizer, train_epoch
from mgsparse.run.metrics import average_precision, roc_auc
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.links import LinkTask
from mgsparse.sparse import set_num_threads

RECIPE = {"hidden": 32, "latent": 16, "lr": 0.01, "val": 0.05, "test": 0.10}


def frameworks_available() -> bool:
    try:
        import torch  # noqa: F401
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True


def scores(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    """(AUC, AP) of positive against negative logits."""
    labels = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
    s = np.r_[pos, neg].astype(np.float64)
    return roc_auc(labels, s), average_precision(labels, s)


class MgsparseSide:
    """The link task as `mgsparse train configs/cora-gae.yaml` builds it."""

    name = "mgsparse"

    def __init__(self, graph, seed: int):
        config = config_from_dict({
            "task": "link", "dataset": {"name": "cora", "normalize_features": False},
            "model": {"kind": "gcn", "hidden": RECIPE["hidden"], "dropout": 0.0},
            "link": {"latent": RECIPE["latent"], "val": RECIPE["val"], "test": RECIPE["test"],
                     "seed": seed},
            "optim": {"name": "adam", "lr": RECIPE["lr"], "weight_decay": 0.0},
            "train": {"grad_clip_norm": None, "seed": seed}}, "compare_pyg_gae")
        self.task = LinkTask(config, graph)
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = build_optimizer(config.optim, self.model)
        self.shuffle = shuffle_generator(seed)

    def epoch(self) -> tuple[float, float, float]:
        """(val AUC, test AUC, test AP) after one training step."""
        train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle),
                    None)
        s = self.task.evaluate(self.model)
        return s.val_auc, s.test_auc, s.test_ap


class PygSide:
    """`torch_geometric.nn.GAE` on a two-layer GCNConv encoder, `RandomLinkSplit`'s split;
    the features dense, or a torch sparse CSR tensor (`sparse_x`)."""

    name = "PyG"

    def __init__(self, graph, seed: int, sparse_x: bool = True):
        import torch
        import torch_geometric.transforms as T
        from torch_geometric.data import Data
        from torch_geometric.nn import GAE, GCNConv

        torch.manual_seed(seed)
        self.torch = torch
        x = graph.x.toarray() if hasattr(graph.x, "toarray") else np.asarray(graph.x)
        data = Data(x=torch.from_numpy(x.astype(np.float32)),
                    edge_index=torch.from_numpy(np.asarray(graph.edge_index, np.int64)))
        split = T.RandomLinkSplit(num_val=RECIPE["val"], num_test=RECIPE["test"],
                                  is_undirected=True, split_labels=True,
                                  add_negative_train_samples=False)
        self.train, self.val, self.test = split(data)
        if sparse_x:  # the stored entries only, as mgsparse holds Cora's 1.3%-dense features
            self.train.x = self.train.x.to_sparse_csr()
        self.setup = "sparse CSR x" if sparse_x else "dense x"

        class Encoder(torch.nn.Module):
            def __init__(self, f: int):
                super().__init__()
                self.conv1 = GCNConv(f, RECIPE["hidden"], cached=True)
                self.conv2 = GCNConv(RECIPE["hidden"], RECIPE["latent"], cached=True)

            def forward(self, x, edge_index):
                return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

        self.model = GAE(Encoder(x.shape[1]))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=RECIPE["lr"])

    def epoch(self) -> tuple[float, float, float]:
        torch, model, train = self.torch, self.model, self.train
        model.train()
        self.optimizer.zero_grad()
        z = model.encode(train.x, train.edge_index)
        loss = model.recon_loss(z, train.pos_edge_label_index)
        loss.backward()
        self.optimizer.step()
        model.eval()
        with torch.no_grad():
            z = model.encode(train.x, train.edge_index)  # the training graph only
            out = [model.decoder(z, d, sigmoid=False).numpy() for d in (
                self.val.pos_edge_label_index, self.val.neg_edge_label_index,
                self.test.pos_edge_label_index, self.test.neg_edge_label_index)]
        val_auc, _ = scores(out[0], out[1])
        return (val_auc, *scores(out[2], out[3]))


def best_pyg(graph, seed: int, trials: int = 4) -> PygSide:
    """PyG with the faster features on this machine, dense or sparse (median of a few epochs
    after the first, which builds the cached Â)."""
    times = {}
    for sparse_x in (False, True):
        side = PygSide(graph, seed, sparse_x)
        ms = []
        for _ in range(trials + 1):
            t0 = time.perf_counter()
            side.epoch()
            ms.append(time.perf_counter() - t0)
        times[sparse_x] = statistics.median(ms[1:])
    return PygSide(graph, seed, min(times, key=times.get))


def alternate(graph, epochs: int, seed: int) -> dict[str, dict]:
    """Both sides from `seed`, one epoch each in turn (the first side alternating); epoch
    times in ms, test AUC and AP at the best validation AUC."""
    sides = [best_pyg(graph, seed), MgsparseSide(graph, seed)]
    record = {s.name: {"ms": [], "best": -1.0, "test": (0.0, 0.0),
                       "setup": getattr(s, "setup", "")} for s in sides}
    for epoch in range(epochs):
        for side in sides[epoch % 2:] + sides[:epoch % 2]:
            t0 = time.perf_counter()
            val_auc, test_auc, test_ap = side.epoch()
            r = record[side.name]
            r["ms"].append((time.perf_counter() - t0) * 1e3)
            if val_auc > r["best"]:
                r["best"], r["test"] = val_auc, (test_auc, test_ap)
    return record


def report(runs: list[dict]) -> None:
    medians = {name: statistics.median(ms for r in runs for ms in r[name]["ms"][1:])
               for name in runs[0]}
    for name, median in medians.items():
        auc = np.mean([r[name]["test"][0] for r in runs])
        ap = np.mean([r[name]["test"][1] for r in runs])
        setup = ", ".join(sorted({r[name]["setup"] for r in runs} - {""}))
        print(f"  {name + ':':<10} epoch median {median:7.2f} ms   test AUC {auc:.4f}  AP {ap:.4f}"
              + (f"   ({setup})" if setup else ""))
    print(f"  epoch-time ratio mgsparse / PyG: {medians['mgsparse'] / medians['PyG']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    if not frameworks_available():
        print("compare_pyg_gae: torch and torch_geometric are not installed "
              "(pip install 'mgsparse[compare]'); nothing to compare")
        return
    import torch
    import torch_geometric

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    graph = load_dataset("cora", normalize_features=False)
    print(f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}; GAE on "
          f"Cora, {args.epochs} epochs x {args.runs} run(s), sides alternating epoch by epoch")
    for threads in args.threads:
        torch.set_num_threads(threads)
        set_num_threads(threads)
        print(f"{threads} thread(s):")
        report([alternate(graph, args.epochs, seed) for seed in range(args.runs)])


if __name__ == "__main__":
    main()
