"""Tensor and the `Function` protocol every op follows (the backward pass: `autograd.py`).

A `Tensor` wraps a floating numpy array. Every op is a `Function` subclass with a
`forward(ctx, *arrays)` and a `backward(ctx, grad)` side by side (see `ops.py`); calling
`Op.apply(...)` runs the forward on raw arrays and, when a gradient is wanted, records the
context so that `Tensor.backward` can walk the graph in reverse topological order.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any

import numpy as np

from mgsparse.engine.context import Context
from mgsparse.engine.masks import check_probability
from mgsparse.errors import MgsparseError, ShapeError
from mgsparse.kernels import BLAS_HELD, one_blas_thread

_FLOATS = (np.float16, np.float32, np.float64)


class _GradMode:
    enabled = True
    tape: list | None = None  # while `engine.tape.recording`: every op applied, in order


@contextlib.contextmanager
def no_grad():
    """Build no graph inside the block: outputs never require grad, no context is saved."""
    previous, _GradMode.enabled = _GradMode.enabled, False
    try:
        yield
    finally:
        _GradMode.enabled = previous


def is_grad_enabled() -> bool:
    return _GradMode.enabled


# ---------------------------------------------------------------- Function protocol


class Function:
    """Base of every differentiable op.

    Subclasses define `forward(ctx, *args)` on raw numpy arrays (a `Tensor` argument
    arrives as its `.data`, anything else as itself) and `backward(ctx, grad)` returning
    one gradient per positional argument (`None` where no gradient is needed).
    The output takes the first Tensor argument's dtype (numpy may not upcast it behind our
    back) unless the forward sets `ctx.out_dtype`, as a cast does.

    What a tape (`engine.tape`, `run.replay`) runs again is the op, not its caller: `forward`
    and `backward` are called afresh with the recorded non-Tensor arguments on the Tensors'
    current arrays. So an op draws its random numbers inside `forward`, from a `masks.Draw`
    argument (a mask drawn by its caller would be a constant, replayed as recorded), and takes
    a pooled buffer there too; what the caller computes in Python around `apply` (a coin, a
    counter, a branch) runs only eagerly, and `run.replay` keeps such a step eager (its
    module docstring lists the rules).

    The rules a backward keeps (the loop enforces the first, `autograd.backward_over`):
    - `grad` is read-only: `g *= 2` raises, naming the op; compute a new array (`g * 2`);
    - return new arrays, or `grad` itself where the gradient is it: the loop copies what it
      did not see made (a view, the `grad` handed on, an array the context holds) before a
      leaf's `.grad` gets it, and hands a new array over as it is;
    - never write a saved array (the forward's inputs are locked while the graph lives);
    - random draws and pooled buffers belong in `forward`, never in `backward`.
    """

    _ctx_methods: tuple[str, ...] = ("forward", "backward")  # take the Context, not the class

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass writes `def forward(ctx, ...)` and `def backward(ctx, g)` plainly, the
        math side by side: they become staticmethods here. A decorated one stays as it is."""
        super().__init_subclass__(**kwargs)
        for name in cls._ctx_methods:
            fn = cls.__dict__.get(name)
            if isinstance(fn, types.FunctionType):
                setattr(cls, name, staticmethod(fn))

    @staticmethod
    def forward(ctx: Context, *args: Any) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any) -> Tensor:
        """Run the forward on the raw arrays; record the context when a gradient is wanted.

        One pass over the arguments (not one per question asked of them), and an output that
        is already an ndarray of the right dtype is wrapped without `Tensor.__init__`'s
        conversion: this runs for every op, ~30 times in a small graph's epoch.
        """
        tensors, raw, needs, dtype = [], [], [], None
        for a in args:
            if isinstance(a, Tensor):
                data = a.data
                if dtype is None:
                    dtype = data.dtype
                elif data.dtype != dtype:
                    _check_dtypes(cls, [t for t in args if isinstance(t, Tensor)])  # raises
                tensors.append(a)
                raw.append(data)
                needs.append(a.requires_grad)
            else:
                raw.append(a)
                needs.append(False)
        needs = tuple(needs)
        record = _GradMode.enabled and any(needs)
        ctx = Context(cls, args if record else (), needs)
        if BLAS_HELD.on:  # inside mgsparse already (a tape, a backward, an op's op)
            data = cls.forward(ctx, *raw)
        else:  # entered from outside: BLAS on one thread, the caller's count after
            with one_blas_thread():
                data = cls.forward(ctx, *raw)
        dtype = getattr(ctx, "out_dtype", dtype)
        if dtype is not None and type(data) is np.ndarray and data.dtype == dtype:
            out = Tensor.__new__(Tensor)  # Tensor() would keep the array as it is
            out._set(data, record)
        else:
            out = Tensor(data, dtype=dtype, requires_grad=record)
        if record:
            out._ctx = ctx
            if ctx.saved_tensors:
                ctx.guard(tensors)
        if _GradMode.tape is not None:
            _GradMode.tape.append((cls, args, out))
        return out


