"""The layer contract (mgsparse/nn/block.py), run for every layer of `mgsparse.nn.GRAPH_LAYERS`
and for a subclass of each (which inherits the block form), in float64:

- messages flow source → target, each node keeping its own term;
- with every in-edge (fanout -1) the block form gives exactly the target rows of the whole graph;
- a 1- and a 2-layer stack of the layer give the whole graph's logits and gradients on a
  receptive field (`mgsparse.run.field.Field`);
- the bound block form passes gradcheck on a sampled rectangular block, for the input and every
  parameter, installed after binding (a block form reads its parameters when called);
- each layer is registered and has a gradcheck case, and a subclass of it trains through
  `make_task` and `fit` with the default config on a receptive field; a *Conv without a block
  form (`WHOLE_GRAPH_LAYERS`) is registered there and gradchecked too.

Nothing here names a count: a layer added to GRAPH_LAYERS runs through all of it with its
defaults; VARIANTS adds settings that change a shipped layer's block computation.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest

import mgsparse.nn
from mgsparse import SparseTensor, Tensor, gradcheck
from mgsparse.catalog import GRAPH_CLASSIFIER_KINDS, MODELS, NODE_MODEL_KINDS
from mgsparse.checks.nn import Layer
from mgsparse.checks.runner import CASES as GRADCHECK_CASES
from mgsparse.config import config_from_dict
from mgsparse.data.sampler import NeighborSampler
from mgsparse.errors import HyperparameterError
from mgsparse.nn import (
    GRAPH_LAYERS,
    WHOLE_GRAPH_LAYERS,
    GATConv,
    GCNConv,
    Module,
    ModuleList,
    SAGEConv,
)
from mgsparse.nn.block import block_support, gather_rows, on_block
from mgsparse.nn.stack import EdgeListModel
from mgsparse.run import fit, make_task
from mgsparse.run.build import graph_layer
from mgsparse.run.field import Field
from tests.data.test_sampler import random_digraph

N, F_IN, F_OUT = 40, 3, 2
EDGES = random_digraph(np.random.default_rng(7), N, 200)  # self loops; node N-1 has no edges
VARIANTS: dict[type, list[dict]] = {
    GATConv: [{"heads": 2}, {"heads": 2, "concat": False}],
    SAGEConv: [{"normalize": True}, {"root_weight": False}],
}


@dataclass
class Kind:
    """One layer class with some constructor settings: `make(F_in, F_out)` builds it."""

    cls: type
    kwargs: dict = field(default_factory=dict)

    def make(self, f_in: int, f_out: int, seed: int = 1) -> Module:
        """In eval mode: a layer with batch statistics (GIN's BatchNorm1d) mixes the rows of
        its batch while training, so only eval mode is a function of each row's field."""
        layer = self.cls(f_in, f_out, rng=np.random.default_rng(seed), dtype=np.float64,
                         **self.kwargs)
        return layer.eval()

    def __repr__(self) -> str:
        return self.cls.__name__ + "".join(f"-{k}={v}" for k, v in self.kwargs.items())


def subclass(cls: type) -> type:
    """A renamed subclass that adds nothing: it must run on blocks through inheritance."""
    return type(f"My{cls.__name__}", (cls,), {"__module__": __name__})


KINDS = [Kind(c, kw) for base in GRAPH_LAYERS for c in (base, subclass(base))
         for kw in [{}, *VARIANTS.get(base, [])]]


class LayerStack(EdgeListModel):
    """The shared stack (no dropout, ReLU between) over the given graph layers."""

    def __init__(self, convs: list[Module]):
        super().__init__(0.0, "relu", np.random.default_rng(0), None)
        self.convs = ModuleList(convs)


def features(seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, F_IN)) * (rng.random((N, F_IN)) < 0.7)  # some zeros


def stack_of(kind: Kind, layers: int, x: np.ndarray) -> LayerStack:
    """`layers` layers of `kind`, F_IN → 4 → F_OUT; the hidden width read from a forward
    (a layer may widen its output, e.g. concatenated attention heads)."""
    if layers == 1:
        return LayerStack([kind.make(F_IN, F_OUT)])
    first = kind.make(F_IN, 4)
    width = first(Tensor(x), EDGES).shape[1]
    return LayerStack([first, kind.make(width, F_OUT, seed=2)])


# ---------------------------------------------------------------- the contract


