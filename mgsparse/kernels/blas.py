"""BLAS threads through ctypes: the OpenBLAS that numpy's and scipy's wheels load, held to one
thread while mgsparse computes, and given back the count it had once control returns.

Why one thread: the pool (`kernels.pool`) runs n BLAS calls at once, and a multi-threaded BLAS
under each would put n·k threads on n cores (on a busy 2-core machine, a 100,000 × 64 by
64 × 16 product took 81 ms with OpenBLAS's 2 threads against 7 ms with one); and a product's
bits must not depend on the thread count, while OpenBLAS's own threads split some products
(a tall aᵀ·g) differently from one thread. Why given back: the count is the process's, the
caller's numpy included. So `one_thread` sets every loaded OpenBLAS to one thread and restores
each library's own count on leaving, once for the outermost entry into mgsparse: an op's
forward (`Function.apply`), a backward pass, a tape's run, a parallel run of the pool; one
nested inside another costs one thread-local read. An entry costs ~1 µs where the caller's
count is not one (timeit of the ctypes calls: a get ~0.1 µs, a set ~0.3 µs), nothing more
where it is (a get); a replayed training step enters twice (its forwards, its backward).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_", "openblas_get_num_threads")

# (len(sys.modules) when scanned, [(get, set) per library])
_found: tuple[int, list[tuple]] = (-1, [])


def _openblas_libraries() -> list[tuple]:
    """(get, set) of every OpenBLAS this process has loaded (numpy's and scipy's wheels each
    bring one; a library without a getter is left out: it could not be restored). Reading
    /proc/self/maps takes ~2.5 ms; a library loads only with an extension module's import,
    so the scan is redone only once more modules are loaded than at the last one."""
    global _found
    loaded = len(sys.modules)
    if _found[0] == loaded:
        return _found[1]
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    libs = []
    for path in sorted(p for p in paths if p.startswith("/")):
        with contextlib.suppress(OSError):
            lib = ctypes.CDLL(path)
            get = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
            put = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
            if get is not None and put is not None:
                get.restype, get.argtypes, put.argtypes = ctypes.c_int, [], [ctypes.c_int]
                libs.append((get, put))
    _found = (loaded, libs)
    return libs


def blas_threads() -> list[int]:
    """Each loaded OpenBLAS's thread count, in the order `limit_blas_threads` sets them."""
    return [get() for get, _ in _openblas_libraries()]


def limit_blas_threads(n: int) -> int:
    """Set every loaded OpenBLAS to `n` threads for good; returns how many libraries were set.

    For a program that owns its process (a benchmark holding both sides to one core): mgsparse
    itself never calls it, and changes the count only while it computes (`one_thread`). threadpoolctl does this for every BLAS and OpenMP runtime; the OpenBLAS
    of numpy's and scipy's wheels needs a few lines of ctypes instead of a dependency.
    Elsewhere (MKL, macOS Accelerate) set OMP_NUM_THREADS / MKL_NUM_THREADS before starting
    Python."""
    libs = _openblas_libraries()
    for _, put in libs:
        put(n)
    return len(libs)


class _Held(threading.local):
    on = False  # inside a `one_thread` block on this thread


HELD = _Held()


class one_thread:  # lower case: used as a function, `with one_thread():`
    """Every loaded OpenBLAS on one thread inside the block, each back to its own count after
    (a library already on one thread is not touched); a block inside another on the same
    thread does nothing. A class, not a generator: it runs for every op called from outside."""

    __slots__ = ("changed",)

    def __enter__(self) -> None:
        if HELD.on:
            self.changed = None
            return
        changed = []
        for get, put in _openblas_libraries():
            n = get()
            if n != 1:
                put(1)
                changed.append((put, n))
        self.changed = changed
        HELD.on = True

    def __exit__(self, *exc: object) -> None:
        changed = self.changed
        if changed is None:
            return
        HELD.on = False
        for put, n in changed:
            put(n)
