"""A full-batch epoch run from its tape against the same epoch run eagerly, alternating in
one process, with every epoch's loss and scores compared bitwise.

Both sides are `mgsparse train`'s epoch for a Cora config (floor_field.py's `MgsparseEpoch`:
`train_epoch` with the task's replay, then `task.evaluate`), built from the same seed; one
with `train.replay: true` (the default: once two epochs recorded the same program, the step
and the scores run from their tapes, `mgsparse/run/replay.py`), one with `train.replay:
false` (every op through the model's Python). Round 0 and the first `--warm` rounds (the
recordings) are untimed; the order is swapped every round.

    MGSPARSE_PLANETOID_URL=<planetoid folder> python benchmarks/replay.py \\
        [--config configs/cora.yaml] [--epochs 300] [--threads 1] [--set model.kind=gat]

Prints each side's median epoch, step and scores in ms, tape/eager, and whether the two runs'
losses and scores were bitwise equal every epoch (they must be).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from floor_field import MgsparseEpoch

from mgsparse.config import load_config
from mgsparse.kernels.allocator import keep_freed_memory
from mgsparse.sparse import set_num_threads

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cora.yaml"


class Side(MgsparseEpoch):
    def __init__(self, config_path: Path, replay: bool, overrides: list[str], threads: int):
        config = load_config(config_path, [*overrides, f"train.replay={str(replay).lower()}",
                                           f"sparse.threads={threads}", "monitor.memory=false"])
        super().__init__(config)
        self.name = "tape" if replay else "eager"
        self.losses: list[tuple] = []  # every epoch's (loss, val loss, train/val/test acc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--warm", type=int, default=3, help="untimed rounds after round 0")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    keep_freed_memory()
    set_num_threads(args.threads)
    sides = [Side(args.config, replay, args.overrides, args.threads) for replay in (True, False)]
    times = {s.name: {"step": [], "scores": [], "epoch": []} for s in sides}
    for r in range(args.epochs + args.warm + 1):
        for side in sides if r % 2 == 0 else sides[::-1]:
            t0 = time.perf_counter()
            loss = side.train_step()
            t1 = time.perf_counter()
            scores = side.scores()
            t2 = time.perf_counter()
            side.losses.append((loss, *scores))
            if r > args.warm:
                for key, ms in (("step", t1 - t0), ("scores", t2 - t1), ("epoch", t2 - t0)):
                    times[side.name][key].append(ms * 1e3)
    tape, eager = sides
    replays = {k: v[2].replaying for k, v in tape.task._replays.items()}
    print(f"{args.config.name} {' '.join(args.overrides)}: {args.epochs} epochs at "
          f"{args.threads} thread(s), alternating; tapes running (step, scores): "
          f"{replays.get(True)}, {replays.get(False)}")
    medians = {}
    for name, t in times.items():
        medians[name] = statistics.median(t["epoch"])
        print(f"  {name:6} epoch {medians[name]:8.3f} ms   step {statistics.median(t['step']):.3f}"
              f"   scores {statistics.median(t['scores']):.3f}")
    print(f"  tape / eager: {medians['tape'] / medians['eager']:.3f} (median epoch); losses "
          f"and scores bitwise equal every epoch: {tape.losses == eager.losses}")


if __name__ == "__main__":
    main()
