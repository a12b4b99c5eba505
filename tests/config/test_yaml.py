"""YAML with line numbers: the data, where each key was written, and one-line YAML errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import mgsparse.config.yaml as config_yaml
from mgsparse.config import load_config
from mgsparse.config.yaml import Loader, Where, parse_yaml
from mgsparse.errors import ConfigError
from tests.config import HEADER, config_error, imports_outside_stdlib, write

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


def test_the_reader_knows_only_yaml_and_the_errors():
    assert imports_outside_stdlib(Path(config_yaml.__file__)) == {"yaml", "mgsparse.errors"}


# ---------------------------------------------------------------- a whole file, through load_config

# (file text, message prefix after the path, text the message must contain)
BAD_FILES = [
    pytest.param("dataset: [cora\n", ":2: ", "invalid YAML: expected ',' or ']'", id="yaml"),
    pytest.param("dataset:\n  name: cora\n bad: 1\n", ":3: ", "invalid YAML", id="indent"),
    pytest.param("", ":1: ", "config file is empty", id="empty"),
    pytest.param("# only a comment\n", ":1: ", "config file is empty", id="comments-only"),
    pytest.param("- cora\n- gcn\n", ":1: ", "top level must be a mapping of sections (got a list)",
                 id="top-level-list"),
    pytest.param("\n\ncora\n", ":3: ", "top level must be a mapping of sections (got 'cora')",
                 id="top-level-scalar"),
    pytest.param("dataset:\n  name: cora\n---\nmodel: {}\n", ":3: ",
                 "invalid YAML: expected a single document in the stream, but found another",
                 id="two-documents"),
    pytest.param("dataset: !!python/object:os.system {}\n", ":1: ",
                 "invalid YAML: could not determine a constructor", id="unsafe-tag"),
]


@pytest.mark.parametrize("text, prefix, expected", BAD_FILES)
def test_bad_file_is_one_line_error(tmp_path, text, prefix, expected):
    path = write(tmp_path, text)
    message = str(config_error(path))
    assert message.startswith(f"{path}{prefix}"), message
    assert expected in message


def test_missing_file_directory_and_binary(tmp_path):
    missing = tmp_path / "nope.yaml"
    assert str(config_error(missing)) == f"{missing}: config file not found"
    assert str(config_error(tmp_path)).startswith(f"{tmp_path}: cannot read config file")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"dataset:\n  name: \xff\xfe\n")
    assert str(config_error(binary)) == f"{binary}: not UTF-8 text (byte 17)"


def test_key_with_newline_still_gives_one_line(tmp_path):
    message = str(config_error(write(tmp_path, HEADER + 'optim:\n  "l\\nr": 1\n')))
    assert message.endswith("unknown key optim.l r; did you mean 'lr'?")


def test_yaml_12_floats_and_integral_floats(tmp_path):
    text = HEADER + "optim:\n  weight_decay: 5e-4\n  lr: 1E-2\ntrain:\n  epochs: 1e3\n"
    config = load_config(write(tmp_path, text, "ok.yaml"))
    assert config.optim.weight_decay == 0.0005 and config.optim.lr == 0.01
    assert config.train.epochs == 1000 and type(config.train.epochs) is int

