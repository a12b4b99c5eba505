"""Run configuration: YAML sections become frozen, validated dataclasses, built once.

A config file has up to seven sections (``dataset``, ``model``, ``optim``, ``train``,
``sparse``, ``sampler``, ``monitor``). The package holds one idea per module:

- `sections`: the schema, one frozen dataclass per section, and `Config`;
- `yaml`: the file read as plain data, with the line of each section and key;
- `check`: each value against its field's type and range, then the rules across sections.

This module builds a `Config` from them (`load_config` for a file, `config_from_dict` for
parsed data). Errors are ``ConfigError`` with one line ``<file>:<line>: <section.key>
<problem>`` (or ``--set section.key=value: ...`` for a command-line override), so a user
can jump straight to the bad key. A leaf: it reads the catalog and the errors only.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from mgsparse.config.check import (
    check_combination,
    check_value,
    no_receptive_field,
    show,
    suggest,
)
from mgsparse.config.sections import (
    FILE_KEYS,
    SECTIONS,
    TASKS,
    TRIPLE_KEYS,
    Config,
    DatasetConfig,
    KgConfig,
    LinkConfig,
    ModelConfig,
    MonitorConfig,
    OptimConfig,
    SamplerConfig,
    SparseConfig,
    TrainConfig,
)
from mgsparse.config.yaml import Where, parse_value, parse_yaml
from mgsparse.errors import ConfigError

__all__ = [
    "FILE_KEYS", "SECTIONS", "TASKS", "Config", "DatasetConfig", "KgConfig", "LinkConfig", "ModelConfig",
    "MonitorConfig", "OptimConfig", "SamplerConfig", "SparseConfig", "TrainConfig",
    "config_from_dict", "load_config", "no_receptive_field",
]


# ---------------------------------------------------------------- building sections

def _unknown(kind: str, name: Any, options: Sequence[str], where: str,
             parent: str = "") -> ConfigError:
    """An unknown section or key, with the closest known name (or the list of them)."""
    if not isinstance(name, str):
        inside = f" in section {parent}" if parent else ""
        return ConfigError(f"{where}: {kind} names must be strings (got {show(name)}{inside})")
    dotted = f"{parent}.{name}" if parent else name
    hint = suggest(name, options) or f" (known: {', '.join(options)})"
    return ConfigError(f"{where}: unknown {kind} {dotted}{hint}")


def _build_section(cls: type, name: str, raw: Any, where: Where) -> Any:
    """Check a section's keys in file order and build its frozen dataclass."""
    if raw is None:  # `optim:` followed only by comments means "all defaults"
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where((name,))}: {name} must be a mapping of keys "
                          f"(got {show(raw)})")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in raw.items():
        path = (name, key)
        if key not in fields:
            raise _unknown("key", key, list(fields), where(path), name)
        try:
            values[key] = check_value(value, hints[key], fields[key].metadata, f"{name}.{key}")
        except ConfigError as err:
            raise ConfigError(f"{where(path)}: {err}") from None
    for key, spec in fields.items():
        if key not in values and spec.default is dataclasses.MISSING:
            options = ", ".join(typing.get_args(hints[key]))
            raise ConfigError(f"{where((name, key))}: {name}.{key} is required "
                              f"(one of {options})")
    return cls(**values)


# ---------------------------------------------------------------- overrides

Override = str | tuple[str, str]  # "section.key=value", or (that, what the user typed)


def _apply_override(data: dict, override: Override, where: Where) -> None:
    """Apply one ``section.key=value`` option; the value is read as YAML (null, 1e-3, [a, b]).
    Messages name it as ``--set section.key=value``, or as the option the user typed when the
    override comes with one (``("train.epochs=0", "--epochs 0")``)."""
    text, origin = (override, f"--set {override}") if isinstance(override, str) else override
    dotted, sep, raw_value = text.partition("=")
    dotted = dotted.strip()
    if not sep or (dotted.count(".") != 1 and dotted != "task"):
        raise ConfigError(f"{origin}: expected section.key=value, e.g. --set optim.lr=0.005")
    if dotted == "task":  # the one top-level key
        data["task"], where.overrides[("task",)] = parse_value(raw_value, origin), origin
        return
    section, key = dotted.split(".")
    if section not in SECTIONS:
        raise _unknown("section", section, list(SECTIONS), origin)
    known = [f.name for f in dataclasses.fields(SECTIONS[section])]
    if key not in known:
        raise _unknown("key", key, known, origin, section)
    value = parse_value(raw_value, origin)
    if data.get(section) is None:
        data[section] = {}
    if isinstance(data[section], dict):  # otherwise building the section reports it
        data[section][key] = value
        where.overrides[(section, key)] = origin


def _task(value: Any, where: Where) -> str:
    """The top-level ``task:`` key, one of `TASKS` (node classification when absent)."""
    try:
        return check_value(value, Literal[TASKS], {}, "task")
    except ConfigError as err:
        raise ConfigError(f"{where(('task',))}: {err}") from None


# ---------------------------------------------------------------- public entry points

def _build(data: Any, where: Where, overrides: Sequence[Override]) -> Config:
    """Overrides applied, then every section built in file order (defaults for the rest),
    then the rules across sections: the first problem found is the error."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where(())}: top level must be a mapping of sections "
                          f"(got {show(data)})")
    data = {name: dict(body) if isinstance(body, Mapping) else body
            for name, body in data.items()}
    for text in overrides:
        _apply_override(data, text, where)
    task = _task(data.pop("task", "node"), where)
    for name in data:
        if name not in SECTIONS:
            raise _unknown("section", name, list(SECTIONS), where((name,)))
    ordered = list(data) + [name for name in SECTIONS if name not in data]
    built = {name: _build_section(SECTIONS[name], name, data.get(name), where)
             for name in ordered}
    config = Config(**built, task=task, source=where.source)
    check_combination(config, where)
    return config


def config_from_dict(d: Mapping[str, Any], source: str = "<dict>",
                     overrides: Sequence[Override] = ()) -> Config:
    """Validate an already-parsed mapping (e.g. ``Config.to_dict()`` read back from JSON)."""
    try:
        return _build(d, Where(source), overrides)
    except ConfigError as err:  # a key or value may hold a newline; the CLI shows one line
        raise ConfigError(" ".join(str(err).splitlines())) from None


def load_config(path: str | Path, overrides: Sequence[Override] = ()) -> Config:
    """Read, override (``["optim.lr=0.005", ...]``) and validate a YAML config file."""
    where = Where(str(path))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:  # a directory, no permission...
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    try:
        config = _build(parse_yaml(text, where), where, overrides)
    except ConfigError as err:  # a key or value may hold a newline; the CLI shows one line
        raise ConfigError(" ".join(str(err).splitlines())) from None
    return _files_from(config, Path(path).parent)


def _files_from(config: Config, folder: Path) -> Config:
    """The user's files named relative to the config's folder, made absolute once, so the
    resolved config saved beside a run finds them again from anywhere."""
    ds = config.dataset
    files = {key: _absolute(folder / getattr(ds, key)) for key in (*FILE_KEYS, *TRIPLE_KEYS, "path")
             if getattr(ds, key) is not None}
    if not files:
        return config
    return dataclasses.replace(config, dataset=dataclasses.replace(ds, **files))


def _absolute(path: Path) -> str:
    """`path` resolved; a symlink loop cannot be, so it is only made absolute, and the reader
    then names the file and the loop ("Too many levels of symbolic links")."""
    try:
        return str(path.resolve())
    except (RuntimeError, OSError):  # RuntimeError: Python < 3.13's "Symlink loop from ..."
        return os.path.abspath(path)
