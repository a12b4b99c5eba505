"""The import rule: each subpackage, imported alone in a fresh interpreter, loads only what it may.

engine <- sparse <- nn/optim <- train/bench <- cli; `data` and `config` are leaves; only `cli`
imports typer or rich. The package root re-exports the public surface, so importing
`mgsparse.<sub>` through it would load everything the root re-exports and blame `<sub>` for
it; the child interpreter therefore registers a bare `mgsparse` package (same directory, no
`__init__` run) and measures exactly what `<sub>` itself pulls in.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

LAYERS = ["engine", "sparse", "nn", "optim", "data", "config", "config_yaml",
          "train", "checks", "bench", "sweep", "monitor", "viz", "cli"]
MAY_IMPORT = {
    "engine": set(),
    "engine.cases": {"engine"},
    "sparse": {"engine"},
    "nn": {"sparse", "engine"},
    "nn.cases": {"nn", "sparse", "engine"},
    "optim": {"engine"},
    "data": set(),
    "config": {"config_yaml"},
    "config_yaml": set(),
}

PROBE = """
import importlib, json, sys, types
root = types.ModuleType("mgsparse")
root.__path__ = [sys.argv[2]]
sys.modules["mgsparse"] = root
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(module: str) -> set[str]:
    """Names in sys.modules after importing `module` alone in a new interpreter."""
    package_dir = importlib.util.find_spec("mgsparse").submodule_search_locations[0]
    done = subprocess.run([sys.executable, "-c", PROBE, module, package_dir],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def forbidden_for(sub: str) -> set[str]:
    layers = {f"mgsparse.{name}" for name in LAYERS if name != sub and name not in MAY_IMPORT[sub]}
    return layers | {"typer", "rich"}


@pytest.mark.parametrize("sub", sorted(MAY_IMPORT))
def test_subpackage_imports_point_down_only(sub):
    loaded = loaded_modules(f"mgsparse.{sub}")
    assert f"mgsparse.{sub}" in loaded
    offenders = sorted(m for m in loaded if m.split(".")[0] in {"typer", "rich"}
                       or any(m == f or m.startswith(f + ".") for f in forbidden_for(sub)))
    assert offenders == [], f"mgsparse.{sub} imports {offenders}"


def test_package_root_does_not_load_the_cli():
    probe = "import json, sys, mgsparse; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert "mgsparse.engine" in loaded
    assert not {"typer", "rich", "mgsparse.cli"} & loaded


# The run layer (train, bench, checks and their helpers) may use everything below it, but
# never the CLI: the library never prints, and nothing imports `mgsparse.cli`.
RUN_LAYER = ["problem", "train", "monitor", "outputs", "checks", "bench", "sweep", "viz",
             "train_points", "plot"]


@pytest.mark.parametrize("module", RUN_LAYER)
def test_run_layer_never_loads_the_cli(module):
    loaded = loaded_modules(f"mgsparse.{module}")
    offenders = sorted(m for m in loaded if m.split(".")[0] in {"typer", "rich"}
                       or m == "mgsparse.cli" or m.startswith("mgsparse.cli."))
    assert offenders == [], f"mgsparse.{module} imports {offenders}"
