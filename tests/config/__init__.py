"""Tests of `mgsparse.config`, one file per module; the helpers they share."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from mgsparse.config import load_config
from mgsparse.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = sorted(CONFIG_DIR.glob("*.yaml"))

HEADER = "# a config under test\ndataset:\n  name: cora\n"  # lines 1-3


def write(tmp_path: Path, text: str, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def config_error(path: Path, overrides: tuple[str, ...] = ()) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    err = info.value
    assert err.exit_code == 2
    assert "\n" not in str(err)
    return err



def imports_outside_stdlib(path: Path) -> set[str]:
    """The modules a file imports (function bodies included) that the standard library lacks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return {name for name in imported if name.split(".")[0] not in sys.stdlib_module_names}
