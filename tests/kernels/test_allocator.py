"""keep_freed_memory: a fresh array of a size just freed reuses the freed pages (no page fault
per 4 KB page), and a C library without mallopt is left alone."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from mgsparse.kernels import allocator

FAULTS = """
import resource, sys
import numpy as np
from mgsparse.kernels.allocator import keep_freed_memory
took = keep_freed_memory() if sys.argv[1] == "keep" else None
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):  # 2 MB arrays: under numpy's huge-page size, 512 pages each
    a = np.ones(1 << 19, dtype=np.float32)
    b = a * 2.0
    del a, b
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _minor_faults(mode: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_arrays_are_reused_without_page_faults():
    """200 arrays of 2 MB: about 200 × 512 page faults by default, almost none kept."""
    _, default = _minor_faults("default")
    took, kept = _minor_faults("keep")
    if took != "True":
        pytest.skip("this C library has no mallopt (not glibc)")
    assert default > 20_000
    assert kept < default / 20, (kept, default)


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch):
    def no_library(name):
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert allocator.keep_freed_memory() is False
