"""benchmarks/floor_field.py computes the epoch it claims to: on Cora (configs/cora.yaml, the
receptive field on) its blocks are mgsparse's training field, and given the same parameters
and the same generator (so the same dropout masks) its loss, gradients and training-row
logits, and its clipped, decayed Adam epochs and their scores, equal mgsparse's to float32
rounding. No timing is asserted."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

from mgsparse.nn import functional as F
from mgsparse.nn.gcn import gcn_block_adjacency
from mgsparse.run.placed import load_graph

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import floor_field  # a benchmark script, found through the path above


def pair(*overrides: str):
    """(mgsparse's epoch, the floor) on Cora from the same parameters and generator state."""
    config = floor_field.cora_config(*overrides)
    mgsparse = floor_field.MgsparseEpoch(config, seed=0)
    floor = floor_field.FloorField(load_graph(config.dataset), floor_field.recipe(config), 1)
    for param, value in zip(mgsparse.model.parameters(), floor.params, strict=True):
        assert param.shape == value.shape
        value[...] = param.data
    floor.rng = copy.deepcopy(mgsparse.model.rng)  # the dropout masks mgsparse draws next
    return mgsparse, floor


def training_field(mgsparse):
    task = mgsparse.task
    return task._field("training", task.train_idx)


def test_the_floor_computes_on_mgsparse_training_field(mirror_env):
    mgsparse, floor = pair()
    field = training_field(mgsparse)
    assert "training rows" in mgsparse.task.placement  # the field is on, and a strict subset
    assert len(floor.ids[0]) < mgsparse.task.num_nodes
    for block, ids, matrix in zip(field.blocks, floor.ids, (floor.B1, floor.B2), strict=True):
        np.testing.assert_array_equal(ids, block.n_id)
        np.testing.assert_allclose(matrix.toarray(), gcn_block_adjacency(block).to_dense(),
                                   rtol=1e-6, atol=1e-7)
    assert (floor.Xd != floor.X[floor.ids[0]]).nnz == 0


def test_the_floor_gradients_are_mgsparse_autograd_gradients(mirror_env):
    """Dropout on (0.5): the same masks from the same generator state."""
    mgsparse, floor = pair()
    model, task = mgsparse.model, mgsparse.task
    model.train()
    logits = training_field(mgsparse).logits(model)
    loss = F.cross_entropy(logits, task.train_y)
    loss.backward()
    floor_loss, grads, floor_logits = floor.gradients()
    np.testing.assert_allclose(floor_logits, logits.data, rtol=1e-5, atol=1e-6)
    assert floor_loss == pytest.approx(float(loss.data), rel=1e-6)
    for i, (param, grad) in enumerate(zip(model.parameters(), grads, strict=True)):
        scale = float(np.abs(param.grad).max())
        np.testing.assert_allclose(grad, param.grad, rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=f"parameter {i}")


def test_the_floor_epochs_are_mgsparse_epochs(mirror_env):
    """Three epochs with a clip norm small enough to clip: the same parameters and scores."""
    mgsparse, floor = pair("train.grad_clip_norm=0.01")
    for _ in range(3):
        val_loss, *accuracies = floor.epoch()
        mgsparse.train_step()
        expected = mgsparse.scores()
        assert val_loss == pytest.approx(expected[0], rel=1e-5)
        assert accuracies == pytest.approx(list(expected[1:]), abs=2e-3)
    for i, (param, value) in enumerate(zip(mgsparse.model.parameters(), floor.params,
                                           strict=True)):
        np.testing.assert_allclose(value, param.data, rtol=1e-4, atol=1e-6,
                                   err_msg=f"parameter {i}")
