"""The README is the front page and docs/ the rest: what they name exists and runs as written.

Checked over README.md, docs/*.md and benchmarks/README.md: every `from mgsparse… import`
line in a python block imports; every `mgsparse` command line names a real command and only
options that command has; every config, benchmark script, package file and linked page named
exists; every script in benchmarks/ is described; the package map names real packages; the
gradcheck count shown in the README is the registry's; and no count of checks or ops is
written in prose, where it would go stale with the next op. A section holding
`<!-- verify at merge -->` describes a layout still being built: its file paths are not
checked until the marker is removed.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex

import pytest
import typer.main

from mgsparse.checks import CheckReport, run_checks
from mgsparse.cli import app
from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README, REPO_ROOT / "benchmarks" / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
TEXT = {p: p.read_text(encoding="utf-8") for p in PAGES}
UNVERIFIED = "<!-- verify at merge"
CLI = typer.main.get_command(app)


def _name(page) -> str:
    return str(page.relative_to(REPO_ROOT))


def _code(text: str) -> list[str]:
    """Lines of fenced blocks (python code aside) and inline code spans."""
    blocks = re.findall(r"```(?!python)\w*\n(.*?)```", text, re.DOTALL)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    return [line for block in blocks for line in block.splitlines()] + spans


def _sections(text: str) -> list[str]:
    return re.split(r"^#+ ", text, flags=re.MULTILINE)


def test_the_readme_is_a_front_page():
    lines = TEXT[README].splitlines()
    assert len(lines) <= 220
    assert "pip install -e . && mgsparse train configs/cora.yaml" in lines
    assert "pip install -e '.[test]' && pytest" in lines
    for page in PAGES[1:]:
        assert f"({_name(page)})" in TEXT[README], f"README links to {_name(page)}"


IMPORTS = sorted({(_name(p), line.strip()) for p, text in TEXT.items()
                  for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
                  for line in block.splitlines()
                  if re.match(r"\s*from mgsparse[\w.]* import ", line)})


def test_the_pages_show_imports():
    assert len(IMPORTS) >= 5


@pytest.mark.parametrize(("page", "line"), IMPORTS)
def test_every_import_shown_works(page, line):
    module, names = re.match(r"from ([\w.]+) import (.+)", line.split("#")[0]).groups()
    imported = importlib.import_module(module)
    for name in (n.split(" as ")[0].strip() for n in names.split(",")):
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), line


COMMANDS = sorted({(_name(p), m.group(1).strip()) for p, text in TEXT.items()
                   for line in _code(text)
                   for m in [re.search(r"(?:^|[$&]\s*|\s)(mgsparse\s+[a-z].*)", line)] if m})


def test_the_pages_show_commands():
    assert {"mgsparse train configs/cora.yaml", "mgsparse gradcheck",
            "mgsparse bench --dense-vs-sparse --dataset cora"} <= {c for _, c in COMMANDS}


@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_every_command_shown_exists_with_its_options(page, command):
    words = shlex.split(command.split("#")[0])[1:]
    group, path = CLI, ["mgsparse"]
    while hasattr(group, "commands") and words and words[0] in group.commands:
        group = group.commands[words[0]]
        path.append(words.pop(0))
    assert len(path) > 1 + hasattr(group, "commands"), f"{page}: unknown command in {command!r}"
    known = {o for p in group.params for o in p.opts}
    for word in words:
        if word.startswith("-"):
            assert word.split("=")[0] in known, f"{page}: {' '.join(path)} has no {word}"


def _named(pattern: str, check_unverified: bool = False) -> list[tuple[str, str]]:
    return sorted({(_name(p), name) for p, text in TEXT.items() for section in _sections(text)
                   if check_unverified or UNVERIFIED not in section
                   for name in re.findall(pattern, section)})


@pytest.mark.parametrize(("page", "path"), _named(r"\b((?:configs|benchmarks)/[\w./-]+\.(?:yaml|py))",
                                                  check_unverified=True)
                         + _named(r"\b((?:mgsparse|tests)/[\w/]+(?:\.py|/))"))
def test_every_file_named_exists(page, path):
    assert (REPO_ROOT / path).exists(), f"{page} names {path}"


@pytest.mark.parametrize(("page", "target"), _named(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)",
                                                    check_unverified=True))
def test_every_page_linked_exists(page, target):
    assert (REPO_ROOT / page).parent.joinpath(target).resolve().exists(), f"{page} -> {target}"


def test_every_benchmark_script_is_described():
    described = TEXT[REPO_ROOT / "benchmarks" / "README.md"]
    for script in sorted((REPO_ROOT / "benchmarks").glob("*.py")):
        assert f"python benchmarks/{script.name}" in described, script.name


def test_every_package_of_the_map_exists():
    text = TEXT[REPO_ROOT / "docs" / "architecture.md"]
    rows = re.findall(r"^\| (`mgsparse\.\w+`(?:, `mgsparse\.\w+`)*) \|", text, re.MULTILINE)
    names = {name for row in rows for name in re.findall(r"mgsparse\.\w+", row)}
    assert {"mgsparse.engine", "mgsparse.sparse", "mgsparse.run", "mgsparse.cli"} <= names
    for name in names:
        importlib.import_module(name)


def test_the_readme_gradcheck_line_is_what_the_registry_gives():
    """The captured output may show the counts; they must be today's."""
    shown = re.search(r"all (\d+) checks of (\d+) ops passed", TEXT[README])
    assert shown, "the README shows the last line of `mgsparse gradcheck`"
    report = CheckReport(run_checks(), seed=0, size="small", seconds=0.0)
    assert (int(shown[1]), int(shown[2])) == (report.gradient_checks, len(report.ops))


@pytest.mark.parametrize("page", [_name(p) for p in PAGES])
def test_no_count_of_checks_or_ops_in_prose(page):
    prose = re.sub(r"```.*?```", "", TEXT[REPO_ROOT / page], flags=re.DOTALL)
    stale = r"\d[\d,]*\s+(?:gradient\s+)?checks\b|checks of \d|\d[\d,]*\s+(?:ops|layers)\b[^.\n]*check"
    assert not re.search(stale, prose), page
