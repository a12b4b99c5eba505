"""Graph layers on blocks: the block-form protocol every graph layer follows, the binding of a
model's layers to the blocks of a batch or a receptive field, and exact layer-wise inference.

A block (`mgsparse.data.sampler.Block`; nn reads it by its attributes only and never imports
data) is the (T, S) bipartite matrix of the in-edges j → i of T target nodes from S ≥ T sources:

    n_id         (S,) whole-graph ids of the sources, the T targets first (source i < T is
                 target i, so a layer's self/root term reads rows [:T] of its input)
    row, col     (nnz,) local target and local source of each edge j → i, rows sorted
    degree       (S,) each source's whole-graph in-degree (a gather: read it only if needed)
    num_targets  T;  num_sampled (T,) the edges kept per target;  shape (T, S)

**The block form.** A graph layer runs on blocks (receptive fields, sampled batches, layer-wise
inference) through one method of its own:

    on_block(self, block) -> Callable[[x], Tensor]

It builds once, from the block's index arrays, whatever operand the layer multiplies by (GCN's
Â rows, SAGE's neighbour mean, GAT's attention pattern; constants, so gradients reach only the
weights and x) and returns a function of the S source rows x (S, F_in), dense or sparse, giving
the T target rows (T, F_out). The function reads the parameters and `self.training` when it is
called, not when bound: a field binds once and calls it every epoch. Under sampling (fanout k)
the layer chooses its estimator (GCN rescales by deg/k, SAGE and GAT average or softmax over the
kept edges; see each `on_block`). The contract, which tests/nn/test_layer_contract.py holds
every layer of `mgsparse.nn.GRAPH_LAYERS` to, in float64:

1. with every in-edge (fanout -1) the block form gives exactly the target rows of the
   whole-graph `layer(x, edge_index)`, so a receptive field (run/field.py) computes the
   whole-graph loss, gradients and scores;
2. a 1- and a 2-layer stack of the layer give the same logits and parameter gradients on a
   field as on the whole graph;
3. the bound function passes gradcheck on a sampled rectangular block, for x and every
   parameter.

The whole-graph side of the contract: `Layer(in_features, out_features, rng=..., dtype=...)`
and `forward(x, edge_index)`, messages flowing source → target (row 0 of edge_index), each
node keeping its own term by default.

**What a tape replays.** A full-batch step runs from a tape once two epochs recorded the same
ops (`run/replay.py`): the ops again, not the layer's Python. A layer draws its randomness
inside ops (`x.dropout(p, training, rng)`, `relu_dropout`, `dropout_linear`: the op draws
the mask from a `masks.Draw`, afresh each run); a choice made in Python (a coin from
`self.rng` or `np.random`, a counter, a branch on an attribute) is allowed and stays exact,
since the replay then keeps that step eager (a drawn coin, a changed attribute) or records it
again (an attribute set between steps), at the cost of the tape's speed.

A subclass of a shipped layer inherits its `on_block` (a subclass that changes the computation
of `forward` overrides `on_block` too). A layer without one is named by `block_support(model)`,
and binding it raises a one-line error naming the settings that train it on the whole graph.

**Adding a layer** (three library files): its architecture module `nn/<name>.py` (the layer
with `forward` and `on_block`; its model, a `StackedModel` that builds `self.convs`, taking
`(in_features, hidden, num_classes, layers=, dropout=, activation=, rng=, ...)`); in
`mgsparse/nn/__init__.py` the layer added to `GRAPH_LAYERS`, which enrols it in the contract
test, and the model exported; a gradcheck case in `mgsparse/checks/nn.py` (the contract test
fails without one). The model kind is then a row of the catalog's MODELS (builder = the
model's name in `mgsparse.nn`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse import kernels
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import HyperparameterError, ShapeError
from mgsparse.nn.stack import StackedModel
from mgsparse.sparse import SparseTensor

Block = Any  # mgsparse.data.sampler.Block (nn does not import data)
WHOLE_GRAPH = ("set train.receptive_field: false and train.batch_size: null to train on the "
               "whole graph")  # what a model that cannot run on blocks is told to change


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
    missing = sorted({type(c).__name__ for c in convs
                      if not callable(getattr(c, "on_block", None))})
    if missing:
        return f"{', '.join(missing)} has no block form (an on_block method)"
    return None


def on_block(conv: Any, block: Block) -> Callable[[Any], Tensor]:
    """`conv` bound to `block`: a function of the sources' features (S, F) -> (T, F_out)."""
    bind = getattr(conv, "on_block", None)
    if not callable(bind):
        raise HyperparameterError(f"{type(conv).__name__} has no block form (an on_block "
                                  f"method); {WHOLE_GRAPH}")
    return bind(block)


