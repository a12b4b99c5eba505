"""A full-batch step and its scores, run from a tape once the model's Python has nothing to add.

Full-batch node classification calls the same ops every epoch: the training step on the
same rows and the scores on the same rows, only the values change. `Replay` runs such a
computation eagerly, recording it (`engine.tape`), until two consecutive recordings are the
same program and neither changed the model's attributes; from then on it runs the tape: the
same ops, the same bits, without the module calls, the argument checks and the graph walk
(on Cora that is what separated mgsparse's epoch from hand-written numpy's). A recording the
tape cannot hold keeps the computation eager for the rest of the run, and so do `ATTEMPTS`
recordings that changed the model (BatchNorm's running statistics, a counter) or differed
from the one before (a weight folded anew from those statistics): a first step that fills a
cache only delays the tape. A tape no longer current (a parameter frozen, another grad mode)
is recorded again. Whoever changes what the computation reads outside the
model (the memory budget turning an operand sparse) takes a new `Replay` (`Task.replay`).

`train.replay: false` keeps every step eager; the results are the same bits either way
(tests/run/test_replay.py holds every node model to that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mgsparse.engine import Tensor
from mgsparse.engine.tape import Tape, recording
from mgsparse.nn.module import Module


class Replay:
    """Runs one fixed computation of `model` in `training` mode or in eval mode, eagerly until
    it may run from a tape (see the module). `enabled=False`: always eagerly. An eager run
    sets the mode (`model.train(training)`); a tape reads no module's `training` flag, so
    while it runs the flags are left as they are."""

    ATTEMPTS = 4  # recordings that changed the model or differed before it stays eager

    def __init__(self, model: Module, training: bool, enabled: bool = True):
        self.model, self.training = model, training
        self.enabled = enabled
        self.params = model.parameters()  # the loop's: the model's structure does not change
        self.tape: Tape | None = None
        self._last: tuple[Tape, Any] | None = None  # the previous recording and its extra
        self._misses = 0
        self._extra: Any = None  # what the eager computation returned beside its Tensor

    @property
    def replaying(self) -> bool:
        return self.tape is not None

    def step(self, batch: Callable[[], tuple[Tensor, Any]]) -> tuple[Tensor, Any]:
        """`batch()`'s (loss, extra), the loss's backward run into the parameters' `.grad`."""
        return self._run(batch, backward=True)

    def forward(self, compute: Callable[[], Tensor]) -> Tensor:
        """`compute()`, the model's output, no backward (call it under `no_grad`)."""
        return self._run(lambda: (compute(), None), backward=False)[0]

    def _run(self, compute: Callable[[], tuple[Tensor, Any]], backward: bool) -> tuple:
        if self.tape is not None:
            if self.tape.current():
                return self.tape.run(), self._extra
            self.tape, self._last = None, None  # record it again
        self.model.train(self.training)
        if not self.enabled:
            return _eager(compute, backward)
        before = model_state(self.model)
        with recording() as ops:
            out, extra = compute()
        tape = Tape.of(ops, out, backward) if isinstance(out, Tensor) else None
        del ops
        if backward:
            out.backward()
        if tape is None:
            self.enabled = False  # nothing a tape can hold: eager from now on
        elif model_state(self.model) != before:  # a cache filled, or statistics that move
            self._miss(None)
        elif self._last is not None and tape.same_as(self._last[0]) and extra == self._last[1]:
            self.tape, self._extra, self._last = tape, extra, None  # two alike in a row
        else:
            self._miss((tape, extra))
        return out, extra

    def _miss(self, recording: tuple | None) -> None:
        """A recording that cannot count towards a tape (the first one, one unlike the last,
        one that changed the model); after `ATTEMPTS` of them, the computation stays eager:
        recording every epoch would cost without ever paying."""
        self._misses += self._last is not None or recording is None
        self._last = recording
        self.enabled = self._misses < self.ATTEMPTS


def _eager(compute: Callable[[], tuple[Tensor, Any]], backward: bool) -> tuple:
    out, extra = compute()
    if backward:
        out.backward()
    return out, extra


def model_state(model: Module) -> tuple:
    """What a step may change in the model outside its ops' values: every module's
    attributes, a Tensor by identity, version and `requires_grad`, a number or string by
    value, a container by identity and length, anything else by identity."""
    return tuple(tuple((name, _mark(value)) for name, value in vars(m).items())
                 for m in model.modules())


def _mark(value: Any) -> Any:
    if isinstance(value, Tensor):
        return id(value), value._version, value.requires_grad
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if isinstance(value, (list, tuple, dict)):
        return id(value), len(value)
    return id(value)
