"""Optimizers and learning-rate schedules: `optimizers` (SGD, Adam, AdamW, `clip_grad_norm_`,
PyTorch's update rules) and `schedules` (step, cosine with warmup, reduce on plateau)."""

from mgsparse.optim.optimizers import SGD, Adam, AdamW, Optimizer, clip_grad_norm_
from mgsparse.optim.schedules import (
    SCHEDULES,
    CosineLR,
    LRScheduler,
    ReduceLROnPlateau,
    StepLR,
    make_schedule,
    step_schedule,
)

__all__ = [
    "SCHEDULES", "SGD", "Adam", "AdamW", "CosineLR", "LRScheduler", "Optimizer",
    "ReduceLROnPlateau", "StepLR", "clip_grad_norm_", "make_schedule", "step_schedule",
]
