"""Node classification on neighbour-sampled mini-batches (`SampledGraphTask`).

Each step takes `train.batch_size` training nodes (fewer when `sampler.max_batch_nnz` cuts a
batch), samples up to `sampler.fanouts[l]` in-neighbours per node for each layer (input layer
first, GraphSAGE's S1, S2), and runs the model's layers on the sampled bipartite blocks, so a
step's memory follows the batch, not the graph. Validation and test scores come from exact
layer-wise inference over the whole graph (chunks of `sampler.eval_chunk_size` rows), so they
do not depend on sampling. The run's own generator draws the batch order and the samples:
the same seed gives bitwise the same batches. There is no whole-graph operand: every batch
builds its blocks' own (Â rows, means, attention patterns) through each layer's `on_block`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.data import Graph
from mgsparse.data.sampler import NeighborLoader, NeighborSampler, SampledBatch
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.block import block_support, forward_blocks, gather_rows, layerwise_inference
from mgsparse.nn.module import Module
from mgsparse.run.task import Batch, Steps
from mgsparse.run.tasks.nodes import NodeTask


class SampledGraphTask(NodeTask):
    """Node classification whose epoch is a pass of sampled mini-batches over the training
    nodes; a model whose layers have no block form is refused here, before any step."""

    def __init__(self, config: Config, graph: Graph, dtype: Any = np.float32,
                 budget: int | None = None):
        super().__init__(config, graph, dtype, budget)
        s, size = config.sampler, config.train.batch_size
        why = block_support(self.build_model(np.random.default_rng(0)))  # one probe model
        if why is not None:
            raise ConfigError(f"train.batch_size: {size} samples blocks, but {why}; set "
                              "train.batch_size: null to train on the whole graph")
        self.placed.defer_operand(f"sampled blocks, fanouts {list(s.fanouts)}, {size} "
                                  "targets a batch", operand=None)
        self.sampler = NeighborSampler(self.edge_index, self.num_nodes, s.fanouts,
                                       **self.placed.edge_data)
        self.loader = NeighborLoader(self.sampler, self.train_idx, size, shuffle=True,
                                     max_batch_nnz=s.max_batch_nnz)
        self._figures = np.zeros(3)  # batches, block entries, sampled nodes of the last epoch

    def batches(self, model: Module, shuffle: np.random.Generator) -> Steps:
        """The epoch's plan drawn now (the same draws, in the same order, as the loader's
        `epoch`), so its number of steps is known before the first: "k of n" progress."""
        self._figures[:] = 0
        plan = self.loader.plan(shuffle)
        return Steps(self._steps(model, plan, shuffle), len(plan))

    def _steps(self, model: Module, plan: list[np.ndarray],
               shuffle: np.random.Generator) -> Iterator[Batch]:
        for seeds in plan:  # one batch's blocks alive at a time
            batch = self.sampler.sample(seeds, shuffle)
            self._figures += (1, batch.nnz, batch.num_nodes)
            yield lambda b=batch: self._loss(model, b)

    def _loss(self, model: Module, batch: SampledBatch) -> tuple[Tensor, int]:
        x = gather_rows(self.features, batch.n_id)
        logits = forward_blocks(model, x, batch.blocks)  # (batch targets, classes)
        return F.cross_entropy(logits, self.y[batch.seeds]), len(batch.seeds)

    def logits(self, model: Module) -> Tensor:
        """Exact whole-graph logits, layer by layer over chunks of rows (bounded memory)."""
        return layerwise_inference(model, self.features, self.sampler,
                                   self.config.sampler.eval_chunk_size)

    def epoch_figures(self) -> dict[str, float]:
        """Batches of the last epoch, their mean block entries and mean sampled nodes."""
        count, nnz, nodes = self._figures
        if not count:
            return {}
        return {"batches": int(count), "block_nnz": nnz / count, "sampled_nodes": nodes / count}

    def embedding(self, model: Module) -> None:
        return None  # the hidden layer of a sampled run is not drawn (layer-wise only)
