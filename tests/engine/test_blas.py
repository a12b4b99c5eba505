"""BLAS threads through ctypes: every OpenBLAS the process loaded takes the setting."""

from __future__ import annotations

import pytest

from mgsparse.engine import blas


def test_blas_is_set_to_one_thread_where_numpy_brings_openblas():
    if not blas._openblas_libraries():
        pytest.skip("numpy is not linked to OpenBLAS here")
    assert blas.limit_blas_threads(1) >= 1
