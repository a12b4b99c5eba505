"""mgsparse: an autograd engine on numpy arrays and sparse matrices, for graph neural networks."""

from mgsparse.engine import Function, Tensor, concatenate, no_grad, stack
from mgsparse.engine.gradcheck import GradcheckResult, gradcheck
from mgsparse.engine.value import Value
from mgsparse.sparse import SparseTensor

__version__ = "0.1.0"

__all__ = [
    "Function",
    "GradcheckResult",
    "SparseTensor",
    "Tensor",
    "Value",
    "__version__",
    "concatenate",
    "gradcheck",
    "no_grad",
    "stack",
]
