"""What default monitoring costs: whole GCN (and GAT) runs on Cora with memory monitoring on
and off, alternating run by run in one process, and the ratio of their mean epoch times (the mean,
not the median: tracing costs only on the sampled epochs, which a median would hide).

Monitoring traces allocations with tracemalloc on sampled epochs only (the first three and
every `monitor.log_every`-th), so its cost is spread over the run; the target is <= 1.10x.

    MGSPARSE_PLANETOID_URL=../shared/planetoid python benchmarks/train_cora.py
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from mgsparse.config import load_config
from mgsparse.run import fit, make_task

ROOT = Path(__file__).resolve().parents[1]


def mean_epoch_ms(config_path: Path, memory: bool, epochs: int) -> float:
    overrides = [f"monitor.memory={str(memory).lower()}", f"train.epochs={epochs}",
                 "train.patience=null"]
    config = load_config(config_path, overrides)
    result = fit(config, make_task(config))
    return statistics.fmean(s.epoch_ms for r in result.runs for s in r.stats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="alternating on/off run pairs")
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    print(f"{'config':<16}{'off ms':>10}{'on ms':>10}{'on/off':>9}   (mean epoch, median over "
          f"{args.pairs} alternating run pairs of {args.epochs} epochs; GAT: a fifth)")
    for name in ("cora.yaml", "cora-gat.yaml"):
        path = ROOT / "configs" / name
        epochs = args.epochs if name == "cora.yaml" else max(args.epochs // 5, 20)
        mean_epoch_ms(path, True, 5)  # warm-up: download cache, allocator, imports
        off, on = [], []
        for _ in range(args.pairs):
            off.append(mean_epoch_ms(path, False, epochs))
            on.append(mean_epoch_ms(path, True, epochs))
        ratios = [b / a for a, b in zip(off, on)]
        print(f"{name:<16}{statistics.median(off):>10.2f}{statistics.median(on):>10.2f}"
              f"{statistics.median(ratios):>8.2f}x")


if __name__ == "__main__":
    main()
