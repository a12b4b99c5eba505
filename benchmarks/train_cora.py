"""Median time of one GCN training epoch and one evaluation pass on Cora, monitoring on and off.

A training epoch is forward + masked cross-entropy + backward + gradient clipping + Adam step;
"monitoring on" traces allocations with tracemalloc as `mgsparse train` does by default.

    MGSPARSE_PLANETOID_URL=../shared/planetoid python benchmarks/train_cora.py
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np

from mgsparse.config import load_config
from mgsparse.problem import build_model, build_optimizer, load_graph, prepare
from mgsparse.train import evaluate, train_step

ROOT = Path(__file__).resolve().parents[1]


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "cora.yaml"))
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    config = load_config(args.config)
    problem = prepare(config, load_graph(config.dataset))
    model = build_model(config.model, problem, np.random.default_rng(0))
    optimizer = build_optimizer(config.optim, model)
    clip = config.train.grad_clip_norm

    def step():
        train_step(model, problem, optimizer, clip)

    def evaluation():
        evaluate(model, problem)

    for _ in range(20):  # warm-up: caches, allocator, optimizer state
        step()
        evaluation()
    rows = []
    for monitoring in (False, True):
        if monitoring:
            tracemalloc.start()
        rows.append((monitoring, median_ms(step, args.repeat), median_ms(evaluation, args.repeat)))
        if monitoring:
            tracemalloc.stop()
    print(f"GCN on {config.dataset.name}: {problem.num_nodes} nodes, "
          f"Â {problem.placement['adjacency']}, features {problem.placement['features']}")
    print(f"{'monitoring':<12}{'train epoch ms':>16}{'eval pass ms':>14}")
    for monitoring, train_ms, eval_ms in rows:
        print(f"{'on' if monitoring else 'off':<12}{train_ms:>16.3f}{eval_ms:>14.3f}")
    off, on = rows[0][1], rows[1][1]
    print(f"monitoring overhead on a training epoch: {on / off:.2f}x")


if __name__ == "__main__":
    main()
