"""benchmarks/thread_gain.py alternates a 1-thread and a 2-thread copy of a run in one process:
each copy runs at its own thread count, round 0 is not timed, the order swaps every round,
and results that differ between the copies are reported. No timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

from mgsparse import kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import thread_gain  # a benchmark script, found through the path above


def recorder(log: list, name: str, result=(1.0,)):
    def run():
        log.append((name, kernels.get_num_threads()))
        return result
    return run


def test_each_copy_runs_at_its_count_alternating_with_round_zero_untimed():
    log: list = []
    with kernels.num_threads(1):
        ones, twos, equal = thread_gain.alternate(recorder(log, "one"), recorder(log, "two"), 3)
    assert log == [("one", 1), ("two", 2), ("two", 2), ("one", 1), ("one", 1), ("two", 2),
                   ("two", 2), ("one", 1)]
    assert len(ones) == len(twos) == 3 and equal


def test_a_result_that_depends_on_the_thread_count_is_reported():
    log: list = []
    with kernels.num_threads(1):
        *_, equal = thread_gain.alternate(recorder(log, "one", (1.0, 2.0)),
                                          recorder(log, "two", (1.0, 2.0000001)), 1)
    assert not equal
