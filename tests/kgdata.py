"""Where the tests find the real knowledge graphs (UMLS, Kinships, Nations): MGSPARSE_KG_URL
when it names a folder (read at start-up, before any test sets it), else ../shared/kg."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SHARED_KG = REPO_ROOT.parent / "shared" / "kg"
USER_KG = os.environ.get("MGSPARSE_KG_URL")


def require_real_kg() -> Path:
    """The folder holding <name>/{train,valid,test}.txt; skip without one, unless
    MGSPARSE_REQUIRE_REAL_DATA=1, where its absence is a failure."""
    for folder in filter(None, (USER_KG and Path(USER_KG), SHARED_KG)):
        if all((folder / n / "train.txt").is_file() for n in ("umls", "kinships", "nations")):
            return folder
    message = f"the real knowledge graphs are not found (MGSPARSE_KG_URL, {SHARED_KG})"
    if os.environ.get("MGSPARSE_REQUIRE_REAL_DATA") == "1":
        pytest.fail(message + " (MGSPARSE_REQUIRE_REAL_DATA=1)")
    pytest.skip(message)
