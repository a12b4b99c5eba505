"""One rank of a partitioned run, launched by the failure tests under `mpiexec -n K`.

    python worker.py CONFIG PARTITIONS OUT.json [--set key=value ...] [--timeout S]
           [--hang-rank R --hang-epoch E]

It drives the library as `mgsparse train --partitions` does (a `DistributedGraphTask` in the
one loop), plus two hooks the CLI has no business offering: each rank writes its pid to
OUT.json.rankR.pid after its first epoch (so a test can signal or kill it), and
`--hang-rank` makes one rank stop answering (sleep) before an epoch, so the others must give
up at their collective deadline rather than hang. Rank 0 writes the epoch rows and the
bytes each rank sent to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from mgsparse.config import load_config
from mgsparse.distributed import Comm, StopSignals, abort_on_error
from mgsparse.run.loop import fit
from mgsparse.run.tasks.partitioned import DistributedGraphTask


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("partitions")
    ap.add_argument("out")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--hang-epoch", type=int, default=-1)
    args = ap.parse_args()
    comm = Comm(timeout=args.timeout)

    def report(e: BaseException) -> None:
        print(f"rank {comm.rank}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def on_epoch(run_index, row, stats, alarms) -> None:
        if row.epoch == 1:  # training has started: tests may now signal or kill this rank
            Path(f"{args.out}.rank{comm.rank}.pid").write_text(str(os.getpid()))
        if comm.rank == args.hang_rank and row.epoch + 1 == args.hang_epoch:
            time.sleep(3600)

    with abort_on_error(comm, report), StopSignals(comm) as stop:
        config = load_config(args.config, [*args.set, "train.patience=null"])
        task = DistributedGraphTask(config, args.partitions, comm)
        result = fit(config, task, on_epoch, should_stop=stop.should_stop)
    sent = comm.comm.gather(comm.bytes_sent, root=0)
    if comm.rank == 0:
        rows = [row.as_dict() for row in result.runs[0].rows]
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "bytes_sent": sent, "interrupted": result.interrupted}, f)


if __name__ == "__main__":
    main()
