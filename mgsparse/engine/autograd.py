"""The backward pass: the graph below a root in topological order, gradients accumulated.

The order comes from an explicit stack (no recursion limit, a deterministic order: parents in
argument order, never a `set`); each op's backward runs once, after every use of its output
has added (`+=`) into the gradient it receives. A gradient whose shape differs from its input's
is refused at once, naming the op.
"""

from __future__ import annotations

import sys
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
    in the same order (the same bits) without walking its graph again."""
    grads: dict[int, np.ndarray] = {id(root): grad}
    for node in nodes:
        g = grads.pop(id(node), None)
        if g is None:
            continue
        ctx = node._ctx
        if ctx is None or node._retain_grad:  # always an ndarray: numpy turns 0-d sums to scalars
            node.grad = _owned(g) if node.grad is None else np.asarray(node.grad + g)
        if ctx is None:
            continue
        if ctx.guards:
            ctx.check_versions()
        in_grads = ctx.fn.backward(ctx, g)
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        for parent, pg, needed in zip(ctx.parents, in_grads, ctx.needs_input_grad):
            if needed and pg is not None:
                _accumulate(grads, ctx.fn, parent, pg)
        in_grads = pg = None  # `grads` alone holds them now (`_owned` counts on it)
        if not retain_graph:
            ctx.free()


def _refs_seen_by_a_callee(g: np.ndarray) -> int:
    return sys.getrefcount(g)


def _unshared_refs() -> int:
    """What `sys.getrefcount` says, inside a function, of an array its caller holds under one
    name and nothing else holds: measured through the same call shape as `_owned`'s (3 on
    CPython 3.11: the caller's name, the parameter, the count's argument), not assumed, since
    interpreters differ in which of those they count."""
    probe = np.empty(1)
    return _refs_seen_by_a_callee(probe)


_UNSHARED = _unshared_refs()


def _owned(g: np.ndarray) -> np.ndarray:
    """A leaf's first gradient: g itself when nothing else can reach it, else a copy.

    Why: the copy was a pass over every weight gradient each step (Cora's 1,433 × 16 input
    weight: ~10 µs of a ~1.8 ms epoch). The op that made g has handed it on and the graph
    holds it nowhere else when only `backward_over`'s own name refers to it; an array shared
    with another input (Add's backward gives both parents the same g), viewed by another array
    (a view holds its base), or kept in a context counts more, and is copied, so no two
    `.grad`s ever share memory and an in-place write to one (clipping) reaches no other.
    torch's AccumulateGrad steals a gradient on the same condition. A row record
    (`kernels.mark_rows`) is dropped: the caller may write its `.grad`."""
    if (type(g) is np.ndarray and g.base is None and g.flags.writeable
            and sys.getrefcount(g) <= _UNSHARED):
        kernels.forget_rows(g)
        return g
    return np.array(g)


def _accumulate(grads: dict, fn: type, parent: Tensor, g: np.ndarray) -> None:
    if g.shape != parent.shape:
        raise ShapeError(
            f"{fn.__name__}.backward returned a gradient of shape {g.shape} "
            f"for an input of shape {parent.shape}"
        )
    g = g.astype(parent.dtype, copy=False)
    key = id(parent)
    if key not in grads:
        grads[key] = g
        return
    total = grads[key] + g
    rows = kernels.known_rows(grads[key]), kernels.known_rows(g)
    if rows[0] is not None and rows[1] is not None:  # zero outside both: outside the union
        kernels.mark_rows(total, np.union1d(*rows))
    grads[key] = total


def graph_contexts(root: Tensor) -> list[Context]:
    """Every op application in the graph below `root`, inputs before outputs."""
    return [t._ctx for t in topological_order(root) if t._ctx is not None]
