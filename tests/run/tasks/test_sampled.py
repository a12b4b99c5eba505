"""`SampledGraphTask`: the run layer's mini-batch kind, equal to full batch when it samples all."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.run import GraphTask, make_task
from mgsparse.run.placed import load_graph
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.sampled import SampledGraphTask


def configs(kind: str, **sampled):
    gat = {"attn_dropout": 0.0} if kind == "gat" else {}  # a key only GAT reads
    base = {"dataset": {"name": "karate"}, "model": {"kind": kind, "dropout": 0.0, **gat},
            "train": {"seed": 3}, "monitor": {"memory": False}}
    full = config_from_dict(base)
    base["train"] = {**base["train"], "batch_size": sampled.get("batch_size", 1000)}
    base["sampler"] = {"fanouts": sampled.get("fanouts", [-1, -1])}
    return full, config_from_dict(base)


def test_a_batch_size_on_a_graph_makes_a_sampled_task():
    _, config = configs("sage", batch_size=2, fanouts=[3, 2])
    task = make_task(config)
    assert isinstance(task, SampledGraphTask) and task.operand is None
    batches = list(task.batches(task.build_model(np.random.default_rng(0)), shuffle_generator(0)))
    assert len(batches) == 1 and task.epoch_figures()["batches"] == 1  # 2 training nodes
    assert "sampled blocks, fanouts [3, 2]" in task.placement["adjacency"]


@pytest.mark.parametrize("kind", ["gcn", "sage", "gat"])
def test_all_neighbours_in_one_batch_is_full_batch_training(kind):
    """fanouts -1 and one batch holding every training node: the same loss and gradients
    as the full-batch task, and layer-wise evaluation equals the full forward."""
    full_config, sampled_config = configs(kind)
    graph = load_graph(full_config.dataset)
    full, sampled = GraphTask(full_config, graph), SampledGraphTask(sampled_config, graph)
    grads = []
    for task in (full, sampled):
        model = task.build_model(np.random.default_rng(5))
        (batch,) = list(task.batches(model, shuffle_generator(0)))
        loss, count = batch()
        loss.backward()
        grads.append((float(loss.data), count, {n: p.grad for n, p in model.named_parameters()},
                      task.evaluate(model)))
    (loss_f, n_f, g_f, s_f), (loss_s, n_s, g_s, s_s) = grads
    assert n_f == n_s == 2 and loss_s == pytest.approx(loss_f, rel=1e-6)
    for name in g_f:
        np.testing.assert_allclose(g_s[name], g_f[name], rtol=1e-4, atol=1e-6)
    assert s_s.val_loss == pytest.approx(s_f.val_loss, rel=1e-5)
    assert (s_s.train_acc, s_s.val_acc, s_s.test_acc) == (s_f.train_acc, s_f.val_acc,
                                                          s_f.test_acc)


def test_the_same_seed_gives_the_same_batches():
    _, config = configs("sage", batch_size=1, fanouts=[2, 2])
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    first = [float(b()[0].data) for b in task.batches(model, shuffle_generator(7))]
    again = [float(b()[0].data) for b in task.batches(model, shuffle_generator(7))]
    assert len(first) == 2 and first == again


@pytest.mark.parametrize("kind", ["gcn", "sage", "gat"])
def test_a_subclass_of_each_layer_trains_on_sampled_blocks(subclassed_layers, kind):
    subclassed_layers()
    _, config = configs(kind, batch_size=1, fanouts=[2, 2])
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    assert type(model.convs[0]).__name__.startswith("My")
    losses = [float(b()[0].data) for b in task.batches(model, shuffle_generator(0))]
    assert len(losses) == 2 and np.all(np.isfinite(losses))
