"""ComplEx knowledge-graph completion in PyKEEN and in mgsparse, the same recipe side by side.

The recipe, identical on both sides: ComplEx of complex rank `--dim` (2·dim reals per entity
and relation), the reciprocal setting (PyKEEN's `create_inverse_triples=True`, mgsparse's
`kg.reciprocal: true`), 1-N training as PyKEEN's LCWA loop does it (each distinct (head,
relation) of the training triples, both directions, scored against every entity, binary
cross-entropy against its multi-hot training tails, no label smoothing: mgsparse's
`kg.training: kvsall`), Adam at `--lr`, `--batch` queries a step, embeddings initialised
normal with std 1e-3, no regulariser (the two libraries' regularisers count different
things, so neither side gets one). Evaluation: filtered ranks of every test triple's tail and
head among all entities, other true triples of train, valid and test set aside, ties ranked
realistically (PyKEEN's `both.realistic.inverse_harmonic_mean_rank`, mgsparse's
`run.ranking`); test MRR at the epoch of best validation MRR, checked every `--eval-every`.

Both train in one process, epoch by epoch alternating: PyKEEN's `train()` runs all its
epochs, and its `post_epoch` callback runs one mgsparse epoch and, when due, both
evaluations. An epoch's time is the training pass only: PyKEEN's is the wall time between
callbacks less what the callback spent, mgsparse's the time of its `train_epoch`. The median
over epochs is reported (PyKEEN's first epoch, which carries its setup, is dropped). One
thread: torch.set_num_threads(1) and mgsparse.sparse.set_num_threads(1).

    PYTHONPATH=. python benchmarks/compare_pykeen.py --kg-url <folder or URL> \\
        [--dataset umls kinships] [--epochs 100]

The folder holds <dataset>/{train,valid,test}.txt (MGSPARSE_KG_URL's layout). Without torch
and pykeen (pip install 'mgsparse[compare]') it says so and exits 0.
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from mgsparse.config import config_from_dict
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.run import build_optimizer, train_epoch
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.kg import KgTask, load_triples
from mgsparse.sparse import set_num_threads

INIT_STD = 1e-3


def frameworks_available() -> bool:
    try:
        import pykeen  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class MgsparseSide:
    """mgsparse's KG task on the recipe, driven an epoch at a time."""

    def __init__(self, dataset: str, url: str, root: str, args, seed: int):
        self.config = config_from_dict({
            "dataset": {"name": dataset, "url": url, "root": root},
            "kg": {"scorer": "complex", "dim": args.dim, "reciprocal": True,
                   "training": "kvsall", "regularizer": "none", "init_scale": INIT_STD,
                   "batch_size": args.batch, "eval_batch": 1024},
            "optim": {"name": "adam", "lr": args.lr, "weight_decay": 0},
            "train": {"grad_clip_norm": None, "seed": seed}}, "compare_pykeen")
        self.task = KgTask(self.config, load_triples(self.config))
        self.model = self.task.build_model(np.random.default_rng(seed))
        self.optimizer = build_optimizer(self.config.optim, self.model)
        self.shuffle = shuffle_generator(seed)

    def epoch(self) -> float:
        start = time.perf_counter()
        self.model.train()
        train_epoch(self.model, self.optimizer, self.task.batches(self.model, self.shuffle), None)
        return time.perf_counter() - start

    def mrr(self) -> tuple[float, float]:
        scores = self.task.evaluate(self.model)
        return scores.val_mrr, scores.test_mrr


class PykeenSide:
    """PyKEEN's ComplEx, LCWA training loop and rank-based evaluator on the same files."""

    def __init__(self, folder: Path, args, seed: int):
        import torch
        from pykeen.evaluation import RankBasedEvaluator
        from pykeen.losses import BCEWithLogitsLoss
        from pykeen.models import ComplEx
        from pykeen.training import LCWATrainingLoop
        from pykeen.triples import TriplesFactory

        torch.manual_seed(seed)
        self.train_tf = TriplesFactory.from_path(folder / "train.txt", create_inverse_triples=True)
        maps = {"entity_to_id": self.train_tf.entity_to_id,
                "relation_to_id": self.train_tf.relation_to_id}
        self.valid = TriplesFactory.from_path(folder / "valid.txt", **maps).mapped_triples
        self.test = TriplesFactory.from_path(folder / "test.txt", **maps).mapped_triples
        init = functools.partial(torch.nn.init.normal_, std=INIT_STD)
        self.model = ComplEx(triples_factory=self.train_tf, embedding_dim=args.dim,
                             loss=BCEWithLogitsLoss(), regularizer=None,
                             entity_initializer=init, relation_initializer=init,
                             random_seed=seed)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.loop = LCWATrainingLoop(model=self.model, triples_factory=self.train_tf,
                                     optimizer=self.optimizer)
        self.evaluator = RankBasedEvaluator(filtered=True)
        self.batch = args.batch

    def mrr(self) -> tuple[float, float]:
        known = [self.train_tf.mapped_triples, self.valid, self.test]
        out = []
        for split in (self.valid, self.test):
            result = self.evaluator.evaluate(self.model, split, batch_size=1024, use_tqdm=False,
                                             additional_filter_triples=known)
            out.append(float(result.get_metric("both.realistic.inverse_harmonic_mean_rank")))
        self.model.train()
        return out[0], out[1]

    def train(self, epochs: int, callback) -> None:
        self.loop.train(triples_factory=self.train_tf, num_epochs=epochs, batch_size=self.batch,
                        use_tqdm=False, use_tqdm_batch=False, callbacks=[callback],
                        pin_memory=False)


