"""Optimizers (SGD, Adam, AdamW) with parameter groups, and `clip_grad_norm_`.

The update rules follow PyTorch's `torch.optim` to the letter, so its recipes carry over
(e.g. the GCN recipe: Adam, lr 0.01, weight decay 5e-4 on the first layer only, as two
parameter groups). Every update writes into `p.data` in place with numpy `out=` arithmetic:
temporaries live in one reusable workspace per dtype, so a step allocates nothing after
the first.

Bad hyperparameters (lr <= 0, negative weight decay or momentum, betas outside [0, 1),
unknown group options) raise `HyperparameterError`: an `MgsparseError` the CLI reports as a
usage error (exit 2), and a `ValueError`, as PyTorch raises.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError, MgsparseError, ShapeError
from mgsparse.kernels import modified_in_place
from mgsparse.optim.flat import FlatGroup, adam_update, flat_group

# ---------------------------------------------------------------- base


class Optimizer:
    """Holds `param_groups` (dicts: "params" plus that group's options) and per-parameter `state`.

    `params` is an iterable of Tensors, or of dicts `{"params": [...], "lr": ..., ...}` whose
    options override the constructor's defaults for that group only.
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}  # id(param) -> its buffers
        self._workspace: dict[np.dtype, np.ndarray] = {}
        self._views: dict[tuple, tuple] = {}  # (dtype, shape, count) -> (workspace, views)
        self._flat: dict[int, FlatGroup] = {}  # group index -> its flat update (Adam's)
        params = [params] if isinstance(params, Tensor) else list(params)
        if not params:
            raise HyperparameterError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        options = {k: v for k, v in group.items() if k != "params"}
        unknown = [k for k in options if k not in self.defaults]
        if unknown:
            near = difflib.get_close_matches(unknown[0], list(self.defaults), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise HyperparameterError(
                f"{type(self).__name__}: unknown parameter-group option {unknown[0]!r}{hint}")
        params = group.get("params", [])
        params = [params] if isinstance(params, Tensor) else list(params)
        if not params:
            raise HyperparameterError(f"{type(self).__name__}: a parameter group has no params")
        owned = {id(p) for g in self.param_groups for p in g["params"]}
        for p in params:
            if not isinstance(p, Tensor):
                raise HyperparameterError(
                    f"{type(self).__name__}: params must be Tensors, got {type(p).__name__}")
            if id(p) in owned:
                raise HyperparameterError(
                    f"{type(self).__name__}: a parameter appears in more than one group")
            owned.add(id(p))
        full = {"params": params, **self.defaults, **options}
        self._validate(full)
        self.param_groups.append(full)

    def _validate(self, group: dict[str, Any]) -> None:
        _check_number(self, group, "lr", low=0.0, low_open=True)
        _check_number(self, group, "weight_decay", low=0.0)

    def zero_grad(self) -> None:
        """Set every parameter's `.grad` to None (untouched parameters are then skipped)."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    with modified_in_place(p):  # a graph that saved p now refuses its backward
                        self._update(p, p.grad, group)

    def _update(self, p: Tensor, grad: np.ndarray, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _scratch(self, p: Tensor, count: int) -> tuple[np.ndarray, ...]:
        """`count` temporaries shaped like p, carved from a flat buffer that only ever grows
        (the views of a shape are kept with the buffer they were carved from)."""
        data = p.data
        buf = self._workspace.get(data.dtype)
        key = (data.dtype, data.shape, count)
        hit = self._views.get(key) if buf is not None else None
        if hit is not None and hit[0] is buf:
            return hit[1]
        n = data.size
        if buf is None or buf.size < n * count:
            buf = np.empty(n * count, dtype=data.dtype)
            self._workspace[data.dtype] = buf
        views = tuple(buf[i * n:(i + 1) * n].reshape(data.shape) for i in range(count))
        self._views[key] = (buf, views)
        return views

    # ------------------------------------------------------------ checkpoints and memory

    def _ordered_params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self) -> dict[str, Any]:
        """`{"state": {index: {name: copy}}, "param_groups": [{options, "params": [index]}]}`,
        parameters numbered in group order (PyTorch's layout, so nothing holds a live array)."""
        params = self._ordered_params()
        state = {i: {k: (v.copy() if isinstance(v, np.ndarray) else v)
                     for k, v in self.state[id(p)].items()}
                 for i, p in enumerate(params) if id(p) in self.state}
        groups, start = [], 0
        for g in self.param_groups:
            count = len(g["params"])
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": list(range(start, start + count))})
            start += count
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and buffers saved by `state_dict` for the same parameter layout."""
        groups = state_dict["param_groups"]
        sizes = [len(g["params"]) for g in groups]
        mine = [len(g["params"]) for g in self.param_groups]
        if sizes != mine:
            raise MgsparseError(f"{type(self).__name__}.load_state_dict: saved groups hold "
                                f"{sizes} parameters, this optimizer's hold {mine}")
        for group, saved in zip(self.param_groups, groups):
            candidate = {**group, **{k: v for k, v in saved.items() if k != "params"}}
            self._validate(candidate)
            group.update(candidate)
        params = self._ordered_params()
        self.state = {}
        for index, buffers in state_dict["state"].items():
            p = params[int(index)]
            self.state[id(p)] = {k: _restore(p, k, v, int(index)) for k, v in buffers.items()}

    def state_nbytes(self) -> int:
        """Bytes the optimizer holds: per-parameter buffers plus its scratch workspace."""
        buffers = sum(v.nbytes for s in self.state.values() for v in s.values()
                      if isinstance(v, np.ndarray))
        return (buffers + sum(b.nbytes for b in self._workspace.values())
                + sum(f.scratch_nbytes for f in self._flat.values()))

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            opts = ", ".join(f"{k}={v}" for k, v in g.items() if k != "params")
            lines.append(f"  group {i}: {len(g['params'])} params, {opts}")
        return "\n".join(lines + [")"])


def _restore(p: Tensor, name: str, value: Any, index: int) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    if value.shape != p.shape:
        raise ShapeError(f"optimizer state {name!r} of parameter {index}: saved shape "
                         f"{value.shape} != parameter shape {p.shape}")
    return value.astype(p.dtype, copy=True)


def _check_number(opt: Optimizer, group: dict, key: str, low: float, high: float = math.inf,
                  low_open: bool = False, high_open: bool = False) -> None:
    value = group[key]
    name = type(opt).__name__
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise HyperparameterError(f"{name}: {key} must be a number, got {value!r}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        raise HyperparameterError(f"{name}: {key} must be in {lo}{low}, {high}{hi}, got {value}")


# ---------------------------------------------------------------- SGD


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov and L2 weight decay.

    g ← ∇ + wd·p;  with momentum μ: b ← μ·b + g (b = g on the first step), and
    g ← g + μ·b (Nesterov) or g ← b;  then p ← p − lr·g.
    """

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "nesterov": nesterov,
                                  "weight_decay": weight_decay})

    def _validate(self, group: dict[str, Any]) -> None:
        super()._validate(group)
        _check_number(self, group, "momentum", low=0.0)
        if group["nesterov"] and group["momentum"] <= 0:
            raise HyperparameterError("SGD: nesterov=True needs a momentum > 0")

    def _update(self, p: Tensor, grad: np.ndarray, group: dict[str, Any]) -> None:
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        s, t = self._scratch(p, 2)
        g = grad
        if wd:
            np.multiply(p.data, wd, out=s)
            g = np.add(s, grad, out=s)
        if mu:
            state = self.state.setdefault(id(p), {})
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.copy()
            else:
                buf *= mu
                buf += g
            if group["nesterov"]:
                np.multiply(buf, mu, out=t)
                g = np.add(t, g, out=t)
            else:
                g = buf
        np.multiply(g, lr, out=t)
        np.subtract(p.data, t, out=p.data)