@pytest.mark.parametrize("kind", KINDS, ids=repr)
def test_messages_flow_from_source_to_target(kind):
    """On 0 → 1 → 2 a change of x_0 reaches node 1 (and 0 itself), x_2 only node 2 itself: each
    layer aggregates at the target from its sources, and by default keeps its own term."""
    layer, path = kind.make(2, 2), np.array([[0, 1], [1, 2]])
    x = np.random.default_rng(0).standard_normal((3, 2))
    base = layer(Tensor(x), path).data
    reached = []
    for node in range(3):
        moved = x.copy()
        moved[node] += 1.0
        changed = np.abs(layer(Tensor(moved), path).data - base).max(axis=1) > 1e-9
        reached.append(np.flatnonzero(changed).tolist())
    assert [sorted(set(r) - {j}) for j, r in enumerate(reached)] == [[1], [2], []]
    if not kind.kwargs:  # by default every layer keeps each node's own term
        assert reached == [[0, 1], [1, 2], [2]]


@pytest.mark.parametrize("kind", KINDS, ids=repr)
def test_a_block_with_every_in_edge_gives_the_whole_graphs_rows(kind):
    layer, x = kind.make(F_IN, F_OUT), features()
    whole = layer(Tensor(x), EDGES).data
    targets = np.concatenate([np.random.default_rng(3).permutation(N - 1)[:14], [N - 1]])
    block = NeighborSampler(EDGES, N, [-1]).block(targets, -1)
    assert block.shape[1] > block.shape[0]
    bound = on_block(layer, block)
    for rows in (gather_rows(x, block.n_id), gather_rows(SparseTensor.from_dense(x), block.n_id)):
        out = bound(rows)
        assert out.shape == (len(targets), whole.shape[1])
        np.testing.assert_allclose(out.data, whole[targets], rtol=1e-12, atol=1e-14)


