"""What one kind of run is: a `Task` gives the loop its model, each epoch's steps and its scores.

The loop (`mgsparse.run.loop`) knows nothing of graphs or point clouds. It asks a task for

- ``build_model(rng)``: a fresh model for one run (its outputs sized to the task's classes);
- ``batches(model, shuffle)``: one epoch of training steps, each a `Batch`: a call that runs
  the forward and returns the loss to differentiate and how many targets it averages over
  (one batch per epoch for full-batch graph training, one per mini-batch otherwise);
- ``evaluate(model)``: validation loss and the accuracies on the three splits (`Scores`);
- ``restore(state)``: the model of a finished run, from its saved parameters;
- ``placed``: the data it holds (`mgsparse.run.placed.PlacedGraph`), whose operands, placement
  and densities the run reports and whose dense -> sparse switch the memory budget pulls.

`mgsparse.run.kinds.make_task(config)` is the one place that decides which kind of run a
config asks for. A new kind of run is a new Task in `mgsparse.run.tasks`, never a new loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.engine import Tensor
from mgsparse.nn.module import Module

Batch = Callable[[], tuple[Tensor, int]]  # -> (loss, number of targets it averages over)
Progress = Callable[..., Any]  # the download progress callback of `mgsparse.data.fetch`


@dataclass(frozen=True)
class Scores:
    """What an evaluation pass measures: validation loss and accuracy on each split."""

    val_loss: float
    train_acc: float
    val_acc: float
    test_acc: float


class Task(ABC):
    """One kind of run on one dataset, loaded and placed once for all its runs."""

    config: Config
    placed: Any  # the data as the run holds it: a `mgsparse.run.placed.PlacedGraph`
    budget: int | None = None  # bytes, computed once per run by `make_task`
    estimate_bytes: int = 0  # a training step's estimated peak, set by the budget placement
    budget_events: tuple = ()  # what the placement changed to fit the budget (BudgetEvents)

    @abstractmethod
    def build_model(self, rng: np.random.Generator) -> Module:
        """A fresh model for one run, initialised from `rng`."""

    @abstractmethod
    def batches(self, model: Module, shuffle: np.random.Generator) -> Iterator[Batch]:
        """One epoch of training steps; `shuffle` is the run's own generator for orderings."""

    @abstractmethod
    def evaluate(self, model: Module) -> Scores:
        """Scores of `model` on the task's splits, without building a graph."""

    @property
    def placement(self) -> dict[str, str]:
        """Operand -> how it is stored and why (the placed data's)."""
        return self.placed.placement

    @property
    def densities(self) -> dict[str, float]:
        """Operand -> stored entries / (rows·cols), 1.0 when dense."""
        return self.placed.densities

    def operands(self) -> dict[str, Any]:
        """The data every step reads, by name (features, adjacency): what the run holds."""
        return self.placed.operands()

    # A task may collect across processes (a partitioned run) or bound its own memory: the
    # loop asks these two, whose defaults are a single process under the config's budget.
    reduce_gradients: Callable[[list, float], float] | None = None

    def epoch_figures(self) -> dict[str, float]:
        """What the last epoch's batches were like (sampled runs: batches, mean block nnz and
        sampled nodes), for the live table and epochs.csv; nothing for other tasks."""
        return {}

    def memory_budget(self) -> int | None:
        """Bytes the 80% rule of `mgsparse.run.budget` holds each traced epoch to: the budget
        the operands were placed under (`make_task` computes it once; None: no limit)."""
        return self.budget

    def restore(self, state: dict[str, np.ndarray]) -> Module:
        """The model of a finished run, from its saved parameters, in eval mode."""
        model = self.build_model(np.random.default_rng(0))
        model.load_state_dict(state)
        return model.eval()

    def first_loss(self, model: Module, seed: int) -> Tensor:
        """The loss of a run's first training step, graph kept (to draw it or trace it)."""
        model.train()
        batch = next(iter(self.batches(model, shuffle_generator(seed))))
        return batch()[0]


def shuffle_generator(seed: int) -> np.random.Generator:
    """A run's orderings come from their own stream, so shuffling never shifts the init."""
    return np.random.default_rng([seed, 1])
