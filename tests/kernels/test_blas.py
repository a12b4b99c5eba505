"""BLAS threads through ctypes: every OpenBLAS the process loaded takes the setting."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from mgsparse.kernels import blas


def test_blas_is_set_to_one_thread_where_numpy_brings_openblas():
    if not blas._openblas_libraries():
        pytest.skip("numpy is not linked to OpenBLAS here")
    assert blas.limit_blas_threads(1) >= 1


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux /proc")
def test_the_libraries_are_scanned_again_only_after_more_modules_load(monkeypatch):
    """/proc/self/maps is read once per count of loaded modules: a new OpenBLAS comes only
    with an extension module's import (scipy.linalg's, after numpy's)."""
    reads = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        reads.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(blas, "_found", (-1, []))
    monkeypatch.setattr("builtins.open", counting_open)
    first = blas._openblas_libraries()
    assert blas._openblas_libraries() is first and reads == ["/proc/self/maps"]
    monkeypatch.setitem(sys.modules, "a_module_loaded_since", types.ModuleType("loaded"))
    assert [lib._name for lib in blas._openblas_libraries()] == [lib._name for lib in first]
    assert reads == ["/proc/self/maps"] * 2
