"""The import rule, checked over every module of the package, not a hand-kept list.

    kernels < engine < sparse < nn, optim < distributed < run, bench, checks < cli

`errors`, `catalog`, `config` and `data` are leaves: `catalog` imports nothing from mgsparse,
`data` and the `config` package (schema, YAML reader, checks) may read the catalog and the
errors only. `kernels` (how things run fast) imports `errors` alone, and every other layer
reaches it through its public names only (`mgsparse.kernels.__all__`), never a module inside
it. `distributed` (the MPI pieces) sits under the run layer, whose distributed task
uses it. Only `cli` imports typer, rich and matplotlib (its `plots`), mpi4py only
`distributed` and pymetis and rdkit only `data`, the four extras each only inside a function
(lazily), so nothing loads an optional extra until it is used.

Two checks: every `import` statement of every module (parsed with `ast`, function bodies
included) points down the chain; and each package imported alone in a fresh interpreter loads
only what it may. The package root re-exports the public surface, so importing
`mgsparse.<sub>` through it would load everything the root re-exports and blame `<sub>` for it;
the child interpreter therefore registers a bare `mgsparse` package (same directory, no
`__init__` run) and measures exactly what `<sub>` itself pulls in.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import mgsparse

PACKAGE_DIR = Path(mgsparse.__file__).parent
CORE = {"kernels", "engine", "errors"}
LEAVES = {"errors", "catalog", "config", "data"}
# layer -> the other layers it may import (its own is always allowed)
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "catalog": set(),
    "config": {"catalog", "errors"},
    "data": {"catalog", "errors"},
    "kernels": {"errors"},
    "engine": {"kernels", "errors"},
    "sparse": {"kernels", "engine", "errors"},
    "nn": {"kernels", "sparse", "engine", "errors"},
    "optim": {"kernels", "engine", "errors"},
}
BELOW_RUN = {"nn", "optim", "sparse", "engine", "kernels", "data", "config", "catalog", "errors"}
MAY_IMPORT["distributed"] = set(BELOW_RUN)
MAY_IMPORT["run"] = BELOW_RUN | {"distributed"}
MAY_IMPORT["checks"] = set(BELOW_RUN)
MAY_IMPORT["bench"] = BELOW_RUN | {"distributed", "run"}
MAY_IMPORT["cli"] = BELOW_RUN | {"distributed", "run", "bench", "checks"}
MAY_IMPORT["_entry"] = {"cli"}  # the console script: the CLI loaded where Ctrl-C is clean
MAY_IMPORT["__main__"] = {"_entry"}
# the root re-exports the engine and sparse lazily (module __getattr__): no import statement
MAY_IMPORT["mgsparse"] = set()
THIRD_PARTY_ONLY_IN = {"typer": {"cli"}, "rich": {"cli"}, "matplotlib": {"cli"},
                       "mpi4py": {"distributed"}, "pymetis": {"data"}, "rdkit": {"data"}}
LAZY_ONLY = {"matplotlib", "mpi4py", "pymetis", "rdkit"}  # optional extras: inside functions only


def all_modules(path: Path = PACKAGE_DIR, prefix: str = "mgsparse") -> list[str]:
    """Every module of the package, found by walking its folders with pkgutil (no list to keep
    up to date, and nothing imported: a module that fails to import is still found)."""
    found = [prefix]
    for info in pkgutil.iter_modules([str(path)], prefix + "."):
        if info.ispkg:
            found += all_modules(path / info.name.rpartition(".")[2], info.name)
        else:
            found.append(info.name)
    return sorted(found)


MODULES = all_modules()
MODULE_SET = set(MODULES)
TOP_LEVEL = sorted({m.split(".")[1] for m in MODULES if m != "mgsparse"})


def layer(module: str) -> str:
    """`mgsparse.run.loop` -> "run"; the root package is its own layer."""
    return "mgsparse" if module == "mgsparse" else module.split(".")[1]


def source(module: str, base: Path = PACKAGE_DIR) -> tuple[Path, bool]:
    """(file, is a package) of `module`, found without importing it."""
    folder = base.joinpath(*module.split(".")[1:])
    if (folder / "__init__.py").is_file():
        return folder / "__init__.py", True
    return folder.with_suffix(".py"), False


def imports_of(module: str, base: Path = PACKAGE_DIR) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level?) for every import statement of `module`;
    relative imports resolved, `from pkg import submodule` counted as the submodule."""
    path, is_package = source(module, base)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if is_package else module.rpartition(".")[0]
    top_level = {id(node) for node in tree.body} | {
        id(n) for node in tree.body if isinstance(node, (ast.If, ast.Try))
        for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno, at_top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append((candidate if candidate in MODULE_SET else base, node.lineno,
                              at_top))
    return found


def test_the_walk_finds_every_package_and_each_has_a_layer():
    assert {"engine", "sparse", "nn", "optim", "run", "bench", "checks", "cli", "data", "config",
            "catalog", "errors"} <= set(TOP_LEVEL)
    assert "mgsparse.cli.plots" in MODULES and "plots" not in TOP_LEVEL
    assert "mgsparse.run.loop" in MODULES and "mgsparse.cli.train" in MODULES
    unplaced = sorted(set(TOP_LEVEL) - set(MAY_IMPORT))
    assert unplaced == [], f"place these modules in the import chain: {unplaced}"


@pytest.mark.parametrize("module", MODULES)
def test_every_import_points_down_the_chain(module):
    own = layer(module)
    wrong = []
    for target, line, at_top in imports_of(module):
        root = target.split(".")[0]
        if root == "mgsparse":
            other = layer(target)
            if other == "mgsparse" and own != "mgsparse":
                other = "sparse"  # the root re-exports engine and sparse: the highest of them
            if other != own and other not in MAY_IMPORT[own]:
                wrong.append(f"line {line}: {target} ({own} may not import {other})")
        elif root in THIRD_PARTY_ONLY_IN:
            if own not in THIRD_PARTY_ONLY_IN[root]:
                wrong.append(f"line {line}: {target} (only {THIRD_PARTY_ONLY_IN[root]} may)")
            elif root in LAZY_ONLY and at_top:
                wrong.append(f"line {line}: {target} at module level (import it lazily)")
    assert wrong == [], f"{module}: " + "; ".join(wrong)


def kernel_internals_used(module: str, base: Path = PACKAGE_DIR) -> list[str]:
    """What `module` (outside `kernels`) takes from inside the kernels floor: an import of one
    of its modules, or an attribute `kernels.<name>` that is not one of its public names."""
    import mgsparse.kernels

    public = set(mgsparse.kernels.__all__)
    path, _ = source(module, base)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = [f"line {line}: imports {target}" for target, line, _ in imports_of(module, base)
             if target.startswith("mgsparse.kernels.")]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "mgsparse.kernels":
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names
                      if a.name not in public]
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "kernels" and node.attr not in public):
            found.append(f"line {node.lineno}: kernels.{node.attr}")
    return found