def alternate(dataset: str, args, root: str, seed: int) -> dict:
    """Both sides `args.epochs` epochs, alternating inside PyKEEN's post_epoch callback."""
    from pykeen.training.callbacks import TrainingCallback

    mgs = MgsparseSide(dataset, args.kg_url, root, args, seed)
    pyk = PykeenSide(Path(args.kg_url) / dataset, args, seed)
    out = {"mgsparse": [], "pykeen": [], "best": {"mgsparse": (-1.0, 0.0, 0),
                                                   "pykeen": (-1.0, 0.0, 0)}}

    class Alternate(TrainingCallback):
        def __init__(self):
            super().__init__()
            self.resumed = time.perf_counter()

        def post_epoch(self, epoch: int, epoch_loss: float, **kwargs) -> None:
            out["pykeen"].append(time.perf_counter() - self.resumed)
            out["mgsparse"].append(mgs.epoch())
            if epoch % args.eval_every == 0 or epoch == args.epochs:
                for name, side in (("mgsparse", mgs), ("pykeen", pyk)):
                    val, test = side.mrr()
                    if val > out["best"][name][0]:
                        out["best"][name] = (val, test, epoch)
            self.resumed = time.perf_counter()

    collect, spent = gc.collect, []

    def timed_collect(*a, **k):  # PyKEEN's loop collects garbage after every epoch
        start = time.perf_counter()
        try:
            return collect(*a, **k)
        finally:
            spent.append(time.perf_counter() - start)

    gc.collect = timed_collect
    try:
        pyk.train(args.epochs, Alternate())
    finally:
        gc.collect = collect
    out["pykeen"] = out["pykeen"][1:]  # the first carries PyKEEN's setup
    out["gc"] = statistics.median(spent) if spent else 0.0
    return out


def report(dataset: str, runs: list[dict]) -> None:
    med = {s: statistics.median(t for r in runs for t in r[s]) for s in ("mgsparse", "pykeen")}
    print(f"{dataset}: epoch (training pass) median, 1 thread: mgsparse {med['mgsparse']:.4f} s, "
          f"PyKEEN {med['pykeen']:.4f} s; mgsparse / PyKEEN = {med['mgsparse'] / med['pykeen']:.3f}")
    collect = statistics.median(r["gc"] for r in runs)
    print(f"  of PyKEEN's epoch, its gc.collect() {collect:.4f} s; without it mgsparse / "
          f"PyKEEN = {med['mgsparse'] / (med['pykeen'] - collect):.3f}")
    for name in ("mgsparse", "pykeen"):
        tests = [r["best"][name][1] for r in runs]
        picks = ", ".join(f"val {r['best'][name][0]:.4f} @ {r['best'][name][2]}" for r in runs)
        spread = f" ± {statistics.stdev(tests):.4f}" if len(tests) > 1 else ""
        print(f"  test MRR, {name + ':':9} {statistics.mean(tests):.4f}{spread}  ({picks})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kg-url", default=os.environ.get("MGSPARSE_KG_URL"),
                        help="folder of <dataset>/{train,valid,test}.txt (default: "
                             "$MGSPARSE_KG_URL)")
    parser.add_argument("--dataset", nargs="+", choices=["umls", "kinships", "nations"],
                        default=["umls"])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    if not frameworks_available():
        print("compare_pykeen: torch and pykeen are not installed (pip install "
              "'mgsparse[compare]'); nothing to compare")
        return
    if not args.kg_url or not Path(args.kg_url).is_dir():
        parser.error("--kg-url (or MGSPARSE_KG_URL) must name a local folder of "
                     "<dataset>/{train,valid,test}.txt")
    import pykeen.version
    import torch

    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    logging.getLogger("torch_max_mem").setLevel(logging.ERROR)  # "only cuda is safe" notes

    keep_freed_memory()
    torch.set_num_threads(1)
    set_num_threads(1)
    print(f"torch {torch.__version__}, pykeen {pykeen.version.get_version()}; ComplEx dim "
          f"{args.dim}, LCWA/kvsall BCE, batch {args.batch}, Adam lr {args.lr}, "
          f"{args.epochs} epochs x {args.runs} run(s), alternating epoch by epoch")
    with tempfile.TemporaryDirectory() as root:
        for dataset in args.dataset:
            report(dataset, [alternate(dataset, args, root, seed) for seed in range(args.runs)])


if __name__ == "__main__":
    main()
