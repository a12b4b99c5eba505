"""The command-line entry point: `--version` and `--help` (each command has its own tests)."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

import mgsparse
from mgsparse.cli import app

runner = CliRunner()


def test_version_prints_the_package_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"mgsparse {mgsparse.__version__}"


def test_help_exits_zero_and_describes_the_tool():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "Usage" in result.stdout
    assert "--version" in result.stdout


def test_python_dash_m_runs_the_same_entry_point():
    done = subprocess.run([sys.executable, "-m", "mgsparse", "--version"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mgsparse {mgsparse.__version__}"
