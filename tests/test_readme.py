"""The README is the front door: every mgsparse name it imports imports from where it says,
and every package its map names exists."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
IMPORTS = sorted({line.strip() for block in re.findall(r"```python\n(.*?)```", README, re.S)
                  for line in block.splitlines()
                  if re.match(r"\s*from mgsparse[\w.]* import ", line)})


def test_the_readme_shows_imports():
    assert len(IMPORTS) >= 5


@pytest.mark.parametrize("line", IMPORTS)
def test_every_import_in_the_readme_works(line):
    exec(line.split("#")[0], {})


def test_every_package_of_the_map_exists():
    packages = re.findall(r"^\| `(mgsparse\.\w+)`", README, re.M)
    packages += re.findall(r"`(mgsparse\.\w+)`, `(mgsparse\.\w+)`", README)
    names = {p for item in packages for p in ([item] if isinstance(item, str) else item)}
    assert {"mgsparse.engine", "mgsparse.run", "mgsparse.cli"} <= names
    for name in names:
        importlib.import_module(name)
