"""Fresh arrays without fresh pages: glibc's malloc asked to keep freed memory for reuse.

A training step allocates and frees dozens of arrays of a few MB (a batch of graphs:
3,800 nodes × 64 float32 features is 1 MB; an evaluation batch 8 MB). glibc serves an
allocation above its mmap threshold (128 KB at start, raised adaptively up to 32 MB) with
new pages from the kernel and returns them on free; memory freed at the top of the heap is
given back above the trim threshold. Either way the next array of that size pays a page
fault per 4 KB page on first write. `/usr/bin/time python -m mgsparse train
configs/nci1-gin.yaml --epochs 4 --quiet` printed 3.6 s user and 1.1-1.4 s system time with
glibc's defaults, 3.5-3.7 s user and 0.14-0.18 s system with the thresholds below (a loaded
2-core machine, two runs each).

`keep_freed_memory` raises both thresholds once per process: arrays up to `mmap_mb` come
from the heap, and up to `trim_mb` of freed heap is kept for the next arrays. The price is
memory the process keeps after a peak (at most `trim_mb` more than it holds). It only asks:
on a C library without `mallopt` (macOS, musl) it changes nothing and returns False.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h> parameter numbers
MMAP_MB, TRIM_MB = 32, 128


def keep_freed_memory(mmap_mb: int = MMAP_MB, trim_mb: int = TRIM_MB) -> bool:
    """Ask malloc to serve arrays up to `mmap_mb` MB from its heap and to keep up to `trim_mb`
    MB of freed heap; True when the C library took both settings."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or no mallopt in it
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return (mallopt(M_MMAP_THRESHOLD, int(mmap_mb) << 20) == 1
            and mallopt(M_TRIM_THRESHOLD, int(trim_mb) << 20) == 1)
