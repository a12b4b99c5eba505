"""Pick a hyperparameter on the validation set: one config key over a grid of values, each
value trained over the same seeds, the pick made by validation accuracy alone.

A shipped recipe's free knob (SGC's weight decay, which Wu et al. tune per dataset with
hyperopt on validation accuracy) must be chosen without reading the test set. This script
trains every value with `--runs` seeds through the library (`make_task` + `fit`), prints for
each value the mean validation accuracy and loss of the kept (best-epoch) parameters, picks
the value of highest mean validation accuracy (ties: lowest mean validation loss, then the
smaller value, or the value named first), and only then prints the test accuracy of the pick. Test accuracies of the
other values are printed with `--show-test`, for the record, never for the pick.

    MGSPARSE_PLANETOID_URL=../shared/planetoid python benchmarks/sweep.py \\
        configs/cora-sgc.yaml optim.weight_decay 1e-6 2e-6 5e-6 1e-5 2e-5 5e-5 1e-4 --runs 10
"""

from __future__ import annotations

import argparse
import statistics
import sys

from mgsparse.config import load_config
from mgsparse.errors import MgsparseError
from mgsparse.run import fit, make_task


def scores(config_path: str, key: str, value: str, runs: int,
           sets: tuple[str, ...] = ()) -> dict[str, float]:
    """Mean validation accuracy, validation loss (at each run's best epoch) and test accuracy
    of `runs` seeds (with `train.folds`: of every fold) with `key=value`."""
    config = load_config(config_path, [*sets, f"{key}={value}", f"train.runs={runs}",
                                       "monitor.memory=false"])
    result = fit(config, make_task(config))
    best = [run.rows[run.best_epoch - 1] for run in result.runs]
    return {"val_acc": statistics.fmean(r.val_acc for r in best),
            "val_loss": statistics.fmean(r.val_loss for r in best),
            "test_acc": statistics.fmean(run.test_acc for run in result.runs),
            "test_std": statistics.pstdev(run.test_acc for run in result.runs),
            "runs": len(result.runs)}


def _order(value: str) -> tuple:
    """Last tie-break: the smaller number, or the earlier name."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("key", help="a config key, e.g. optim.weight_decay")
    parser.add_argument("values", nargs="+")
    parser.add_argument("--runs", type=int, default=10, help="seeds per value")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another override for every value, e.g. train.folds=10")
    parser.add_argument("--show-test", action="store_true",
                        help="also print every value's test accuracy (not used for the pick)")
    args = parser.parse_args()
    try:
        table = {v: scores(args.config, args.key, v, args.runs, tuple(args.set))
                 for v in args.values}
    except MgsparseError as e:  # a bad config, key or value: one line, as the CLI says it
        sys.exit(f"sweep: {e}")
    print(f"{args.key:>22} {'val acc':>9} {'val loss':>9}" + (" test acc" * args.show_test))
    for value, s in table.items():
        test = f" {100 * s['test_acc']:8.2f}" if args.show_test else ""
        print(f"{value:>22} {100 * s['val_acc']:9.2f} {s['val_loss']:9.4f}{test}")
    pick = min(table, key=lambda v: (-table[v]["val_acc"], table[v]["val_loss"], _order(v)))
    s = table[pick]
    print(f"picked on validation: {args.key}={pick} (val {100 * s['val_acc']:.2f}%); its test "
          f"accuracy over {s['runs']} runs: {100 * s['test_acc']:.2f} ± "
          f"{100 * s['test_std']:.2f}")


if __name__ == "__main__":
    main()
