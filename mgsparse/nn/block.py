"""Graph layers on sampled blocks, and exact layer-wise inference over the whole graph.

A block (`mgsparse.data.sampler.Block`, read here by its attributes only: n_id, row, col,
degree, num_targets) holds the sampled in-edges j → i of T target nodes from S ≥ T source
nodes, targets first. Each layer gets the block as the rectangular operand it already knows
how to multiply, so the layers' own forward code (and backward) runs unchanged:

- GCN: Â_block (T, S), entry (i, j) = (deg_i / k_i) / sqrt(d_i d_j) for a sampled edge and
  1 / d_i for the self loop, with d = full-graph in-degree + 1 and k_i the edges sampled for
  i. This is the full graph's D^-1/2 (A + I) D^-1/2 with each row's neighbour part rescaled
  by deg_i / k_i, so E[Â_block H] = Â H (an unbiased estimate of the full-batch layer) and
  with all neighbours (k_i = deg_i) Â_block is exactly the rows of Â: mini-batch and full
  batch agree to rounding. The block's own degrees would instead bias every node by its
  sampled degree and make the training operator differ from the one used at evaluation.
- GraphSAGE: the mean over the sampled neighbours, 1 / k_i per entry (the paper's setting).
- GAT: the (H·T, H·S) attention pattern of the sampled edges plus self loops; the softmax
  runs over each target's sampled in-edges.

The values are built from the block's index arrays (constants), so gradients reach the
weights through the same SpMM / SDDMM / row_softmax backward passes as in full batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.models import StackedModel
from mgsparse.sparse import SparseTensor

Block = Any  # mgsparse.data.sampler.Block (nn does not import data)


def block_support(model: Any) -> str | None:
    """Why `model` cannot run its layers on blocks (receptive fields, sampled batches), or
    None. A layer runs on a block through its own `on_block(block)` method, so a subclass
    inherits it; a layer without one names itself here, before any step runs."""
    if getattr(model, "edge_weight", None) is not None:
        return "learned edge weights rebuild the whole graph's Â every step"
    if getattr(model, "keyed_masks", False):  # its node_ids would change with every block
        return "keyed dropout keys masks by whole-graph rows"
    convs = getattr(model, "convs", None)
    if convs is None:
        return f"{type(model).__name__} has no graph layers"
    missing = sorted({type(c).__name__ for c in convs if not callable(getattr(c, "on_block", None))})
    if missing:
        return f"{', '.join(missing)} has no block form (an on_block method)"
    return None


def on_block(conv: Any, block: Block) -> Callable[[Any], Tensor]:
    """`conv` bound to `block`: a function of the sources' features (S, F) -> (T, F_out)."""
    bind = getattr(conv, "on_block", None)
    if not callable(bind):
        raise HyperparameterError(f"{type(conv).__name__} has no block form (an on_block "
                                  "method); set train.receptive_field: false and "
                                  "train.batch_size: null to train it on the whole graph")
    return bind(block)


def _convs(model: StackedModel) -> Sequence[Any]:
    why = block_support(model)
    if why is not None and getattr(model, "convs", None) is not None:
        raise HyperparameterError(f"cannot run on blocks: {why}")
    if why is not None:
        raise HyperparameterError(f"{type(model).__name__} has no graph layers to sample for")
    return model.convs


def forward_blocks(model: StackedModel, x: Any, blocks: Sequence[Block]) -> Tensor:
    """The model's layers on the blocks of one batch (outermost first), with the model's own
    dropout and activation; `x` holds the rows of `blocks[0].n_id`. Returns (T_last, C)."""
    convs = _convs(model)
    if len(convs) != len(blocks):
        raise ShapeError(f"{type(model).__name__} has {len(convs)} layers but the batch has "
                         f"{len(blocks)} blocks; set one fanout per layer")
    return model.stack([on_block(c, b) for c, b in zip(convs, blocks)], x)


def gather_rows(features: Any, ids: np.ndarray) -> Tensor | SparseTensor:
    """Rows `ids` of the features (SparseTensor, scipy sparse, Tensor or array) as a constant
    operand of the same kind; sparse rows are cut from the CSR, never densified."""
    if isinstance(features, SparseTensor):
        csr = features._structure.csr_matrix(features.values.data)  # cached view, no copy
        return SparseTensor.from_scipy(csr[ids], dtype=features.dtype)
    if sp.issparse(features):
        return SparseTensor.from_scipy(sp.csr_matrix(features)[ids])
    data = features.data if isinstance(features, Tensor) else np.asarray(features)
    return Tensor(data[ids], dtype=data.dtype)


def layerwise_inference(model: StackedModel, features: Any, sampler: Any,
                        chunk_size: int = 4096) -> Tensor:
    """Exact full-graph logits (N, C), one layer at a time over chunks of target rows.

    Layer l runs on the complete in-neighbourhood (fanout -1) of `chunk_size` targets at a
    time: the working set is one chunk's block and its sources' rows (up to chunk · (1 + mean
    in-degree) rows of width 2·F_l), plus the (N, F_{l-1}) input and the (N, F_l) output
    being filled. Nothing depends on sampling. Runs in eval mode without recording gradients. `sampler` needs `.num_nodes` and `.block(targets, -1)`.
    """
    if chunk_size < 1:
        raise HyperparameterError(f"eval chunk size must be >= 1, got {chunk_size}")
    convs, n = _convs(model), sampler.num_nodes
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            h = features
            for i, conv in enumerate(convs):
                out = None
                for a in range(0, n, chunk_size):
                    block = sampler.block(np.arange(a, min(a + chunk_size, n)), -1)
                    y = on_block(conv, block)(gather_rows(h, block.n_id))
                    y = y if i == len(convs) - 1 else model.act(y)  # per chunk: no extra (N, F)
                    out = np.empty((n, y.shape[1]), y.dtype) if out is None else out
                    out[a:a + len(y)] = y.data
                h = Tensor(out)
    finally:
        model.train(was_training)
    return h