# ---------------------------------------------------------------- Adam and AdamW


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction and L2 weight decay added to the gradient.

    g ← ∇ + wd·p;  m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²;  at step t
    p ← p − lr/(1−β₁ᵗ) · m / (√v / √(1−β₂ᵗ) + ε).
    """

    decoupled_weight_decay = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay})

    def _validate(self, group: dict[str, Any]) -> None:
        super()._validate(group)
        _check_number(self, group, "eps", low=0.0)
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise HyperparameterError(f"{type(self).__name__}: betas must be a pair, got {betas!r}")
        for i, beta in enumerate(betas):
            _check_number(self, {f"betas[{i}]": beta}, f"betas[{i}]", low=0.0, high=1.0,
                          high_open=True)

    def step(self) -> None:
        """One update of every parameter that has a gradient: a group's parameters of one
        dtype and step together in one flat update (`optim.flat`, bitwise `_update`'s)."""
        for index, group in enumerate(self.param_groups):
            live = [p for p in group["params"] if p.grad is not None]
            flat = flat_group(self._flat, index, live, self.state)
            if flat is not None:
                flat.step(group, self.state, self.decoupled_weight_decay)
                continue
            for p in live:
                with modified_in_place(p):  # a graph that saved p now refuses its backward
                    self._update(p, p.grad, group)

    def _update(self, p: Tensor, grad: np.ndarray, group: dict[str, Any]) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        s, t = self._scratch(p, 2)
        g = grad
        if wd and self.decoupled_weight_decay:
            p.data *= 1.0 - lr * wd
        elif wd:
            np.multiply(p.data, wd, out=s)
            g = np.add(s, grad, out=s)
        state = self.state.get(id(p))
        if state is None:
            state = self.state[id(p)] = {"step": 0, "exp_avg": np.zeros_like(p.data),
                                         "exp_avg_sq": np.zeros_like(p.data)}
        state["step"] += 1
        adam_update(g, state["exp_avg"], state["exp_avg_sq"], t, lr, b1, b2, eps, state["step"])
        np.subtract(p.data, t, out=p.data)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p ← p·(1 − lr·wd) before the
    Adam step, which then sees the plain gradient, so decay is not rescaled by √v."""

    decoupled_weight_decay = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


# ---------------------------------------------------------------- gradient clipping


def clip_grad_norm_(params: Iterable[Tensor] | Tensor, max_norm: float) -> float:
    """Scale all gradients in place so their global L2 norm is at most `max_norm`.

    Returns the norm *before* clipping, ‖(g₁, …, g_k)‖₂ = √Σ‖gᵢ‖², over the parameters that
    have a gradient (0.0 if none). When it exceeds max_norm, every gradient is multiplied by
    max_norm / (norm + 1e-6) (PyTorch's coefficient). A non-finite norm leaves the gradients
    untouched and is returned as is, for the caller to raise the alarm.
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real) or not max_norm > 0:
        raise HyperparameterError(f"clip_grad_norm_: max_norm must be > 0, got {max_norm!r}")
    params = [params] if isinstance(params, Tensor) else list(params)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        total = math.sqrt(sum(float(np.dot(g.ravel(), g.ravel())) for g in grads))
    if math.isfinite(total):
        coef = max_norm / (total + 1e-6)
        if coef < 1.0:
            for g in grads:
                g *= coef
    return total
