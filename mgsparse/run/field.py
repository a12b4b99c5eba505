"""The receptive field of the rows a loss reads: full-batch training computed where it matters.

A 2-layer GCN's loss over Cora's 140 training nodes reads the logits of those rows only. They
depend on the hidden rows of their in-neighbours (644 nodes), and those on the input rows of
theirs (1,664 of 2,708). On a 1,000,000-node graph with 100 labelled nodes and degree 10 the
field is ~12,000 nodes: computing every layer on every node spends almost all of an epoch
on rows no loss or score ever reads.

A `Field` holds, for fixed rows, the complete in-neighbourhood blocks (fanout -1, built once
by the neighbour sampler) and the input rows they read (gathered once). Each layer runs on its
block through the layers' own block forms (`nn/block.py`): with every in-edge present a
block's operand is exactly the rows of the whole-graph one (GCN's Â rows with the full-graph
degrees, SAGE's neighbour mean, GAT's softmax over all in-edges). Logits, loss and gradients
therefore equal the whole-graph computation to rounding (tests/run/test_field.py holds them
to it). Dropout still draws one mask entry per node and feature of each layer's input, only
for fewer rows, so a run is a different draw of the same distribution, and a seed still gives
bitwise the same run.

With ``train.receptive_field: auto`` a field is used when the rows it is for (the training
rows; the rows any score reads) are at most `AUTO_FRACTION` of the graph. On Cora the
training field (140 <- 644 <- 1,664 of 2,708 rows) shrinks the dense step most: over four
runs of `mgsparse bench --dense-vs-sparse --dataset cora` on a loaded 2-core machine, the
dense step took 75-144 ms on the whole graph and 12-36 ms on the field, while the sparse
step's gain (1.2-8.2 ms against 0.7-1.8 ms) was within the load's noise. A scoring field
(1,640 <- 2,541 <- 2,668) gains nothing; on a 1,000,000-node graph with 100 labels the
fields read a small fraction of the graph (`benchmarks/compare_pyg.py --graph synthetic
--nodes 1000000` times both where torch_geometric is installed). The input rows a
field reads are gathered once and kept: memory of at most the features' size, bought for
never gathering or dropping out the other rows again. When the fields serve both training
and scores, the task builds the whole graph's Â only if something asks for it.
"""

from __future__ import annotations

from typing import Any

from mgsparse.engine import Tensor
from mgsparse.kernels import freeze
from mgsparse.nn.block import bind_blocks, gather_rows
from mgsparse.nn.module import Module

AUTO_FRACTION = 0.5  # rows a field is for / nodes of the graph, at most, for "auto"


class Field:
    """The blocks and input rows that the logits of some rows depend on (see the module)."""

    def __init__(self, blocks: tuple, features: Any):
        self.blocks = blocks  # outermost first; the last block's targets are the rows
        self.x = gather_rows(features, blocks[0].n_id)  # constant: gathered once, and frozen
        if isinstance(self.x, Tensor):  # (so a first layer may keep its product: FixedProduct)
            freeze(self.x.data)
        self._model: Module | None = None
        self._layers: list = []

    def logits(self, model: Module) -> Tensor:
        """(rows, C): the model's logits at the field's rows, in their order."""
        if self._model is not model:  # each layer bound to its block once per model
            self._layers = bind_blocks(model, self.blocks, "the receptive field")
            self._model = model
        return model.stack(self._layers, self.x)

    def __repr__(self) -> str:
        return f"Field({describe(self, len(self.blocks[0].graph_degree))})"


def describe(field: Field, num_nodes: int) -> str:
    """For the run's summary: the rows each layer computes, e.g. "140 <- 644 <- 1,664 of 2,708"."""
    sizes = [field.blocks[-1].num_targets] + [len(b.n_id) for b in reversed(field.blocks)]
    return (f"receptive field: {' <- '.join(f'{n:,}' for n in sizes)} of {num_nodes:,} rows "
            f"(output layer first)")
