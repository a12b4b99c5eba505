"""What one op application remembers for its backward (torch's `ctx`), and the in-place guard
on the input arrays it saved: read-only while the context lives, a version check before the
backward runs (`kernels.inplace` holds the locks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mgsparse.errors import MgsparseError
from mgsparse.kernels import lock, unlock

if TYPE_CHECKING:
    from mgsparse.engine.tensor import Tensor


class Context:
    """What one op application remembers for its backward (torch's `ctx`)."""

    __slots__ = (
        "__dict__",
        "fn",
        "guards",
        "needs_input_grad",
        "parents",
        "saved_tensors",
    )

    def __init__(self, fn: type, parents: tuple, needs_input_grad: tuple[bool, ...]):
        self.fn = fn
        self.parents = parents  # the op's positional arguments: Tensors and constants
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple = ()
        self.guards: tuple = ()  # (tensor, its version, its array's lock) per input saved

    def save_for_backward(self, *arrays: Any) -> None:
        self.saved_tensors = arrays

    @property
    def saved_nbytes(self) -> int:
        """Bytes of the arrays saved for the backward (0 once freed): counted when the
        memory report asks, not by every op."""
        return sum(getattr(a, "nbytes", 0) for a in self.saved_tensors or ())

    def free(self) -> None:
        """Drop everything the backward needed; the graph above this node can be collected."""
        self.release()
        self.saved_tensors = None
        self.parents = None
        self.__dict__.clear()

    # --- in-place guard: an input array the backward reads must not change before it runs
    def guard(self, tensors: list[Tensor]) -> None:
        """Remember the version of each input Tensor whose array was saved, and make that array
        read-only while this context lives (a raw `t.data[...] = x` then fails at once)."""
        guards, saved = [], self.saved_tensors
        for t in tensors:  # plain loops: this runs for every recorded op
            arr = t.data
            for a in saved:
                if a is arr:
                    guards.append((t, t._version, lock(arr)))
                    break
        self.guards = tuple(guards)

    def check_versions(self) -> None:
        """Refuse a backward whose saved inputs were modified in place since the forward."""
        for t, version, _ in self.guards:
            if t._version != version:
                raise MgsparseError(
                    f"{self.fn.__name__}.backward: an input of shape {t.shape} saved for the "
                    f"backward was modified in place after the forward (version {version}, now "
                    f"{t._version}, e.g. by optimizer.step()); call backward() first")

    def release(self) -> None:
        for _, _, held in self.guards:
            unlock(held)
        self.guards = ()

    def __del__(self) -> None:  # a graph dropped without backward releases its arrays too
        if self.guards:
            self.release()
