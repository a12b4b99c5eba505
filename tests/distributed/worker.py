"""One rank of a partitioned run, launched by the failure tests under `mpiexec -n K`.

    python worker.py CONFIG PARTITIONS OUT.json [--set key=value ...] [--timeout S]
           [--hang-rank R --hang-epoch E]

It drives the library as `mgsparse train --partitions` does (a `PartitionedRun`), plus hooks
the CLI has no business offering: each rank writes its pid to OUT.json.rankR.pid after its
first epoch (so a test can signal or kill it), `--hang-rank` makes one rank stop answering
(sleep) before an epoch, so the others must give up at their collective deadline rather than
hang, `--fail-rank` makes one rank raise an error in an epoch, and `--slow-load-rank` makes
one rank take twice the deadline to load its part. Rank 0 writes the epoch
rows and the bytes each rank sent to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from mgsparse.config import load_config
from mgsparse.distributed.comm import JobError
from mgsparse.run.tasks.partitioned import PartitionedRun


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("partitions")
    ap.add_argument("out")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--hang-epoch", type=int, default=-1)
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--slow-load-rank", type=int, default=-1)
    args = ap.parse_args()
    if args.slow_load_rank >= 0:
        slow_load(args.slow_load_rank, 2 * args.timeout)
    config = load_config(args.config, [*args.set, "train.patience=null"])

    def report(e: BaseException) -> None:  # not flushed: abort_on_error must flush it
        print(f"rank {run.rank}: {type(e).__name__}: {e}", file=sys.stderr)

    def on_epoch(run_index, row, stats, alarms) -> None:
        if row.epoch == 1:  # training has started: tests may now signal or kill this rank
            Path(f"{args.out}.rank{run.rank}.pid").write_text(str(os.getpid()))
        if run.rank == args.hang_rank and row.epoch + 1 == args.hang_epoch:
            time.sleep(3600)
        if run.rank == args.fail_rank and row.epoch == 2:
            raise RuntimeError(f"rank {run.rank} fails in epoch 2")

    try:
        with PartitionedRun(config, args.partitions, timeout=args.timeout) as run:
            result = run.fit(on_epoch, report=report)  # the hooks run on every rank
    except JobError as e:  # agreed by every rank: rank 0 says it, all leave with its code
        if e.rank == 0:
            print(f"rank 0: {e}", file=sys.stderr, flush=True)
        sys.exit(e.exit_code)
    sent = run.comm.comm.gather(run.comm.bytes_sent, root=0)
    if run.rank == 0:
        rows = [row.as_dict() for row in result.runs[0].rows]
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "bytes_sent": sent, "interrupted": result.interrupted,
                       "signum": run.signum}, f)

def slow_load(rank: int, seconds: float) -> None:
    """Rank `rank` sleeps `seconds` before loading its part (a slow disk, a loaded machine)."""
    from mgsparse.run.tasks import partitioned

    load = partitioned.load_problem

    def slowly(root, comm, config):
        if comm.rank == rank:
            time.sleep(seconds)
        return load(root, comm, config)

    partitioned.load_problem = slowly


if __name__ == "__main__":
    main()
