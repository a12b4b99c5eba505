"""Gradient check of a whole model: its input features and every parameter at once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mgsparse import Tensor, gradcheck
from mgsparse.nn.module import Module


def _owner(model: Module, dotted: str) -> tuple[Module, str]:
    *path, leaf = dotted.split(".")
    owner = model
    for part in path:
        owner = owner[int(part)] if part.isdigit() else getattr(owner, part)
    return owner, leaf


def model_gradcheck(model: Module, x: np.ndarray, call: Callable[[Module, Tensor], Tensor],
                    training: bool = False, **tolerances: float):
    """gradcheck of call(model, x) w.r.t. x and every parameter: the checker's float64 copies
    are installed as the model's parameters before each forward (eval mode unless `training`:
    batch statistics; a model checked in training needs dropout 0)."""
    names = [name for name, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    model.train(training)

    def f(x, *copies):
        for name, p in zip(names, copies):
            owner, leaf = _owner(model, name)
            setattr(owner, leaf, p)
        return call(model, x)

    return gradcheck(f, [Tensor(x, requires_grad=True), *params], **tolerances)
