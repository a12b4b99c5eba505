"""YAML with line numbers: the data, where each key was written, and one-line YAML errors."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import yaml

from mgsparse import config_yaml
from mgsparse.config_yaml import Loader, Where, parse_yaml
from mgsparse.errors import ConfigError

TEXT = """\
# a comment first
dataset:
  name: cora

optim:
  lr: 5e-3
  betas: [0.9, 1e-3]
"""


def test_data_and_the_line_of_every_section_and_key():
    where = Where("run.yaml")
    data = parse_yaml(TEXT, where)
    assert data == {"dataset": {"name": "cora"}, "optim": {"lr": 0.005, "betas": [0.9, 0.001]}}
    assert where.lines == {(): 2, ("dataset",): 2, ("dataset", "name"): 3, ("optim",): 5,
                           ("optim", "lr"): 6, ("optim", "betas"): 7}


def test_where_falls_back_to_the_section_then_the_file_and_prefers_an_override():
    where = Where("run.yaml")
    parse_yaml(TEXT, where)
    where.overrides[("optim", "lr")] = "--set optim.lr=0.1"
    assert where(("dataset", "name")) == "run.yaml:3"
    assert where(("dataset", "root")) == "run.yaml:2"  # not written: its section's line
    assert where(("model", "kind")) == "run.yaml:2"  # no such section: the document's line
    assert where(("optim", "lr")) == "--set optim.lr=0.1"
    assert Where("<dict>")(("model",)) == "<dict>"


def test_exponents_without_a_dot_are_floats():
    assert yaml.load("[5e-4, 1e3, -2E+1, 1_000, .5]", Loader=Loader) == [5e-4, 1e3, -20.0,
                                                                        1000, 0.5]
    assert yaml.safe_load("5e-4") == "5e-4"  # what plain SafeLoader does (YAML 1.1)


def test_a_top_level_that_is_not_a_mapping_is_returned_with_its_line():
    where = Where("run.yaml")
    assert parse_yaml("\n\n- cora\n- gcn\n", where) == ["cora", "gcn"]
    assert where.lines == {(): 3}


@pytest.mark.parametrize("text, message", [
    ("dataset:\n  name: cora\n  name: pubmed\n",
     "^run.yaml:3: duplicate key dataset.name \\(first set on line 2\\)$"),
    ("# nothing\n", "^run.yaml:1: config file is empty"),
    ("dataset: {name: [cora}\n", "^run.yaml:1: invalid YAML: expected ',' or ']', but got '}'$"),
])
def test_errors_are_one_line_with_the_file_and_line(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_yaml(text, Where("run.yaml"))


def test_config_yaml_is_a_leaf():
    tree = ast.parse(Path(config_yaml.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    outside_stdlib = {name for name in imported if name.split(".")[0] not in
                      sys.stdlib_module_names}
    assert outside_stdlib == {"yaml", "mgsparse.errors"}
