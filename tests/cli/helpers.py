"""Assertions shared by the CLI tests (kept for older imports; the helper lives in conftest)."""

from tests.conftest import one_line_error  # noqa: F401