def loss_and_grads(model: LayerStack, logits: Tensor, weights: np.ndarray):
    model.zero_grad()
    loss = (logits * Tensor(weights)).sum()
    loss.backward()
    return loss.item(), {name: p.grad.copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", KINDS, ids=repr)
def test_a_field_gives_the_whole_graphs_logits_and_gradients(kind, layers):
    x = features()
    model = stack_of(kind, layers, x)
    rows = np.concatenate([np.random.default_rng(4).permutation(N - 1)[:9], [N - 1]])
    blocks = NeighborSampler(EDGES, N, [-1] * layers).sample(rows, None).blocks
    logits = model(Tensor(x), EDGES)[rows]
    weights = np.random.default_rng(5).standard_normal(logits.shape)
    whole = loss_and_grads(model, logits, weights)
    on_field = loss_and_grads(model, Field(blocks, x).logits(model), weights)
    assert on_field[0] == pytest.approx(whole[0], rel=1e-12)
    assert whole[1].keys() == on_field[1].keys()
    for name, grad in whole[1].items():
        assert np.abs(grad).max() > 0, name  # every parameter is reached
        np.testing.assert_allclose(on_field[1][name], grad, rtol=1e-10, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("kind", KINDS, ids=repr)
def test_gradcheck_of_the_block_form_on_a_sampled_rectangular_block(kind):
    rng = np.random.default_rng(6)
    layer = kind.make(F_IN, F_OUT)
    block = NeighborSampler(EDGES, N, [2]).block(rng.permutation(N)[:8], 2, rng)
    assert block.shape[1] > block.shape[0]  # rectangular: sources beyond the targets
    assert (block.num_sampled < block.degree[:block.num_targets]).any()  # sampled, not whole
    bound = on_block(layer, block)  # bound once; the checker's parameters installed after
    call = Layer(layer, lambda m, x: bound(x), None, block.nnz)
    params = [Tensor(rng.standard_normal(p.shape) * 0.5, requires_grad=True)
              for p in layer.parameters()]
    x = Tensor(rng.standard_normal((block.shape[1], F_IN)), requires_grad=True)
    inputs = [x, *params]
    result = gradcheck(call, inputs)
    assert result.passed and result.max_abs_err < 1e-7
    call(*inputs).sum().backward()
    assert all(t.grad is not None and np.abs(t.grad).max() > 0 for t in inputs)


# ---------------------------------------------------------------- the registry


def test_a_layer_without_a_block_form_is_named():
    class NoBlockConv(Module):
        def forward(self, x, edge_index):
            return x

    class Opaque(GCNConv):
        on_block = None  # switched off in a subclass

    x = features()
    model = LayerStack([GCNConv(F_IN, 4), NoBlockConv(), Opaque(4, F_OUT)])
    assert block_support(model) == "NoBlockConv, Opaque has no block form (an on_block method)"
    assert block_support(stack_of(Kind(subclass(SAGEConv)), 2, x)) is None
    blocks = NeighborSampler(EDGES, N, [-1] * 3).sample(np.arange(5), None).blocks
    with pytest.raises(HyperparameterError, match="cannot run on blocks: NoBlockConv, Opaque has "
                       "no block form .*; set train.receptive_field: false and train.batch_size"):
        Field(blocks, x).logits(model)
    with pytest.raises(HyperparameterError, match="^NoBlockConv has no block form"):
        on_block(NoBlockConv(), blocks[0])


def library_graph_layers() -> set[type]:
    """Every class of mgsparse.nn with a block form or named like a graph layer (*Conv)."""
    found = set()
    for info in pkgutil.walk_packages(mgsparse.nn.__path__, prefix="mgsparse.nn."):
        for _, cls in inspect.getmembers(importlib.import_module(info.name), inspect.isclass):
            if cls.__module__ == info.name and issubclass(cls, Module) and (
                    cls.__name__.endswith("Conv") or "on_block" in vars(cls)):
                found.add(cls)
    return found


def test_every_graph_layer_of_the_library_is_registered_and_gradchecked():
    """A *Conv is in GRAPH_LAYERS (the contract above), or, without a block form, in
    WHOLE_GRAPH_LAYERS (block_support names it), or a layer for sets of graphs only that the
    catalog names (`graph_layer`: GINE and GAT with edge features, which read edge features a node model has no config
    for); every one has a gradcheck case."""
    found, whole = library_graph_layers(), set(WHOLE_GRAPH_LAYERS)
    for_graphs = {graph_layer(k) for k in GRAPH_CLASSIFIER_KINDS} - set(GRAPH_LAYERS)
    assert set(GRAPH_LAYERS) | whole | for_graphs <= found  # the walk sees the shipped layers
    assert sorted(c.__name__ for c in found - set(GRAPH_LAYERS) - whole - for_graphs) == []
    assert [c.__name__ for c in whole if callable(getattr(c, "on_block", None))] == []
    assert sorted(c.__name__ for c in for_graphs) == ["EdgeGATConv", "GINEConv"]
    checked = {type(case.inputs("small")[-1].module) for case in GRADCHECK_CASES.values()
               if isinstance(case.inputs("small")[-1], Layer)}
    assert sorted(c.__name__ for c in (set(GRAPH_LAYERS) | whole | for_graphs) - checked) == []


# ---------------------------------------------------------------- a subclass trains by default


def model_kind_of(layer: type) -> str:
    """The catalog's model kind whose model is defined beside `layer` (its architecture)."""
    (kind,) = [k for k in NODE_MODEL_KINDS
               if getattr(mgsparse.nn, MODELS[k].builder).__module__ == layer.__module__]
    return kind


@pytest.mark.parametrize("layer", GRAPH_LAYERS, ids=lambda c: c.__name__)
def test_a_subclass_trains_with_the_default_config_on_a_receptive_field(layer, monkeypatch):
    """The model kind's own model built from a renamed subclass of its layer, trained with the
    default `train.receptive_field: auto` on a graph whose training rows are a small part of
    it: the field is used, and the run is the one the shipped layer gives, parameter for
    parameter."""
    config = config_from_dict({
        "dataset": {"name": "synthetic", "num_nodes": 600, "num_classes": 3, "avg_degree": 4,
                    "num_features": 16, "split": "random", "num_train_per_class": 10,
                    "num_val": 30, "num_test": 60},
        "model": {"kind": model_kind_of(layer)},
        "train": {"epochs": 3, "seed": 3}, "monitor": {"memory": False}})
    assert config.train.receptive_field == "auto"
    runs = []
    for cls in (layer, subclass(layer)):
        monkeypatch.setattr(sys.modules[layer.__module__], layer.__name__, cls)
        task = make_task(config)
        assert type(task.build_model(np.random.default_rng(0)).convs[0]) is cls
        result = fit(config, task)
        assert "training rows" in result.placement  # the receptive field trained it
        runs.append(result.runs[0])
    assert [r.status for r in runs] == ["completed", "completed"]
    assert runs[0].state and runs[0].state.keys() == runs[1].state.keys()
    for name, value in runs[0].state.items():
        np.testing.assert_array_equal(runs[1].state[name], value, err_msg=name)
