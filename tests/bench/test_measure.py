"""The helpers every benchmark shares: the step timer, the resident set, the settings check."""

from __future__ import annotations

import time

import pytest

from mgsparse.bench.measure import check_settings, rss_bytes, time_ms
from mgsparse.errors import ConfigError


def test_the_step_timer_times_repeat_calls_after_warmup_untimed_ones():
    calls = []

    def nap():
        calls.append(len(calls))
        time.sleep(0.005)

    times = time_ms(nap, repeat=3, warmup=2)
    assert len(calls) == 5 and len(times) == 3
    assert all(5 <= t < 1_000 for t in times)  # a 5 ms nap reads as >= 5, so milliseconds


def test_the_resident_set_grows_with_a_touched_buffer():
    before = rss_bytes()
    buffer = bytearray(64 * 2**20)
    buffer[:: 4096] = b"x" * len(buffer[:: 4096])  # touch every page
    assert rss_bytes() >= before + 32 * 2**20
    del buffer


@pytest.mark.parametrize("repeat, warmup, tolerance, budget, needle", [
    (0, 0, 1e-4, 1.0, "repeat >= 1"),
    (1, -1, 1e-4, 1.0, "warmup >= 0"),
    (1, 0, 0.0, 1.0, "tolerance must be > 0"),
    (1, 0, float("nan"), 1.0, "tolerance must be > 0"),
    (1, 0, 1e-4, 0.0, "memory budget must be > 0 MB"),
])
def test_impossible_settings_are_usage_errors(repeat, warmup, tolerance, budget, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        check_settings(repeat, warmup, tolerance, budget)
    assert info.value.exit_code == 2


def test_possible_settings_pass():
    check_settings(1, 0, 1e-4, 0.5)
