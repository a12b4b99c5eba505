"""Progress while a run gets ready and inside its epochs: the phases of building a graph
(`mgsparse.data.progress`) and each step of a sampled epoch (`fit`'s `on_batch`)."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data import progress as data_progress
from mgsparse.data.sources import synthetic as synthetic_source
from mgsparse.run import fit, make_task
from mgsparse.run.loop import train_epoch
from mgsparse.run.task import Steps, shuffle_generator
from tests.conftest import make_config

SMALL_SBM = {"name": "synthetic", "num_nodes": 400, "num_classes": 4, "avg_degree": 6,
             "num_features": 16, "split": "random", "num_train_per_class": 20,
             "num_val": 40, "num_test": 80}


class Listener:
    """A progress callback that hears phases as well as bytes."""

    def __init__(self, events: list):
        self.events = events

    def __call__(self, done, total, name):
        self.events.append(("bytes", name))

    def phase(self, name, detail):
        self.events.append((name, detail))


def sampled_config(**train):
    return make_config("synthetic", dataset=SMALL_SBM, model={"kind": "sage", "dropout": 0.0},
                       train={"epochs": 2, "batch_size": 16, **train},
                       sampler={"fanouts": [5, 5]})


def test_a_generated_graph_announces_each_phase_before_its_work(monkeypatch):
    """generating before the generator runs, normalising, then placing, each naming what it
    works on: a million-node graph spends seconds in each, on a screen that stayed blank."""
    events: list = []
    made = synthetic_source.sbm

    def sbm(**options):
        events.append(("sbm", ""))
        return made(**options)

    monkeypatch.setattr(synthetic_source, "sbm", sbm)
    config = make_config("synthetic", dataset={**SMALL_SBM, "normalize_features": True})
    make_task(config, Listener(events))
    assert [name for name, _ in events] == ["generating", "sbm", "normalising", "placing"]
    details = dict(events)
    assert details["generating"] == "a stochastic block model: 400 nodes, ~2,400 edges"
    assert details["normalising"] == "the feature rows of 400 nodes"
    edges = make_task(config).edge_index.shape[1]
    assert details["placing"] == f"the operands of 400 nodes, {edges:,} edges"


def test_a_download_reports_bytes_then_the_phases_after_it(mirror_env):
    events: list = []
    make_task(make_config("cora"), Listener(events))  # Cora normalises its rows by default
    kinds = [kind for kind, _ in events]
    assert kinds[-2:] == ["normalising", "placing"] and set(kinds[:-2]) == {"bytes"}
    assert {name for kind, name in events if kind == "bytes"} == {
        f"ind.cora.{k}" for k in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")}


def test_a_plain_callback_hears_no_phases_and_an_unknown_phase_is_refused():
    make_task(make_config("synthetic", dataset=SMALL_SBM), lambda done, total, name: 1 / 0)
    with pytest.raises(ValueError, match="unknown phase 'parsing'"):
        data_progress.announce(Listener([]), "parsing")


def test_a_sampled_epoch_reports_every_batch_of_its_plan():
    """80 training nodes in batches of 16: steps 1..5 of 5 in each epoch of each run, and
    the run is bitwise the run without the callback (it draws nothing)."""
    config = sampled_config(runs=2)
    calls: list = []
    heard = fit(config, make_task(config), on_batch=lambda *a: calls.append(a))
    assert calls == [(run, epoch, step, 5) for run in (0, 1) for epoch in (1, 2)
                     for step in range(1, 6)]
    quiet = fit(config, make_task(config))
    assert [r.loss for run in heard.runs for r in run.rows] == [
        r.loss for run in quiet.runs for r in run.rows]


def test_the_sampled_plan_is_the_loaders_epoch():
    """`Steps` draws the plan first, then the samples, as `NeighborLoader.epoch` did."""
    config = sampled_config()
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    steps = task.batches(model, shuffle_generator(7))
    assert isinstance(steps, Steps) and len(steps) == 5
    ours = [step.__defaults__[0] for step in steps]
    theirs = list(task.loader.epoch(shuffle_generator(7)))
    assert [b.seeds.tolist() for b in ours] == [b.seeds.tolist() for b in theirs]
    assert [b.nnz for b in ours] == [b.nnz for b in theirs]


def test_an_epoch_of_unknown_length_reports_steps_without_a_total():
    config = make_config("karate")
    task = make_task(config)
    model = task.build_model(np.random.default_rng(0))
    from mgsparse.run.build import build_optimizer

    calls: list = []
    batches = iter(task.batches(model, shuffle_generator(0)))  # a plain iterator
    train_epoch(model, build_optimizer(config.optim, model), batches, None,
                on_step=lambda *a: calls.append(a))
    assert calls == [(1, None)]
