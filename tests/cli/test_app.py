"""The command-line app composed in `mgsparse.cli`: `--version`, `--help`, every command
registered, and `python -m mgsparse` (each command has its own tests)."""

from __future__ import annotations

import subprocess
import sys

import mgsparse


def test_version_prints_the_package_version(cli):
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"mgsparse {mgsparse.__version__}"


def test_help_exits_zero_and_lists_every_command(cli):
    result = cli("--help")
    assert result.exit_code == 0
    assert "Usage" in result.stdout and "--version" in result.stdout
    for command in ("train", "evaluate", "gradcheck", "bench", "graph", "datasets"):
        assert f" {command} " in result.stdout, command


def test_importing_the_app_registers_the_commands_without_a_shim(cli):
    """No `_register_commands()` and no `cli.commands` module: the app is whole on import."""
    import mgsparse.cli as cli_package

    assert not hasattr(cli_package, "_register_commands")
    names = {c.name or c.callback.__name__ for c in cli_package.app.registered_commands}
    assert {"train", "evaluate", "gradcheck", "bench", "graph"} <= names
    assert cli("datasets", "--help").exit_code == 0


def test_python_dash_m_runs_the_same_entry_point():
    done = subprocess.run([sys.executable, "-m", "mgsparse", "--version"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mgsparse {mgsparse.__version__}"
