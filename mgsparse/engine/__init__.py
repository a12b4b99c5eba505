"""The autograd engine: numpy `Tensor`s, the `Function` protocol, and the scalar `Value` reference."""

from mgsparse.engine.tensor import (
    Context,
    Function,
    Tensor,
    concatenate,
    is_grad_enabled,
    no_grad,
    stack,
)
from mgsparse.engine.value import Value

__all__ = ["Context", "Function", "Tensor", "Value", "concatenate", "is_grad_enabled", "no_grad", "stack"]
