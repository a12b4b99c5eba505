"""BLAS threads through ctypes: the OpenBLAS that numpy's and scipy's wheels load, held to the
thread count the engine's pool wants (`parallel.set_num_threads` sets it to one per call)."""

from __future__ import annotations

import contextlib
import ctypes
import sys

_BLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                 "openblas_set_num_threads64_", "openblas_set_num_threads")


_found: tuple[int, list[ctypes.CDLL]] = (-1, [])  # (len(sys.modules) when scanned, libraries)


def _openblas_libraries() -> list[ctypes.CDLL]:
    """Every OpenBLAS this process has loaded (numpy's and scipy's wheels each bring one).
    Reading /proc/self/maps takes ~2.5 ms; a library loads only with an extension module's
    import, so the scan is redone only once more modules are loaded than at the last one."""
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
            libs.append(ctypes.CDLL(path))
    _found = (loaded, libs)
    return libs


def limit_blas_threads(n: int) -> int:
    """Set every loaded OpenBLAS to `n` threads; returns how many libraries were set.

    threadpoolctl does this for every BLAS and OpenMP runtime; we need one call on the
    OpenBLAS that numpy's and scipy's wheels ship, so a few lines of ctypes do instead of
    a dependency. Elsewhere (MKL, macOS Accelerate) set OMP_NUM_THREADS / MKL_NUM_THREADS
    before starting Python.
    """
    done = 0
    for lib in _openblas_libraries():
        for name in _BLAS_SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(ctypes.c_int(n))
                done += 1
                break
    return done
