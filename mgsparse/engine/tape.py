"""Tapes: the ops of a step recorded once, then run again without the Python that called them.

A full-batch epoch calls the same ops in the same order on the same leaves every time; only
values change: the parameters (read from their Tensors at each run), the dropout masks (drawn
inside the ops from a `masks.Draw`) and pooled buffers (taken inside the ops). Between its ops
an eager step also runs the model's Python (module calls, checks, the stack's choices), scans
each op's arguments, guards its saved inputs and walks the graph for the backward. On Cora's
receptive field that is ~390 µs of a 1.4 ms step, more than the whole gap between the kernels
and hand-written numpy (benchmarks/floor_field.py). A `Tape` keeps what a run needs: each op's
Function, where each argument comes from (an earlier op's output, a leaf Tensor, a constant)
and the order the eager backward visited the nodes in. `Tape.run` calls the same forwards,
then the backward over that order through the one backward loop (`autograd.backward_over`):
the same kernels on the same arrays in the same order, so the eager step's bits.

A tape cannot see the Python between its ops: state it changes, or a choice it makes
differently from step to step. Two recordings of a step are therefore compared
(`Tape.same_as`: the same Functions, each argument from the same place, the same leaf
objects, equal constants) and only a step recorded twice alike is replayed; `run.replay`
also refuses a model whose attributes a step changes or whose Python draws from a generator
(a coin flipped between ops, which two recordings may happen to flip alike), and records
again when an attribute changes between steps. What a tape runs again is only what the ops
themselves do: each `forward` and `backward` with the recorded constants (a `masks.Draw`
among them, so a dropout mask is drawn afresh) on the leaves' current arrays. (tinygrad's
TinyJit and CUDA graphs capture and replay the same way.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from mgsparse import kernels
from mgsparse.engine.autograd import backward_over, topological_order
from mgsparse.engine.tensor import Context, Tensor, _GradMode
from mgsparse.errors import MgsparseError

# an argument is an earlier op's output, a leaf Tensor, a constant, or a number made a leaf
# by the op's caller (`Tensor._lift`: `x * 0.5`), new each step but one constant by value
SLOT, LEAF, CONST, LIFTED = 0, 1, 2, 3
_VALUES = (bool, int, float, str, type(None), np.generic, np.dtype)  # constants equal by value


@contextlib.contextmanager
def recording() -> Iterator[list]:
    """Every op applied inside the block, in order, as (Function, arguments, output)."""
    if _GradMode.tape is not None:
        raise MgsparseError("recording(): already recording a tape")
    _GradMode.tape = ops = []
    try:
        yield ops
    finally:
        _GradMode.tape = None


class Tape:
    """One recorded step: its ops (`steps`), the output `run` returns (`root`) and, for a step
    with a backward, the recorded backward order (`order`); see the module."""

    def __init__(self, steps: tuple, root: int, order: tuple | None, grad_enabled: bool):
        self.steps, self.root, self.order = steps, root, order
        self.grad_enabled = grad_enabled
        # a forward-only run drops each output after its last reader; with a backward, the
        # graph holds them all until the backward, as an eager step's does
        self.frees = _last_reads(steps, root) if order is None else ((),) * len(steps)
        leaves = {id(v): v for _, sources, *_ in steps for k, v in sources if k == LEAF}
        self.leaves = tuple((t, (t.requires_grad, t.data.dtype, t.data.shape))
                            for t in leaves.values())

    @classmethod
    def of(cls, ops: list, root: Tensor, backward: bool) -> Tape | None:
        """The tape of recorded `ops` whose output is `root`, with the backward from `root`
        when asked; None when they cannot be replayed: `root` is not one of their outputs, or
        the backward reaches an op recorded before them."""
        slot = {id(out): j for j, (_, _, out) in enumerate(ops)}
        if id(root) not in slot:
            return None
        steps = tuple((fn, tuple(_source(a, slot) for a in args),
                       tuple(isinstance(a, Tensor) and a.requires_grad for a in args),
                       out.requires_grad, out.dtype) for fn, args, out in ops)
        order = None
        if backward:
            nodes = reversed(topological_order(root))
            order = tuple(_source(t, slot) for t in nodes)
            if any(k == LEAF and v._ctx is not None for k, v in order):
                return None
        return cls(steps, slot[id(root)], order, _GradMode.enabled)

    def current(self) -> bool:
        """Whether a run now does what the recorded step did: the grad mode, and every leaf's
        `requires_grad` (a frozen parameter changes which gradients exist), dtype and shape
        as they were (the checks of `Function.apply` that a run skips)."""
        return (_GradMode.enabled == self.grad_enabled
                and all((t.requires_grad, t.data.dtype, t.data.shape) == recorded
                        for t, recorded in self.leaves))

    def same_as(self, other: Tape) -> bool:
        """Whether two recordings are one program (see the module)."""
        return (self.root == other.root and len(self.steps) == len(other.steps)
                and all(a[0] is b[0] and a[2:] == b[2:] and _same_sources(a[1], b[1])
                        for a, b in zip(self.steps, other.steps))
                and (self.order is None) == (other.order is None)
                and (self.order is None or _same_sources(self.order, other.order)))

    def run(self) -> Tensor:
        """The recorded ops again on today's leaves, then (if recorded) the backward from the
        root into the leaves' `.grad`, as `root.backward()` would; returns the root. BLAS on
        one thread throughout, as under `Function.apply` (the same bits), the caller's after."""
        with kernels.one_blas_thread():
            return self._run()

    def _run(self) -> Tensor:
        outs: list[Tensor | None] = []
        for i, (fn, sources, needs, record, dtype) in enumerate(self.steps):
            args = [outs[v] if k == SLOT else v for k, v in sources]
            ctx = Context(fn, tuple(args) if record else (), needs)
            data = fn.forward(ctx, *[a if k == CONST else a.data
                                     for a, (k, _) in zip(args, sources)])
            if type(data) is not np.ndarray or data.dtype != dtype:
                data = Tensor(data, dtype=dtype).data  # as `Function.apply` converts it
            out = Tensor.__new__(Tensor)
            out._set(data, record)
            if record:
                out._ctx = ctx
            outs.append(out)
            for j in self.frees[i]:
                outs[j] = None  # read by no later op: let it go, as an eager pass would
        root = outs[self.root]
        if self.order is not None:
            backward_over([outs[v] if k == SLOT else v for k, v in self.order], root,
                          np.ones_like(root.data), retain_graph=False)
        return root