@pytest.mark.parametrize("module", [m for m in MODULES if layer(m) != "kernels"])
def test_the_layers_use_only_the_kernels_public_names(module):
    assert kernel_internals_used(module) == []


def test_the_kernels_check_catches_an_internal(tmp_path):
    """Negative control: a layer reaching into the floor is named, line by line."""
    fake = tmp_path / "mgsparse" / "nn"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "bad.py").write_text("from mgsparse import kernels\n"
                                 "from mgsparse.kernels.pool import run_blocks\n"
                                 "from mgsparse.kernels import _State, by_rows\n"
                                 "x = kernels.pool.run_blocks\ny = kernels.by_rows\n")
    found = kernel_internals_used("mgsparse.nn.bad", base=tmp_path / "mgsparse")
    assert found == ["line 2: imports mgsparse.kernels.pool", "line 3: imports _State",
                     "line 4: kernels.pool"]


def test_the_ast_check_catches_an_upward_import(tmp_path):
    """Negative control: the parser sees imports in function bodies and relative ones."""
    fake = tmp_path / "mgsparse" / "sparse"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "bad.py").write_text("import numpy\ndef f():\n    from ..run import loop\n"
                                 "    import rich\n")
    found = imports_of("mgsparse.sparse.bad", base=tmp_path / "mgsparse")
    assert found == [("numpy", 1, True), ("mgsparse.run.loop", 3, False), ("rich", 4, False)]


# ---------------------------------------------------------------- a fresh interpreter

PROBE = """
import importlib, json, sys, types
root = types.ModuleType("mgsparse")
root.__path__ = [sys.argv[2]]
sys.modules["mgsparse"] = root
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


PACKAGES = [p for p in TOP_LEVEL if p not in ("__main__", "_entry")]


@pytest.fixture(scope="module")
def loaded() -> dict[str, set[str]]:
    """package -> names in sys.modules after importing `mgsparse.<package>` alone in a new
    interpreter; the interpreters run side by side (each is still alone in its process)."""
    procs = {p: subprocess.Popen([sys.executable, "-c", PROBE, f"mgsparse.{p}", str(PACKAGE_DIR)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in PACKAGES}
    result = {}
    for package, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"import mgsparse.{package}: {err}"
        result[package] = set(json.loads(out))
    return result


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_alone_loads_only_what_it_may(loaded, package):
    modules = loaded[package]
    assert f"mgsparse.{package}" in modules
    allowed = MAY_IMPORT[package] | {package}
    offenders = sorted(
        m for m in modules
        if (m.startswith("mgsparse.") and layer(m) not in allowed)
        or m.split(".")[0] in LAZY_ONLY  # never at import time, not even for the cli
        or (m.split(".")[0] in ("typer", "rich") and package != "cli"))
    assert offenders == [], f"mgsparse.{package} loads {offenders}"


def test_the_run_layer_loads_no_cli_and_no_plotting(loaded):
    modules = loaded["run"]
    assert {"mgsparse.run.loop", "mgsparse.run.task", "mgsparse.nn", "mgsparse.data"} <= modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "rich", "matplotlib")
                or m in ("mgsparse.cli", "mgsparse.cli.plots", "mgsparse.bench")}


def test_package_root_loads_nothing_until_used_and_never_the_cli():
    """`import mgsparse` loads no numpy (the entry point starts at once); the public surface
    loads the engine and sparse on first use, and never the CLI."""
    probe = ("import json, sys, mgsparse; bare = sorted(sys.modules); mgsparse.Tensor; "
             "mgsparse.SparseTensor; print(json.dumps([bare, sorted(sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", probe],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    bare, loaded = map(set, json.loads(done.stdout))
    assert "numpy" not in bare and not {m for m in bare if m.startswith("mgsparse.")}
    assert "mgsparse.engine" in loaded and "mgsparse.sparse" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("typer", "rich", "matplotlib")
                or m.startswith(("mgsparse.cli", "mgsparse.run", "mgsparse.bench"))}
