"""Checking one config value against its field's annotation and range, with the messages a
user sees (`must be > 0 (got -1)`, `must be one of 'gcn', ... ; did you mean 'gcn'?`).

`mgsparse.config` builds the sections; this module knows only annotations and values.
"""

from __future__ import annotations

import difflib
import math
import operator
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from mgsparse.errors import ConfigError

BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"),
           "le": (operator.le, "<="), "lt": (operator.lt, "<")}


class Bad(Exception):
    """A value that is not ``expected``; the caller adds the key and where it was written."""

    def __init__(self, expected: str, value: Any, hint: str = "") -> None:
        super().__init__(expected)
        self.expected, self.value, self.hint = expected, value, hint


def show(value: Any) -> str:
    """Spell a value the way YAML would, shortened, for error messages."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def suggest(word: Any, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word).lower(), options, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _range_problem(value: float, bounds: Mapping[str, float]) -> str | None:
    """``None`` when ``value`` is inside; else the interval, e.g. ``in [0, 1)`` or ``> 0``."""
    if all(BOUNDS[name][0](value, bound) for name, bound in bounds.items()):
        return None
    if len(bounds) == 2:  # one lower and one upper bound
        opening, low = ("[", bounds["ge"]) if "ge" in bounds else ("(", bounds["gt"])
        closing, high = ("]", bounds["le"]) if "le" in bounds else (")", bounds["lt"])
        return f"in {opening}{low:g}, {high:g}{closing}"
    (name, bound), = bounds.items()
    return f"{BOUNDS[name][1]} {bound:g}"


def _check_scalar(value: Any, hint: Any, meta: Mapping[str, Any]) -> Any:
    """Return ``value`` as type ``hint`` or raise `Bad`; bools are never numbers."""
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if isinstance(value, str) and value in choices:
            return value
        raise Bad(f"one of {', '.join(map(repr, choices))}", value, suggest(value, choices))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise Bad("true or false", value)
    if hint is str:
        if isinstance(value, str) and value:
            return value
        raise Bad("a non-empty string", value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Bad("an integer" if hint is int else "a number", value)
    if not math.isfinite(value):
        raise Bad("a finite number", value)
    if hint is int and value != int(value):
        raise Bad("an integer", value)
    problem = _range_problem(value, meta)
    if problem:
        raise Bad(problem, value)
    return int(value) if hint is int else float(value)


def check_value(value: Any, hint: Any, meta: Mapping[str, Any], key: str) -> Any:
    """Check one field's value against its annotation; ``key`` is the dotted name."""
    nullable = type(None) in typing.get_args(hint)
    words: tuple = ()  # a number that may also be one of some words: `float | Literal["auto"]`
    if nullable or typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and nullable:
            return None
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        words = next((arg for arg in args if typing.get_origin(arg) is Literal), ())
        hint = next(arg for arg in args if arg is not words)
        other = "true or false" if hint is bool else "a number"
        if words and isinstance(value, str):
            hint = words
    if hint is words:
        or_null = f" or {other}"
    else:
        or_null = "".join(f" or {word!r}" for word in typing.get_args(words) if words)
    or_null += " or null" if nullable else ""
    if typing.get_origin(hint) is tuple:
        item_hints = typing.get_args(hint)
        if item_hints[-1:] == (Ellipsis,):  # tuple[int, ...]: a non-empty list of any length
            if not isinstance(value, list) or not value:
                raise ConfigError(f"{key} must be a non-empty list of numbers{or_null} "
                                  f"(got {show(value)})")
            item_hints = item_hints[:1] * len(value)
        if not isinstance(value, list) or len(value) != len(item_hints):
            raise ConfigError(f"{key} must be a list of {len(item_hints)} numbers{or_null} "
                              f"(got {show(value)})")
        checked = []
        for index, (item, item_hint) in enumerate(zip(value, item_hints)):
            try:
                checked.append(_check_scalar(item, item_hint, meta))
            except Bad as bad:
                raise ConfigError(f"{key}[{index}] must be {bad.expected} "
                                  f"(got {show(bad.value)})") from None
        return tuple(checked)
    try:
        return _check_scalar(value, hint, meta)
    except Bad as bad:
        raise ConfigError(f"{key} must be {bad.expected}{or_null} "
                          f"(got {show(bad.value)}){bad.hint}") from None
