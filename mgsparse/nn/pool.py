"""Readouts: one vector per graph from the node rows of a batch of graphs (PyG's global pools).

x (N, F) holds the nodes of B graphs stacked; `batch` (N,) int64 gives each row its graph id
in [0, B) (sorted, as PyG's `batch` vector; any order works), or a prebuilt
`mgsparse.sparse.Segments` reused across the layers of one step. Each readout returns (B, F):

- `global_add_pool`   out_b = Σ_{i in b} x_i        (one SpMM with the pooling matrix P)
- `global_mean_pool`  out_b = Σ_{i in b} x_i / n_b  (one SpMM, P scaled by 1 / n_b)
- `global_max_pool`   out_b = max_{i in b} x_i per feature, the gradient to the first
  arg-max row only

A graph without nodes reads out 0 in all three (its mean too, not NaN). `batch=None` pools
every row into one graph. Sum is the readout GIN's injectivity argument needs (Xu et al.,
2019: a mean or max cannot tell multisets apart); mean and max are the usual alternatives.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.sparse import segment_max, segment_mean, segment_sum


def _batch(x: Any, batch: Any, num_graphs: int | None) -> tuple[Any, int | None]:
    """`batch=None` means one graph holding every row of x."""
    if batch is not None:
        return batch, num_graphs
    return np.zeros(x.shape[0] if getattr(x, "ndim", 0) else 0, dtype=np.int64), (
        1 if num_graphs is None else num_graphs)


def global_add_pool(x: Any, batch: Any = None, num_graphs: int | None = None) -> Tensor:
    """(B, F): the sum of each graph's node rows."""
    return segment_sum(x, *_batch(x, batch, num_graphs))


def global_mean_pool(x: Any, batch: Any = None, num_graphs: int | None = None) -> Tensor:
    """(B, F): the mean of each graph's node rows (0 for a graph without nodes)."""
    return segment_mean(x, *_batch(x, batch, num_graphs))


def global_max_pool(x: Any, batch: Any = None, num_graphs: int | None = None) -> Tensor:
    """(B, F): the per-feature max of each graph's node rows (0 for a graph without nodes)."""
    return segment_max(x, *_batch(x, batch, num_graphs))


READOUTS = {"sum": global_add_pool, "mean": global_mean_pool, "max": global_max_pool}


def global_pool(x: Any, batch: Any = None, num_graphs: int | None = None,
                readout: str = "sum") -> Tensor:
    """The readout named `readout` ('sum', 'mean' or 'max'), for models that take it as a
    plain argument."""
    if readout not in READOUTS:
        raise HyperparameterError(f"unknown readout {readout!r}; known: {', '.join(READOUTS)}")
    return READOUTS[readout](x, batch, num_graphs)
