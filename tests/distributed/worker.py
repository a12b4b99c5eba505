"""One rank of a distributed GCN run, launched by the tests under `mpiexec -n K`.

    python worker.py CONFIG PARTITIONS OUT.json [--set key=value ...] [--epochs N]
           [--timeout S] [--hang-rank R --hang-epoch E]

Each rank writes its pid to OUT.json.rankR.pid after its first epoch. Rank 0 writes the
per-epoch rows (loss, grad_norm, val_loss, accuracies) and the bytes each
rank sent to OUT.json. `--hang-rank` makes one rank stop answering (sleep) at an epoch: the
others must give up at their collective deadline, not hang.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from mgsparse.config import load_config
from mgsparse.distributed import Comm, StopSignals, abort_on_error, build_trainer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("partitions")
    ap.add_argument("out")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--hang-epoch", type=int, default=-1)
    args = ap.parse_args()
    comm = Comm(timeout=args.timeout)

    def report(e: BaseException) -> None:
        print(f"rank {comm.rank}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    with abort_on_error(comm, report), StopSignals(comm) as stop:
        config = load_config(args.config, args.set)
        trainer = build_trainer(config, args.partitions, comm)
        rows = []
        for epoch in range(1, (args.epochs or config.train.epochs) + 1):
            if comm.rank == args.hang_rank and epoch == args.hang_epoch:
                time.sleep(3600)
            loss, grad_norm = trainer.train_step()
            rows.append({"epoch": epoch, "loss": loss, "grad_norm": grad_norm,
                         **trainer.evaluate()})
            if epoch == 1:  # training has started: tests may now signal or kill this rank
                Path(f"{args.out}.rank{comm.rank}.pid").write_text(str(os.getpid()))
            if stop.should_stop():
                break
        sent = comm.comm.gather(comm.bytes_sent, root=0)
        if comm.rank == 0:
            with open(args.out, "w") as f:
                json.dump({"rows": rows, "bytes_sent": sent, "interrupted": stop.requested
                           or len(rows) < (args.epochs or config.train.epochs)}, f)


if __name__ == "__main__":
    main()