def _last_reads(steps: tuple, root: int) -> tuple[tuple[int, ...], ...]:
    """Per step, the outputs (not the root) that no later step reads: a forward-only run
    drops them there, so its peak holds what an eager pass holds, not every output."""
    last = {j: j for j in range(len(steps))}  # an output nothing reads goes at once
    for i, (_, sources, *_) in enumerate(steps):
        for k, v in sources:
            if k == SLOT:
                last[v] = i
    frees: list[list[int]] = [[] for _ in steps]
    for j, i in last.items():
        if j != root:
            frees[i].append(j)
    return tuple(map(tuple, frees))


def _source(a: object, slot: dict[int, int]) -> tuple[int, object]:
    if isinstance(a, Tensor):
        if id(a) in slot:
            return SLOT, slot[id(a)]
        return (LEAF, a) if not hasattr(a, "lifted") else (LIFTED, a)
    return CONST, a


def _same_sources(xs: tuple, ys: tuple) -> bool:
    return len(xs) == len(ys) and all(kx == ky and _same_source(kx, vx, vy)
                                      for (kx, vx), (ky, vy) in zip(xs, ys))


def _same_source(kind: int, a: object, b: object) -> bool:
    if kind == SLOT:
        return a == b
    if kind == LEAF:
        return a is b
    if kind == LIFTED:  # the number, and the Tensor it became (its dtype, as `_lift` cast it)
        return a.dtype == b.dtype and a.requires_grad == b.requires_grad and _same(
            a.lifted, b.lifted)
    return _same(a, b)


def _same(a: object, b: object) -> bool:
    """The same constant: one object, or equal numbers and strings, or slices or tuples of
    such. Anything else (an array, a generator, a structure) only as the one object."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, _VALUES):
        return bool(a == b)
    if isinstance(a, slice):
        return _same((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    return isinstance(a, tuple) and len(a) == len(b) and all(map(_same, a, b))
