"""`Module` and `Parameter`: trainable weights found by walking a model's attributes.

A `Parameter` is a `Tensor` that asks for a gradient. A `Module` needs no registration
calls: its parameters and submodules are whatever its attributes hold (directly, or inside
a list, tuple or dict), in the order the attributes were first assigned — so
`named_parameters()` is deterministic and reads like the constructor
(`layers.0.weight`, `layers.0.bias`, ...). A parameter shared by two modules is reported
once, under the first name it is reached by. A `Buffer` (BatchNorm's running statistics) is
found the same way and saved in `state_dict` next to the parameters, but never trained.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import MgsparseError, ShapeError
from mgsparse.kernels import modified_in_place


class Parameter(Tensor):
    """A Tensor a `Module` owns and an optimizer updates: `requires_grad=True`, and float32
    unless `dtype` says otherwise — even from float64 numpy data (`np.ones(3)`), since a
    float64 weight in a float32 model would be refused by every op it meets.

    The data is always copied (as `torch.nn.Parameter(torch.tensor(a))`): an optimizer step
    writes into the parameter, never into the caller's array or another Tensor's."""

    def __init__(self, data: Any, dtype: Any = np.float32, requires_grad: bool = True):
        data = np.array(data.data if isinstance(data, Tensor) else data, dtype=dtype)
        super().__init__(data, dtype=dtype, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return f"Parameter(shape={self.shape}, dtype={self.dtype})"


class Buffer(Tensor):
    """A Tensor a `Module` owns that no optimizer updates (torch's `register_buffer`): saved in
    `state_dict` and restored by `load_state_dict` like a parameter, never asking for a
    gradient. The data is copied; the module writes it through `modified_in_place`."""

    def __init__(self, data: Any, dtype: Any = np.float32):
        data = np.array(data.data if isinstance(data, Tensor) else data, dtype=dtype)
        super().__init__(data, dtype=dtype)

    def __repr__(self) -> str:
        return f"Buffer(shape={self.shape}, dtype={self.dtype})"


@dataclass(frozen=True)
class LoadResult:
    """What `load_state_dict(strict=False)` skipped (both empty after a strict load)."""

    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)


def _members(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """(dotted name, Parameter | Buffer | Module) held by one attribute value; containers
    expanded once."""
    if isinstance(value, _MEMBERS):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if isinstance(item, _MEMBERS):
                yield f"{name}.{i}", item
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, _MEMBERS):
                yield f"{name}.{key}", item


class Module:
    """Base of every layer and model: subclasses set attributes in `__init__` and define `forward`."""

    training = True  # class default, so a subclass that skips super().__init__() still works

    def __init__(self) -> None:
        self.training = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ discovery

    def _direct_members(self) -> Iterator[tuple[str, Any]]:
        for attr, value in vars(self).items():
            if isinstance(value, _HOLDERS):  # most attributes hold plain values: one check
                yield from _members(value, attr)

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Direct submodules, in attribute-assignment order."""
        seen: set[int] = set()
        for name, member in self._direct_members():
            if isinstance(member, Module) and id(member) not in seen:
                seen.add(id(member))
                yield name, member

    def children(self) -> Iterator[Module]:
        return (m for _, m in self.named_children())

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module (name `prefix`) and every submodule below it, depth first, each once."""
        seen: set[int] = {id(self)}
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            yield name, module
            below = [(f"{name}.{n}" if name else n, m) for n, m in module.named_children()
                     if id(m) not in seen]
            seen.update(id(m) for _, m in below)
            stack.extend(reversed(below))

    def modules(self) -> Iterator[Module]:
        """This module and every submodule below it, depth first, each once (the order of
        `named_modules`, without building the names: `train()` walks it every epoch)."""
        seen: set[int] = {id(self)}
        stack: list[Module] = [self]
        while stack:
            module = stack.pop()
            yield module
            below = []
            for m in module._child_modules():
                if id(m) not in seen:
                    seen.add(id(m))
                    below.append(m)
            stack.extend(reversed(below))

    def _child_modules(self) -> list[Module]:
        """Direct submodules in attribute order, as `named_children` finds them (repeats kept)."""
        out = []
        for value in vars(self).values():
            if not isinstance(value, _WALKED):  # most attributes hold plain values: one check
                continue
            if isinstance(value, Module):
                out.append(value)
            else:
                items = value.values() if isinstance(value, dict) else value
                out.extend(item for item in items if isinstance(item, Module))
        return out

    def named_parameters(self, prefix: str = "") -> list[tuple[str, Parameter]]:
        """(dotted name, Parameter) for every parameter below this module, each once.

        Order: a module's own parameters and submodules interleaved as its attributes were
        assigned, submodules expanded depth first.
        """
        out: list[tuple[str, Parameter]] = []
        self._collect(Parameter, prefix, out, set(), {id(self)})
        return out

    def named_buffers(self, prefix: str = "") -> list[tuple[str, Buffer]]:
        """(dotted name, Buffer) for every buffer below this module, each once, in the order
        of `named_parameters`."""
        out: list[tuple[str, Buffer]] = []
        self._collect(Buffer, prefix, out, set(), {id(self)})
        return out

    def _collect(self, kind: type, prefix: str, out: list, seen: set, visiting: set) -> None:
        for name, member in self._direct_members():
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(member, Module):
                if id(member) not in visiting:  # the guard stops reference cycles
                    visiting.add(id(member))
                    member._collect(kind, full, out, seen, visiting)
            elif isinstance(member, kind) and id(member) not in seen:
                seen.add(id(member))
                out.append((full, member))

    def parameters(self) -> list[Parameter]:
        """Every parameter, as a list (safe to pass to an optimizer and to iterate again)."""
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters())

    # ------------------------------------------------------------ modes and gradients

    def train(self, mode: bool = True) -> Module:
        """Set `.training` on this module and every submodule (Dropout reads it)."""
        for module in self.modules():
            module.training = bool(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        """Drop every parameter's gradient (`None`, so optimizers skip untouched parameters)."""
        for p in self.parameters():
            p.grad = None

    # ------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameter and buffer name -> a copy of its array (later training does not change
        the copy); the parameters first, then the buffers."""
        return {name: p.data.copy() for name, p in self.named_parameters() + self.named_buffers()}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> LoadResult:
        """Copy arrays into the parameters and buffers in place (cast to each one's dtype).

        Shapes must always match. With `strict`, the key sets must be equal too; otherwise
        the keys on either side that had no partner are returned.
        """
        params = dict(self.named_parameters() + self.named_buffers())
        missing = [k for k in params if k not in state]
        unexpected = [k for k in state if k not in params]
        if strict and (missing or unexpected):
            parts = [f"missing keys {missing}" if missing else "",
                     f"unexpected keys {unexpected}" if unexpected else ""]
            raise MgsparseError(
                f"load_state_dict into {type(self).__name__}: {'; '.join(p for p in parts if p)}"
            )
        bad = [f"{k}: checkpoint {np.shape(state[k])} vs model {p.shape}"
               for k, p in params.items() if k in state and np.shape(state[k]) != p.shape]
        if bad:
            raise ShapeError(f"load_state_dict into {type(self).__name__}: shape mismatch for "
                             + ", ".join(bad))
        for k, p in params.items():
            if k in state:
                with modified_in_place(p) as data:
                    data[...] = np.asarray(state[k], dtype=p.dtype)
        return LoadResult(missing, unexpected)

    # ------------------------------------------------------------ display

    def extra_repr(self) -> str:
        """The constructor arguments shown inside `Name(...)`; layers override it."""
        return ""

    def __repr__(self) -> str:
        children = list(self.named_children())
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"{type(self).__name__}("]
        if self.extra_repr():
            lines.append(f"  {self.extra_repr()}")
        for name, child in children:
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        lines.append(")")
        return "\n".join(lines)


_MEMBERS = (Parameter, Buffer, Module)  # what an attribute can hold that the walk reports
_HOLDERS = (*_MEMBERS, list, tuple, dict)  # ... directly or inside a container
_WALKED = (Module, list, tuple, dict)  # what may hold a submodule


# ---------------------------------------------------------------- containers


class ModuleList(Module):
    """A list of modules whose parameters are named `0.weight`, `1.weight`, ..."""

    def __init__(self, modules: Any = ()) -> None:
        super().__init__()
        self._size = 0
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise MgsparseError(f"{type(self).__name__} holds Modules, got {type(module).__name__}")
        setattr(self, str(self._size), module)
        self._size += 1
        return self

    def extend(self, modules: Any) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Module]:
        return (getattr(self, str(i)) for i in range(self._size))

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):  # same container type (Sequential stays Sequential)
            out = type(self).__new__(type(self))
            ModuleList.__init__(out, list(self)[idx])
            return out
        if not -self._size <= idx < self._size:
            raise IndexError(f"index {idx} out of range for {type(self).__name__} of {self._size}")
        return getattr(self, str(idx % self._size))


class Sequential(ModuleList):
    """Modules applied one after another: `Sequential(a, b)(x) == b(a(x))`."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x: Any) -> Any:
        for module in self:
            x = module(x)
        return x
