"""The command-line app composed in `mgsparse.cli`: `--version`, `--help`, every command
registered, and `python -m mgsparse` (each command has its own tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import mgsparse
from tests.conftest import CONFIGS, one_line_error


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


# ---------------------------------------------------------------- streams and terminals


def run_cli(*args, env=None, stdout=subprocess.PIPE, cwd=None):
    environment = {**os.environ, "MGSPARSE_DATA": str(cwd or "."), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mgsparse", *map(str, args)], env=environment,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, cwd=cwd,
                          check=False)  # the tests assert the exit code


def test_columns_zero_still_prints_the_json_summary(tmp_path):
    done = run_cli("train", CONFIGS / "karate.yaml", "--epochs", 3, "--json",
                   env={"COLUMNS": "0"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"


@pytest.mark.parametrize("command", [("gradcheck", "--op", "spmm"),
                                     ("train", CONFIGS / "karate.yaml", "--epochs", 3)])
def test_an_ascii_terminal_gets_question_marks_not_a_traceback(tmp_path, command):
    done = run_cli(*command, env={"PYTHONIOENCODING": "ascii"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "?" in done.stdout + done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_a_full_device_on_stdout_is_one_line_and_exit_1(tmp_path):
    with open("/dev/full", "w") as full:
        done = run_cli("gradcheck", "--op", "spmm", stdout=full, cwd=tmp_path)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["error: cannot write the output: No space left on device"], done.stderr


@pytest.mark.parametrize("command", [("datasets", "list"), ("gradcheck", "--op", "spmm")])
def test_a_closed_stdout_is_one_line_and_exit_1(tmp_path, command):
    """`mgsparse datasets list >&-`: Python starts with no sys.stdout at all (None), which was
    an AttributeError traceback at the first flush."""
    done = subprocess.run(["sh", "-c", '"$0" -m mgsparse "$@" >&-', sys.executable, *command],
                          env={**os.environ, "MGSPARSE_DATA": str(tmp_path)}, cwd=tmp_path,
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["error: cannot write the output: standard output is closed"], done.stderr


def test_a_negative_seed_is_a_usage_error_everywhere(cli):
    one_line_error(cli("train", CONFIGS / "karate.yaml", "--set", "train.seed=-1"), 2,
                   "train.seed must be >= 0 (got -1)")
    result = cli("gradcheck", "--seed", "-1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "FAIL" not in result.output


@pytest.mark.parametrize("args, needle", [
    (["trian"], "No such command 'trian'. Did you mean 'train'?"),
    (["train", "configs/karate.yaml", "--epochs", "1e3"], "Invalid value for '--epochs'"),
    (["train", "--nope"], "No such option: --nope"),
    (["datasets", "info"], "Missing argument 'NAME_OR_PATH'"),
])
def test_a_usage_mistake_is_one_error_line_and_exit_2(args, needle):
    """The entry point (not typer's framed box): one `error:` line naming the mistake and
    where the help is, exit 2, no traceback."""
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "--help)" in lines[0] and not done.stdout


def test_ctrl_c_while_the_command_line_loads_exits_130_without_a_traceback():
    """The console script loads numpy, scipy, typer and rich inside `mgsparse._entry`, where
    a KeyboardInterrupt is a clean exit (here raised by the import system itself, exactly
    where a Ctrl-C during loading lands)."""
    probe = """
import sys
class Interrupting:
    def find_spec(self, name, path=None, target=None):
        if name == "mgsparse.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupting())
from mgsparse._entry import main
main()
"""
    done = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "interrupted while starting" in done.stderr


def test_the_typer_range_is_one_whose_help_reads_cleanly():
    """typer 0.27 prints a required DIR as `{DIR}` and 0.29 `<bool>` beside every flag (and
    releases before 0.19 fail with click 8.2): the dependency keeps to 0.19-0.26."""
    import tomllib

    from tests.conftest import REPO_ROOT

    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "typer>=0.19,<0.27" in deps


@pytest.mark.parametrize("command", ["train", "evaluate", "predict", "bench", "graph"])
def test_help_screens_name_values_not_python_types(cli, command):
    """`--quiet`, `--json` and the other flags take no value, `--set` takes KEY=VALUE, and
    train's optional CONFIG is not bracketed twice: whatever typer release is installed."""
    import re
    from importlib.metadata import version

    result = cli(command, "--help")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "[[CONFIG]]" not in text and "list[str]" not in text
    flags = [line for line in text.splitlines()
             if re.search(r"--(quiet|json|memory-report|dense-vs-sparse)\b", line)
             and "Print the results" not in line and "Also write" not in line]
    assert all("<bool>" not in line and "BOOLEAN" not in line for line in flags), flags
    if "--set" in text:
        assert re.search(r"--set\s+KEY=VALUE", text)
    if tuple(int(p) for p in version("typer").split(".")[:2]) < (0, 27):
        assert "{DIR}" not in text and "<bool>" not in text
