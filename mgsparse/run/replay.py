"""A full-batch step and its scores, run from a tape once the model's Python has nothing to add.

Full-batch node classification calls the same ops every epoch: the training step on the
same rows and the scores on the same rows, only the values change. `Replay` runs such a
computation eagerly, recording it (`engine.tape`), until two consecutive recordings may be
replayed; from then on it runs the tape: the same ops, the same bits, without the module
calls, the argument checks and the graph walk (on Cora that is what separated mgsparse's
epoch from hand-written numpy's).

A tape replays the ops, never the Python between them, so it is run only while that Python
could add nothing. The rules (`run/modelstate.py` marks what they compare):

1. Two consecutive recordings are one program (`Tape.same_as`): a branch taken in one
   epoch and not the next, or a new constant, is no program to replay.
2. A recorded step changes no module attribute (BatchNorm's running statistics, a counter,
   a cache filled): the next step's Python might choose otherwise.
3. Every number a recorded step draws from a generator the model holds (numpy's `Generator`,
   `RandomState` or bit generator, Python's `random.Random`, and numpy's and Python's
   process-wide ones) is an op's draw (a dropout mask drawn inside its op from a
   `masks.Draw`, which the tape draws afresh each run). A coin flipped in Python between
   ops (stochastic depth, LayerDrop) moves the generator by more than the ops' draws, so
   the step stays eager: a tape would neither redraw the coin nor choose by it. Generators
   are compared by their state, never by identity.
4. Before each run the model's attributes are still the objects (or the numbers) the tape
   was recorded with, `training` flags, Tensor values and generator states aside: an
   attribute set between steps (by the scores' forward, by a caller) that the step's Python
   reads sends it back to recording.

A recording the tape cannot hold keeps the computation eager for the rest of the run, and
so do `ATTEMPTS` recordings that broke rule 2 or 3, differed from the one before (a weight
folded anew from running statistics) or found the model changed (rule 4): a first step that
fills a cache only delays the tape, a model whose Python keeps choosing is eager for good.
A tape no longer current (a parameter frozen, another grad mode) is recorded again. Whoever
changes what the computation reads outside the model (the memory budget turning an operand
sparse) takes a new `Replay` (`Task.replay`). Python state outside the model and the
generators it reaches (a global flag, the clock) is not seen: a model that chooses by such
state wants `train.replay: false`.

`train.replay: false` keeps every step eager; the results are the same bits either way
(tests/run/test_replay.py holds every node model to that, tests/run/test_replay_python.py
stochastic depth and a branch on an attribute).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mgsparse.engine import Tensor
from mgsparse.engine.masks import draws_logged
from mgsparse.engine.tape import Tape, recording
from mgsparse.nn.module import Module
from mgsparse.run.modelstate import ModelState, Watch


class Replay:
    """Runs one fixed computation of `model` in `training` mode or in eval mode, eagerly until
    it may run from a tape (see the module). `enabled=False`: always eagerly. An eager run
    sets the mode (`model.train(training)`); a tape reads no module's `training` flag, so
    while it runs the flags are left as they are."""

    ATTEMPTS = 4  # recordings that broke a rule or differed before it stays eager

    def __init__(self, model: Module, training: bool, enabled: bool = True):
        self.model, self.training = model, training
        self.enabled = enabled
        self.params = model.parameters()  # the loop's: the model's structure does not change
        self.tape: Tape | None = None
        self._last: tuple[Tape, Any] | None = None  # the previous recording and its extra
        self._misses = 0
        self._extra: Any = None  # what the eager computation returned beside its Tensor
        self._watch: Watch | None = None  # the model as the tape was recorded on

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
            watched = self._watch.holds()
            if watched and self.tape.current():
                return self.tape.run(), self._extra
            self.tape, self._last, self._watch = None, None, None  # record it again
            if not watched:  # the model's Python may choose otherwise now
                self._miss(None)
        self.model.train(self.training)
        if not self.enabled:
            return _eager(compute, backward)
        before = ModelState(self.model)
        with recording() as ops, draws_logged() as draws:
            out, extra = compute()
        tape = Tape.of(ops, out, backward) if isinstance(out, Tensor) else None
        del ops
        if backward:
            out.backward()
        after = ModelState(self.model)
        if tape is None:
            self.enabled = False  # nothing a tape can hold: eager from now on
        elif before.changed(after) or before.drew_outside_ops(after, draws):
            self._miss(None)  # a cache filled, statistics that move, a coin flipped in Python
        elif self._last is not None and tape.same_as(self._last[0]) and extra == self._last[1]:
            self.tape, self._extra, self._last = tape, extra, None  # two alike in a row
            self._watch = Watch(self.model, after)
        else:
            self._miss((tape, extra))
        return out, extra

    def _miss(self, recording: tuple | None) -> None:
        """A recording that cannot count towards a tape (the first one, one unlike the last,
        one that broke rule 2 or 3; None also for a tape rule 4 dropped); after `ATTEMPTS` of them, the computation stays eager:
        recording every epoch would cost without ever paying."""
        self._misses += self._last is not None or recording is None
        self._last = recording
        self.enabled = self._misses < self.ATTEMPTS


def _eager(compute: Callable[[], tuple[Tensor, Any]], backward: bool) -> tuple:
    out, extra = compute()
    if backward:
        out.backward()
    return out, extra
