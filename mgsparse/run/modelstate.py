"""What a model's Python reads besides its ops' values, marked so a `Replay` can tell whether
a recorded step changed it, drew random numbers of its own, or would now choose differently.

A mark holds the object it marks, never its `id()`: an object freed during a step may leave
its address to a new one, and an id would then call the new object the old. Numbers and
strings are marked by value, Tensors by identity, version and `requires_grad`, a list, tuple
or dict by identity and its items' marks (one level), a generator (numpy's `Generator`,
`RandomState`, a bit generator, Python's `random.Random`) by the object holding its state
(`masks.state_holder`), whose state is kept beside the marks, anything else by identity.
numpy's and Python's process-wide generators (`np.random.rand`, `random.random`) are kept
with them: a model may draw from those too.
"""

from __future__ import annotations

import operator
import random
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.engine.masks import generator_state, state_holder
from mgsparse.nn.module import Module

TENSOR, VALUE, RNG, ITEMS, OBJECT = range(5)
_VALUES = (bool, int, float, complex, str, bytes, type(None), np.generic)


class ModelState:
    """Every module's attributes, marked (see the module), and the generators they reach."""

    def __init__(self, model: Module):
        holders: list = []
        self.marks = tuple((m, tuple((name, _mark(value, holders, True))
                                     for name, value in vars(m).items()))
                           for m in model.modules())
        self.generators = tuple((h, generator_state(h)) for h in holders)
        self.process = _process_state()

    def changed(self, later: ModelState, between_steps: bool = False) -> bool:
        """Whether an attribute differs in `later`. `between_steps`: only what the model's
        Python may read to choose its ops, not what a tape reads afresh each run: a Tensor's
        version (its values), a generator's state (an op's draws), the `training` flags (a
        tape runs in the mode it was recorded in)."""
        return len(self.marks) != len(later.marks) or any(
            a is not b or not _same_attributes(x, y, between_steps)
            for (a, x), (b, y) in zip(self.marks, later.marks))

    def drew_outside_ops(self, later: ModelState, draws: list) -> bool:
        """Whether a generator moved from here to `later` other than by `draws`, the ops'
        draws (`masks.draws_logged`): each must start where the one before ended, and the
        last end where `later` stands. A draw in the model's Python between ops fails it."""
        if self.process != later.process:
            return True
        for holder, state in self.generators:
            for drawn_from, before, after in draws:
                if drawn_from is holder:
                    if before != state:
                        return True
                    state = after
            if state != next((s for h, s in later.generators if h is holder), None):
                return True
        return False


class Watch:
    """The model a tape was recorded on, checked before each run: every module's attribute
    objects, and a list's or dict's items, the same objects (a few µs); where one is not,
    `ModelState.changed(between_steps=True)` decides, and an equal state is watched anew."""

    def __init__(self, model: Module, state: ModelState):
        self.model, self.state = model, state
        self._take()

    def _take(self) -> None:
        model = self.model
        self.fast = tuple((vars(m), tuple(vars(m)), tuple(vars(m).values()))
                          for m in model.modules())
        self.items = tuple((c, _items(c)) for _, _, values in self.fast for c in values
                           if type(c) in (list, dict))

    def holds(self) -> bool:
        """Whether the model's Python would read what it read when the tape was recorded."""
        if (all(len(d) == len(values) and tuple(d) == names and all(map(operator.is_,
                                                                        d.values(), values))
                for d, names, values in self.fast)
                and all(len(now := _items(c)) == len(items) and all(map(operator.is_, now, items))
                        for c, items in self.items)):
            return True
        if self.state.changed(ModelState(self.model), between_steps=True):
            return False
        self._take()  # the same state in other objects (a flag set again): watch these
        return True


def _mark(value: Any, holders: list, expand: bool) -> tuple:
    if isinstance(value, Tensor):
        return TENSOR, value, value._version, value.requires_grad
    if isinstance(value, _VALUES):
        return VALUE, value
    holder = state_holder(value)
    if holder is not None:
        if not any(h is holder for h in holders):
            holders.append(holder)
        return RNG, holder
    if isinstance(value, (list, tuple, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return ITEMS, value, len(value), (
            tuple((k, _mark(v, holders, False)) for k, v in items) if expand else ())
    return OBJECT, value


def _same_attributes(xs: tuple, ys: tuple, between_steps: bool) -> bool:
    return len(xs) == len(ys) and all(
        nx == ny and (between_steps and nx == "training" or _same_mark(x, y, between_steps))
        for (nx, x), (ny, y) in zip(xs, ys))


def _same_mark(a: tuple, b: tuple, between_steps: bool) -> bool:
    if a[0] != b[0]:
        return False
    kind = a[0]
    if kind == VALUE:
        x, y = a[1], b[1]
        return x is y or (type(x) is type(y) and bool(x == y))  # a NaN: only itself
    if a[1] is not b[1]:
        return False
    if kind == TENSOR:
        return a[3] == b[3] and (between_steps or a[2] == b[2])
    if kind == ITEMS:
        return a[2] == b[2] and len(a[3]) == len(b[3]) and all(
            kx == ky and _same_mark(x, y, between_steps)
            for (kx, x), (ky, y) in zip(a[3], b[3]))
    return True  # RNG (its state is compared apart), OBJECT: the same object


def _items(container: list | dict) -> tuple:
    """A list's items, a dict's keys then values: the objects the container holds now."""
    return (*container, *container.values()) if type(container) is dict else tuple(container)


def _process_state() -> tuple:
    """numpy's legacy global generator (`np.random.seed`, `np.random.rand`) and Python's
    `random` module, as values."""
    legacy = np.random.get_state(legacy=False)
    return ((legacy["bit_generator"], legacy["state"]["key"].tobytes(), legacy["state"]["pos"],
             legacy["has_gauss"], legacy["gauss"]), random.getstate())
