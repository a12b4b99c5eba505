"""mgsparse: an autograd engine on numpy arrays and sparse matrices, for graph neural networks.

The public surface (`Tensor`, `SparseTensor`, `gradcheck`, ...) is loaded on first use, so
that `import mgsparse` and the command line's entry point start at once: a Ctrl-C while
numpy and scipy load is then the entry point's to handle (`mgsparse._entry`), not a traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {  # name -> the module that defines it
    "Function": "mgsparse.engine", "Tensor": "mgsparse.engine",
    "concatenate": "mgsparse.engine", "no_grad": "mgsparse.engine", "stack": "mgsparse.engine",
    "GradcheckResult": "mgsparse.engine.gradcheck", "gradcheck": "mgsparse.engine.gradcheck",
    "Value": "mgsparse.engine.value", "SparseTensor": "mgsparse.sparse",
}

__all__ = ["Function", "GradcheckResult", "SparseTensor", "Tensor", "Value", "__version__",
           "concatenate", "gradcheck", "no_grad", "stack"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'mgsparse' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