def _convs(model: StackedModel) -> Sequence[Any]:
    why = block_support(model)
    if why is not None and getattr(model, "convs", None) is not None:
        raise HyperparameterError(f"cannot run on blocks: {why}; {WHOLE_GRAPH}")
    if why is not None:
        raise HyperparameterError(f"{type(model).__name__} has no graph layers to sample for")
    return model.convs


def bind_blocks(model: StackedModel, blocks: Sequence[Block],
                holder: str = "the batch") -> list[Callable[[Any], Tensor]]:
    """Each of the model's layers bound to its block (outermost first): the layers that
    `model.stack` runs on a batch or a receptive field. `holder` names the blocks' owner in
    the error when the counts differ."""
    convs = _convs(model)
    if len(convs) != len(blocks):
        raise ShapeError(f"{type(model).__name__} has {len(convs)} layers but {holder} has "
                         f"{len(blocks)} blocks (one per layer)")
    return [on_block(c, b) for c, b in zip(convs, blocks)]


def forward_blocks(model: StackedModel, x: Any, blocks: Sequence[Block]) -> Tensor:
    """The model's layers on the blocks of one batch (outermost first), with the model's own
    dropout and activation; `x` holds the rows of `blocks[0].n_id`. Returns (T_last, C)."""
    return model.stack(bind_blocks(model, blocks), x)


def gather_rows(features: Any, ids: np.ndarray) -> Tensor | SparseTensor:
    """Rows `ids` of the features (SparseTensor, scipy sparse, Tensor or array) as a constant
    operand of the same kind; sparse rows are cut from the CSR, never densified."""
    if isinstance(features, SparseTensor):
        csr = features._structure.csr_matrix(features.values.data)  # cached view, no copy
        rows = SparseTensor.from_scipy(csr[ids], dtype=features.dtype)
        rows.dense_stream = features.dense_stream  # a fallen-back operand's rows draw as dense
        return rows
    if sp.issparse(features):
        return SparseTensor.from_scipy(sp.csr_matrix(features)[ids])
    data = features.data if isinstance(features, Tensor) else np.asarray(features)
    ids = np.asarray(ids, dtype=np.intp)
    # take along axis 0, not data[ids]: NumPy's fancy indexing of a 2-d array walks the
    # rows element by element (several times slower for 64 float32 columns); by row blocks
    # of the output on the thread pool, each row copied as one call would
    out = np.empty((len(ids), *data.shape[1:]), dtype=data.dtype)
    kernels.by_rows(lambda rows, i: data.take(i, axis=0, out=rows), out, ids)
    return Tensor(out, dtype=data.dtype)


def layerwise_inference(model: StackedModel, features: Any, sampler: Any,
                        chunk_size: int = 4096) -> Tensor:
    """Exact full-graph logits (N, C), one layer at a time over chunks of target rows.

    Layer l runs on the complete in-neighbourhood (fanout -1) of `chunk_size` targets at a
    time: the working set is one chunk's block and its sources' rows (up to chunk · (1 + mean
    in-degree) rows of width 2·F_l), plus the (N, F_{l-1}) input and the (N, F_l) output
    being filled. Nothing depends on sampling. Runs in eval mode without recording gradients.
    `sampler` needs `.num_nodes` and `.block(targets, -1)`.
    """
    if chunk_size < 1:
        raise HyperparameterError(f"eval chunk size must be >= 1, got {chunk_size}")
    if getattr(model, "residual", False) or getattr(model, "jk", None) or getattr(
            model, "norms", None) is not None:  # what StackedModel.stack adds between layers
        raise HyperparameterError("layer-wise inference runs the plain stack, without residual, "
                                  "jk or norm; evaluate such a model on the whole graph")
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
