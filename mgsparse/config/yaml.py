"""YAML with line numbers: a config file's plain data plus where each of its keys was written.

`mgsparse.config` validates the data and words every error as ``<file>:<line>: ...``; this
module supplies the lines. One parse gives both the node tree and the data, so the line
numbers always describe the text that was read. Keys of the top two levels (sections and
their keys) are recorded, and a key written twice is an error here, where PyYAML would keep
the last value silently. It knows nothing of the schema: yaml and `mgsparse.errors` only.
(``import yaml`` below is PyYAML: imports are absolute, never this module.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from mgsparse.errors import ConfigError


class Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``5e-4`` and ``1e3`` as floats (YAML 1.2), not strings."""


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


@dataclass
class Where:
    """Maps a key path to where the user wrote it: a file line or a ``--set`` option."""

    source: str
    lines: dict[tuple, int] = field(default_factory=dict)
    overrides: dict[tuple, str] = field(default_factory=dict)

    def __call__(self, path: tuple) -> str:
        if path in self.overrides:
            return self.overrides[path]
        for depth in range(len(path), -1, -1):  # fall back to the section, then the file
            if path[:depth] in self.lines:
                return f"{self.source}:{self.lines[path[:depth]]}"
        return self.source


def yaml_error(err: yaml.YAMLError, where: str, with_line: bool = True) -> ConfigError:
    """PyYAML's multi-line report squeezed into one line, keeping its line number."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if problem.startswith("but ") and getattr(err, "context", None):  # "expected X, but Y"
        problem = f"{err.context}, {problem}"
    line = f":{mark.line + 1}" if mark is not None and with_line else ""
    return ConfigError(f"{where}{line}: invalid YAML: {' '.join(problem.split())}")


def _record_lines(node: yaml.MappingNode, where: Where, prefix: tuple = ()) -> None:
    """Note the line of every key of the top two levels; PyYAML hides duplicates, we don't."""
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
            continue
        path, line = prefix + (key_node.value,), key_node.start_mark.line + 1
        if path in where.lines:
            raise ConfigError(f"{where.source}:{line}: duplicate key {'.'.join(path)} "
                              f"(first set on line {where.lines[path]})")
        where.lines[path] = line
        if not prefix and isinstance(value_node, yaml.MappingNode):
            _record_lines(value_node, where, path)


def parse_yaml(text: str, where: Where) -> Any:
    """The document's data, with the lines of its keys recorded in `where`.

    A top level that is not a mapping is returned as it is, its line recorded under ``()``:
    the caller checks the shape of the data (whatever its origin) and says where it was.
    """
    loader = None
    try:
        loader = Loader(text)
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as err:
        raise yaml_error(err, where.source) from None
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        raise ConfigError(f"{where.source}:1: config file is empty "
                          f"(expected sections such as dataset:, model:, optim:)")
    where.lines[()] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        _record_lines(node, where)
    return data


def parse_value(text: str, origin: str) -> Any:
    """One ``--set`` value read as YAML (``null``, ``1e-3``, ``[a, b]``), errors naming the
    option (`origin`) rather than a line."""
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as err:
        raise yaml_error(err, origin, with_line=False) from None
