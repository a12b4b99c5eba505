"""Learning-rate schedules: `StepLR`, `CosineLR` (linear warmup, cosine decay to a floor) and
`ReduceLROnPlateau`, with PyTorch's interface.

A schedule owns an optimizer and writes each parameter group's "lr" (its base rate is the
group's lr when the schedule is made, kept as "initial_lr" as torch does). As in torch, making
a schedule sets the rate of epoch 0, and `step()` after each epoch moves to the next;
`ReduceLROnPlateau.step(value)` reads the monitored metric instead. `get_last_lr()` is the rate
of each group now; `state_dict()` / `load_state_dict()` hold everything but the optimizer, so
a resumed run continues the sequence exactly.

`make_schedule(name, optimizer, epochs, ...)` builds one from plain settings (the config's
optim section); `step_schedule(schedule, value)` is the one call the training loop makes at
the end of each epoch, whatever the kind.
"""

from __future__ import annotations

import math
from typing import Any

from mgsparse.errors import HyperparameterError

SCHEDULES = ("none", "step", "cosine", "plateau")


class LRScheduler:
    """Base of the closed-form schedules: lr_e = `factor(e)` · base lr, e = `last_epoch`."""

    def __init__(self, optimizer: Any):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self._last_lr: list[float] = []
        self.step()

    def lr_at(self, epoch: int, base: float) -> float:
        raise NotImplementedError

    def step(self) -> None:
        """Move to the next epoch and write its rate into every group."""
        self.last_epoch += 1
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = self.lr_at(self.last_epoch, base)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epoch={self.last_epoch}, lr={self._last_lr})"


class StepLR(LRScheduler):
    """lr_e = base · γ^⌊e / step_size⌋: multiplied by γ every `step_size` epochs (torch's)."""

    def __init__(self, optimizer: Any, step_size: int, gamma: float = 0.1):
        if int(step_size) != step_size or step_size < 1 or not 0 < gamma <= 1:
            raise HyperparameterError(f"StepLR: step_size must be an integer >= 1 and gamma "
                                      f"in (0, 1], got step_size={step_size}, gamma={gamma}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer)

    def lr_at(self, epoch: int, base: float) -> float:
        return base * self.gamma ** (epoch // self.step_size)


class CosineLR(LRScheduler):
    """Linear warmup for `warmup` epochs, then a half cosine from the base rate to `min_lr`:

        e < W:  lr_e = base · (e + 1) / W
        e ≥ W:  lr_e = min_lr + (base − min_lr) · (1 + cos(π (e − W) / (E − W))) / 2

    E = `epochs`. Without warmup this is torch's CosineAnnealingLR(T_max=E, eta_min=min_lr);
    the rate reaches min_lr at e = E, the epoch after the last. Warmup starts at base / W, not
    0, so the first epoch learns.
    """

    def __init__(self, optimizer: Any, epochs: int, warmup: int = 0, min_lr: float = 0.0):
        if int(epochs) != epochs or epochs < 1 or int(warmup) != warmup or warmup < 0:
            raise HyperparameterError(f"CosineLR: epochs must be an integer >= 1 and warmup "
                                      f">= 0, got epochs={epochs}, warmup={warmup}")
        if warmup > epochs:
            raise HyperparameterError(f"CosineLR: warmup ({warmup} epochs) is longer than the "
                                      f"run ({epochs} epochs)")
        if min_lr < 0:
            raise HyperparameterError(f"CosineLR: min_lr must be >= 0, got {min_lr}")
        self.epochs, self.warmup, self.min_lr = int(epochs), int(warmup), float(min_lr)
        super().__init__(optimizer)

    def lr_at(self, epoch: int, base: float) -> float:
        if epoch < self.warmup:
            return base * (epoch + 1) / self.warmup
        span = max(self.epochs - self.warmup, 1)
        progress = min(epoch - self.warmup, span) / span
        return self.min_lr + (base - self.min_lr) * (1 + math.cos(math.pi * progress)) / 2


class ReduceLROnPlateau:
    """Multiply every group's rate by `factor` (not below `min_lr`) once the monitored value
    has not improved for more than `patience` steps (torch's, relative threshold): a value
    improves on the best when it is below best · (1 − threshold) (mode "min": a loss) or above
    best · (1 + threshold) (mode "max": an accuracy). After a cut, `cooldown` steps pass
    before bad steps count again. `step(value)` after each evaluation."""

    def __init__(self, optimizer: Any, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, cooldown: int = 0,
                 min_lr: float = 0.0, eps: float = 1e-8):
        if mode not in ("min", "max"):
            raise HyperparameterError(f"ReduceLROnPlateau: mode must be 'min' or 'max', "
                                      f"got {mode!r}")
        if not 0 < factor < 1 or patience < 0 or cooldown < 0 or min_lr < 0:
            raise HyperparameterError(f"ReduceLROnPlateau: needs factor in (0, 1), patience, "
                                      f"cooldown and min_lr >= 0 (got factor={factor}, "
                                      f"patience={patience}, cooldown={cooldown}, "
                                      f"min_lr={min_lr})")
        self.optimizer, self.mode, self.factor = optimizer, mode, float(factor)
        self.patience, self.threshold, self.cooldown = int(patience), threshold, int(cooldown)
        self.min_lr, self.eps = float(min_lr), eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _better(self, value: float) -> bool:
        if self.mode == "min":
            return value < self.best * (1 - self.threshold)
        return value > self.best * (1 + self.threshold)

    def step(self, value: float) -> None:
        value = float(value)
        self.last_epoch += 1
        if self._better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce(self) -> None:
        for group in self.optimizer.param_groups:
            new = max(group["lr"] * self.factor, self.min_lr)
            if group["lr"] - new > self.eps:
                group["lr"] = new

    get_last_lr = LRScheduler.get_last_lr
    state_dict = LRScheduler.state_dict
    load_state_dict = LRScheduler.load_state_dict
    __repr__ = LRScheduler.__repr__


Schedule = LRScheduler | ReduceLROnPlateau


def make_schedule(name: str, optimizer: Any, epochs: int, step_size: int = 50,
                  gamma: float = 0.5, warmup: int = 0, min_lr: float = 0.0,
                  patience: int = 10, mode: str = "min") -> Schedule | None:
    """The schedule `name` (one of SCHEDULES; "none": None, a constant rate) from plain
    settings: step (step_size, gamma), cosine (epochs, warmup, min_lr), plateau (gamma as
    the factor, patience, min_lr, mode: "min" for a loss, "max" for an accuracy)."""
    if name == "none":
        return None
    if name == "step":
        return StepLR(optimizer, step_size, gamma)
    if name == "cosine":
        return CosineLR(optimizer, epochs, warmup, min_lr)
    if name == "plateau":
        return ReduceLROnPlateau(optimizer, mode, gamma, patience, min_lr=min_lr)
    raise HyperparameterError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}")


def step_schedule(schedule: Schedule | None, value: float | None = None) -> None:
    """End of an epoch: a plateau schedule reads `value` (the selection metric), the others
    move to the next epoch; None (a constant rate) does nothing."""
    if isinstance(schedule, ReduceLROnPlateau):
        if value is None:
            raise HyperparameterError("ReduceLROnPlateau.step needs the monitored value")
        schedule.step(value)
    elif schedule is not None:
        schedule.step()
