"""The backward pass: the graph below a root in topological order, gradients accumulated.

The order comes from an explicit stack (no recursion limit, a deterministic order: parents in
argument order, never a `set`); each op's backward runs once, after every use of its output
has added (`+=`) into the gradient it receives. A gradient whose shape differs from its input's
is refused at once, naming the op.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from mgsparse import kernels
from mgsparse.engine.tensor import Context, Tensor
from mgsparse.errors import MgsparseError, ShapeError


def topological_order(root: Tensor) -> list[Tensor]:
    """Post-order of the graph below `root`, by an explicit stack (no recursion limit)."""
    order: list[Tensor] = []
    visited: set[int] = {id(root)}
    stack: list[tuple[Tensor, int]] = [(root, 0)]
    while stack:
        node, i = stack.pop()
        parents = node._ctx.parents if node._ctx is not None else ()
        if parents is None:
            raise MgsparseError(
                "backward() through a graph that was already freed; "
                "pass retain_graph=True to the first backward"
            )
        while i < len(parents):
            p = parents[i]
            i += 1
            if isinstance(p, Tensor) and p.requires_grad and id(p) not in visited:
                visited.add(id(p))
                stack.append((node, i))
                stack.append((p, 0))
                break
        else:
            order.append(node)
    return order


def run_backward(root: Tensor, grad: np.ndarray, retain_graph: bool) -> None:
    backward_over(reversed(topological_order(root)), root, grad, retain_graph)


def backward_over(nodes: Iterable[Tensor], root: Tensor, grad: np.ndarray,
                  retain_graph: bool) -> None:
    """The backward from `root` over `nodes`, in reverse topological order: a tape
    (`engine.tape`) passes the order it recorded, so a replayed step adds the same gradients
    in the same order (the same bits) without walking its graph again. BLAS runs on one
    thread meanwhile, as under every op's forward, and at the caller's count after."""
    with kernels.one_blas_thread():
        _backward(nodes, root, grad, retain_graph)


def _backward(nodes: Iterable[Tensor], root: Tensor, grad: np.ndarray,
              retain_graph: bool) -> None:
    """`backward_over`'s loop.

    Every gradient the loop holds carries who may write it (`_accumulate`): the loop alone
    holds it, or it was handed to several parents, or it is someone else's (the caller's
    `grad`, a view, an array a context holds, the very `g` a backward received). A backward
    receives its `g` read-only, so an in-place write raises at once, naming the op."""
    grads: dict[int, tuple[np.ndarray, int]] = {id(root): (grad, _FOREIGN)}
    for node in nodes:
        held = grads.pop(id(node), None)
        if held is None:
            continue
        g, status = held
        ctx = node._ctx
        if ctx is None or node._retain_grad:  # always an ndarray: numpy turns 0-d sums to scalars
            mine = status == _MINE and ctx is None  # a retained g goes on to the backward too
            node.grad = _handed(g, mine) if node.grad is None else np.asarray(node.grad + g)
        if ctx is None:
            continue
        if ctx.guards:
            ctx.check_versions()
        if status != _FOREIGN:  # the loop's own array: flagged in place (`_read_only`)
            g.setflags(write=False)
        else:
            g = _read_only(g)
        try:
            in_grads = ctx.fn.backward(ctx, g)
        except ValueError as err:
            if "read-only" not in str(err):
                raise
            name = ctx.fn.__name__
            raise MgsparseError(
                f"{name}.backward wrote into the gradient it was handed (or another read-only "
                f"array); compute a new array (g * 2), not g *= 2") from err
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        for parent, pg, needed in zip(ctx.parents, in_grads, ctx.needs_input_grad):
            if needed and pg is not None:
                _accumulate(grads, ctx, parent, pg, g, held[0], in_grads)
        if not retain_graph:
            ctx.free()


# Who may write a gradient the loop holds. _MINE: made by a backward and handed to one parent,
# held nowhere else: it may become a leaf's `.grad` as it is. _SHARED: made by a backward but
# handed to several parents (Add gives both the same g): the loop's, never anyone's `.grad`.
# _FOREIGN: someone else's (the caller's, a view, an array a context holds, the `g` a backward
# was handed): never written, never handed over without a copy.
_MINE, _SHARED, _FOREIGN = 0, 1, 2


def _read_only(g: np.ndarray) -> np.ndarray:
    """Someone else's g as a backward receives it: read-only, its flags left as they were. (An
    array the loop made is flagged in place instead, the same object, so that its row record,
    `kernels.mark_rows`, still reads.)"""
    if type(g) is not np.ndarray or not g.flags.writeable:
        return g  # a numpy scalar has nothing to write into
    view = g.view()
    view.flags.writeable = False
    return kernels.same_rows(view, g)  # the rows g is zero outside, if recorded


def _handed(g: np.ndarray, mine: bool) -> np.ndarray:
    """A leaf's first gradient: g itself when the loop alone holds it (`_MINE`), else a copy.

    Why: the copy was a pass over every weight gradient each step (Cora's 1,433 × 16 input
    weight: ~10 µs of a ~1.8 ms epoch), and the common one, x·W's weight gradient, is a fresh
    array from one backward, handed to one parent. Anything else is copied, so no two
    `.grad`s ever share memory and an in-place write to one (clipping) reaches no other.
    torch's AccumulateGrad steals a gradient on a like condition. A row record
    (`kernels.mark_rows`) is dropped: the caller may write its `.grad`."""
    if mine and g.flags.writeable:  # (not a frozen constant)
        kernels.forget_rows(g)
        return g
    return np.array(g)


def _accumulate(grads: dict, ctx: Context, parent: Tensor, g: np.ndarray,
                given: np.ndarray, held: np.ndarray, returned: tuple) -> None:
    """Add `g`, a gradient `ctx`'s backward returned for `parent`, into `grads`, with who may
    write it (`given`: the g the backward received, `held`: the loop's array behind it,
    `returned`: everything the backward returned). Decided by identity alone, what the loop knows it made, never by what a
    reference count suggests; a backward reaches arrays only through its context, so its
    saved arrays and attributes are the ones checked."""
    if g.shape != parent.shape:
        raise ShapeError(f"{ctx.fn.__name__}.backward returned a gradient of shape {g.shape} "
                         f"for an input of shape {parent.shape}")
    cast = g.astype(parent.dtype, copy=False)
    if cast is not g:  # a new array, the loop's alone (a numpy scalar is copied when handed)
        g, status = cast, _MINE if type(cast) is np.ndarray else _FOREIGN
    else:
        status = _status(g, ctx, given, held, returned)
    key = id(parent)
    before = grads.get(key)
    if before is None:
        grads[key] = (g, status)
        return
    total = before[0] + g
    rows = kernels.known_rows(before[0]), kernels.known_rows(g)
    if rows[0] is not None and rows[1] is not None:  # zero outside both: outside the union
        kernels.mark_rows(total, np.union1d(*rows))
    grads[key] = (total, _MINE if type(total) is np.ndarray else _FOREIGN)


def _status(g: np.ndarray, ctx: Context, given: np.ndarray, held: np.ndarray,
            returned: tuple) -> int:
    if type(g) is not np.ndarray or g.base is not None or g is given or g is held:
        return _FOREIGN
    saved, attrs = ctx.saved_tensors, ctx.__dict__
    if saved:
        for a in saved:
            if a is g:
                return _FOREIGN
    if attrs:
        for a in attrs.values():
            if a is g:
                return _FOREIGN
    n = len(returned)
    if n == 2:  # the common case: x·y, x + y
        return _SHARED if returned[0] is returned[1] else _MINE
    if n > 2:
        times = 0
        for other in returned:
            times += other is g
        if times > 1:
            return _SHARED
    return _MINE


def graph_contexts(root: Tensor) -> list[Context]:
    """Every op application in the graph below `root`, inputs before outputs."""
    return [t._ctx for t in topological_order(root) if t._ctx is not None]