def _check_dtypes(fn: type, tensors: list[Tensor]) -> None:
    """Refuse mixed float dtypes: numpy would silently upcast float32 work to float64."""
    if len(tensors) > 1 and any(t.dtype != tensors[0].dtype for t in tensors[1:]):
        dtypes = ", ".join(f"{t.dtype}{t.shape}" for t in tensors)
        raise ShapeError(f"{fn.__name__}: operands have different dtypes ({dtypes}); cast one")


# ---------------------------------------------------------------- Tensor


class Tensor:
    """An n-d float array that remembers how it was computed.

    float32 unless built from float64 data or asked for `dtype=np.float64`.
    `.grad` is `None` until a backward reaches it, then an array of `.data`'s shape.
    """

    __array_priority__ = 100  # so `ndarray + Tensor` defers to Tensor.__radd__

    def __init__(self, data: Any, dtype: Any = None, requires_grad: bool = False):
        if isinstance(data, Tensor):
            data = data.data
        self._set(_as_float_array(data, dtype), requires_grad)

    def _set(self, data: np.ndarray, requires_grad: bool) -> None:
        """Every field of a new Tensor around a float array: one place for `__init__` and
        for `Function.apply`, which wraps an output array that needs no conversion."""
        self.data = data
        self.grad: np.ndarray | None = None
        self.requires_grad = bool(requires_grad)
        self._ctx: Context | None = None
        self._retain_grad = False
        self._version = 0  # bumped by every sanctioned in-place write (`modified_in_place`)

    # --- properties
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    is_leaf = property(lambda self: self._ctx is None)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        op = f", op={self._ctx.fn.__name__}" if self._ctx is not None else ""
        return f"Tensor(shape={self.shape}, dtype={self.dtype}{grad}{op})"

    def __len__(self) -> int: return len(self.data)

    # --- conversions
    def numpy(self) -> np.ndarray: return self.data

    def item(self) -> float:
        if self.data.size != 1:
            raise ShapeError(f"item() needs a tensor with one element, got shape {self.shape}")
        return float(self.data.reshape(()))

    def detach(self) -> Tensor: return Tensor(self.data, dtype=self.dtype)

    def astype(self, dtype: Any) -> Tensor:
        return ops.Cast.apply(self, np.dtype(dtype))

    def zero_grad(self) -> None: self.grad = None

    def retain_grad(self) -> Tensor:
        """Keep `.grad` on this non-leaf tensor after backward (leaves always keep it)."""
        self._retain_grad = True
        return self

    def requires_grad_(self, flag: bool = True) -> Tensor:
        self.requires_grad = flag
        return self

    # --- backward
    def backward(self, grad: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's `.grad` (reverse topological order)."""
        if not self.requires_grad:
            raise MgsparseError("backward() on a tensor that does not require grad")
        if grad is None:
            if self.data.size != 1:
                raise ShapeError(f"backward() on a non-scalar tensor of shape {self.shape} "
                                 "needs a gradient argument of that shape")
            grad = np.ones_like(self.data)
        grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=self.dtype)
        if grad.shape != self.shape:
            raise ShapeError(f"backward(): gradient shape {grad.shape} != tensor shape {self.shape}")
        run_backward(self, grad, retain_graph)

    # --- front end: every method is one primitive `apply` or a composite of them
    def _lift(self, other: Any) -> Tensor:
        """A constant operand becomes a Tensor of this tensor's dtype (never an upcast); a
        number is kept as `lifted`, so a tape knows each step's new leaf as one constant."""
        if isinstance(other, Tensor):
            return other
        lifted = Tensor(other, dtype=self.dtype)
        if isinstance(other, (int, float, np.generic)):
            lifted.lifted = other
        return lifted

    def __add__(self, other):
        return NotImplemented if _defers(other) else ops.Add.apply(self, self._lift(other))
    def __radd__(self, other): return ops.Add.apply(self._lift(other), self)
    def __mul__(self, other):
        return NotImplemented if _defers(other) else ops.Mul.apply(self, self._lift(other))
    def __rmul__(self, other): return ops.Mul.apply(self._lift(other), self)
    def __neg__(self): return ops.Neg.apply(self)
    def __sub__(self, other):
        return NotImplemented if _defers(other) else self + (-self._lift(other))
    def __rsub__(self, other): return self._lift(other) + (-self)
    def __truediv__(self, other):
        return NotImplemented if _defers(other) else self * self._lift(other) ** -1
    def __rtruediv__(self, other): return self._lift(other) * self**-1
    def __matmul__(self, other):
        return NotImplemented if _defers(other) else ops.MatMul.apply(self, self._lift(other))
    def __rmatmul__(self, other): return ops.MatMul.apply(self._lift(other), self)
    def __getitem__(self, idx): return movement.GetItem.apply(self, _plain_index(idx))

    def __pow__(self, p):
        if isinstance(p, Tensor):  # x^y = exp(y·log x), for x > 0
            return (p * self.log()).exp()
        return ops.Pow.apply(self, float(p))

    def __rpow__(self, base): return ops.RPow.apply(self, float(base))

    def exp(self): return ops.Exp.apply(self)
    def log(self): return ops.Log.apply(self)
    def sqrt(self): return self**0.5
    def abs(self): return ops.Abs.apply(self)
    def relu(self): return activations.Relu.apply(self)
    def leaky_relu(self, slope=0.01): return activations.LeakyRelu.apply(self, float(slope))
    def elu(self, alpha=1.0): return activations.Elu.apply(self, float(alpha))
    def sigmoid(self): return activations.Sigmoid.apply(self)
    def tanh(self): return activations.Tanh.apply(self)
    def clip(self, lo=None, hi=None): return ops.Clip.apply(self, lo, hi)

    def sum(self, axis=None, keepdims=False): return ops.Sum.apply(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return ops.Max.apply(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        count = self.size if axis is None else int(np.prod([self.shape[a] for a in np.atleast_1d(axis)]))
        return self.sum(axis, keepdims) * (1.0 / max(count, 1))

    def softmax(self, axis=-1):
        e = (self - self.max(axis, keepdims=True).detach()).exp()
        return e / e.sum(axis, keepdims=True)

    def log_softmax(self, axis=-1):
        """x - logsumexp(x): shifting by the (constant) max keeps exp from overflowing."""
        shifted = self - self.max(axis, keepdims=True).detach()
        return shifted - shifted.exp().sum(axis, keepdims=True).log()

    def reshape(self, *shape):
        return movement.Reshape.apply(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return movement.Transpose.apply(self, axes or None)

    T = property(lambda self: self.transpose())
    def flatten(self): return self.reshape(-1)

    def dropout(self, p: float, training: bool = True, rng: np.random.Generator | None = None,
                buffers: Any = None):
        """Inverted dropout: zero each entry with probability p, scale the rest by 1/P(keep).

        The mask comes from random bits (see `engine.masks` for the precision p gets); the
        scale is 1/P(keep) for the probability those bits realise, so E[out] = x exactly.
        `buffers` (an `engine.buffers.Buffers`) lends the output array, reused across epochs.
        """
        check_probability(p)
        if not training or p == 0:
            return self
        rng = rng if rng is not None else np.random.default_rng()
        return ops.Dropout.apply(self, ops.Draw(p, rng), ops.kept_scale(p), buffers)

    def relu_dropout(self, p: float, training: bool = True,
                     rng: np.random.Generator | None = None, buffers: Any = None):
        """`self.relu().dropout(p, training, rng, buffers)` as one op: the same mask drawn
        from `rng`, the same floats (`activations.ReluDropout`)."""
        check_probability(p)
        if not training or p == 0:
            return self.relu()
        rng = rng if rng is not None else np.random.default_rng()
        return activations.ReluDropout.apply(self, ops.Draw(p, rng), ops.kept_scale(p), buffers)

    def argmax(self, axis=-1) -> np.ndarray: return self.data.argmax(axis=axis)


def _defers(other: Any) -> bool:
    """numpy's protocol: an operand with `__array_ufunc__ = None` (e.g. a sparse matrix type)
    implements its binary ops with arrays itself, through its reflected method."""
    return getattr(type(other), "__array_ufunc__", False) is None


def _as_float_array(data: Any, dtype: Any) -> np.ndarray:
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype.type not in _FLOATS:
            raise ShapeError(f"Tensor holds floating data; got dtype {dtype}")
        return np.asarray(data, dtype=dtype)
    arr = np.asarray(data)
    if arr.dtype.type in _FLOATS and isinstance(data, (np.ndarray, np.floating)):
        return arr  # numpy floating data keeps its precision; Python numbers become float32
    if arr.dtype == object:
        raise ShapeError("Tensor data must be numeric (got an object array)")
    return arr.astype(np.float32)


def _plain_index(idx: Any) -> Any:
    """Tensors and lists used as indices become numpy arrays (indices are never differentiable)."""
    if isinstance(idx, tuple):
        return tuple(_plain_index(i) for i in idx)
    if isinstance(idx, Tensor):
        return idx.data.astype(np.int64)
    if isinstance(idx, list):
        return np.asarray(idx)
    return idx


def concatenate(tensors: list[Tensor], axis: int = 0) -> Tensor:
    return movement.Concatenate.apply(axis, *tensors)


def stack(tensors: list[Tensor], axis: int = 0) -> Tensor:
    return movement.Stack.apply(axis, *tensors)


# ops and the graph walk need Function and Tensor defined above
from mgsparse.engine import activations, movement, ops
from mgsparse.engine.autograd import run_backward
