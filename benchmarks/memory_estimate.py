"""The memory budget's estimate of a training step against the step's measured peak.

For each case the task is placed as the config says, the budget's estimate is taken (one
probe forward, `mgsparse.run.budget.estimate_step_bytes`), then two warm-up steps run and a
third is measured as every training epoch is (held + traced transient). Target: the estimate
within ±25% of the measured peak (GCN; attention's backward allocates more than it counts).

    MGSPARSE_PLANETOID_URL=../shared/planetoid python benchmarks/memory_estimate.py
"""

from __future__ import annotations

import numpy as np

from mgsparse.config import config_from_dict
from mgsparse.run import build_optimizer, make_task, train_epoch
from mgsparse.run.monitor import MB, EpochMemory, run_nbytes
from mgsparse.run.task import shuffle_generator

# placement words as the table spells them: T/S = training/scored rows on receptive fields
WORD = {"receptive": "field", "built": "unbuilt", "edge": "edges"}

CASES = (
    ("Cora, sparse operands", {"dataset": {"name": "cora"}}),
    ("Cora, dense operands", {"dataset": {"name": "cora"}, "sparse": {"sparsity_threshold": 0}}),
    ("synthetic 100k nodes", {"dataset": {"name": "synthetic", "num_nodes": 100_000,
                                          "num_features": 64}}),
    ("Cora, GAT (8 heads)", {"dataset": {"name": "cora"}, "model": {"kind": "gat"}}),
    ("synthetic 100k, all sparse", {"dataset": {"name": "synthetic", "num_nodes": 100_000,
                                                "num_features": 64},
                                    "sparse": {"sparsity_threshold": 1.0}}),
)


def measured_peak(task, config) -> float:
    model = task.build_model(np.random.default_rng(config.train.seed))
    optimizer = build_optimizer(config.optim, model)
    shuffle, clip = shuffle_generator(0), config.train.grad_clip_norm
    for _ in range(2):
        train_epoch(model, optimizer, task.batches(model, shuffle), clip)
    memory = EpochMemory(True, 1)
    memory.start()
    train_epoch(model, optimizer, task.batches(model, shuffle), clip)
    return memory.end(run_nbytes(task.operands().values(), model, optimizer))[1]


def main() -> None:
    print(f"{'case':<28}{'placement':<40}{'estimate MB':>12}{'measured MB':>12}{'est/meas':>9}")
    for name, raw in CASES:
        config = config_from_dict({**raw, "monitor": {"memory_budget_mb": None}})
        task = make_task(config)
        placed = ", ".join(f"{k[0].upper()}:{WORD.get(v.split()[0], v.split()[0])}"
                           for k, v in task.placement.items())
        estimate = task.estimate_bytes / MB
        measured = measured_peak(task, config)
        print(f"{name:<28}{placed:<40}{estimate:>12.1f}{measured:>12.1f}"
              f"{estimate / measured:>8.2f}x")


if __name__ == "__main__":
    main()
