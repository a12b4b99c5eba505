"""A run's model and optimizer, built from the config's sections as plain arguments.

Which class builds a model kind, and which of the model section's keys it takes, are the
catalog's facts: adding a model is a catalog row and its class in `mgsparse.nn`; a layer for
sets of graphs is a catalog row naming its module and class (`graph_layer`).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

import mgsparse.nn
from mgsparse.catalog import GRAPH_CLASSIFIER_KINDS, MODELS
from mgsparse.config import ModelConfig, OptimConfig
from mgsparse.errors import ConfigError, MemoryBudgetError
from mgsparse.nn.module import Module
from mgsparse.optim import SGD, Adam, AdamW, Optimizer, make_schedule
from mgsparse.optim.schedules import Schedule


def graph_layer(kind: str) -> type[Module]:
    """The layer class a graph classifier stacks for model kind `kind`: the catalog's
    ``graph_layer`` ("module:Class"), imported on first use, so no table of kinds is kept
    anywhere else."""
    facts = MODELS.get(kind)
    if facts is None or not facts.graph_layer:
        raise ConfigError(f"model.kind {kind!r} has no layer for sets of graphs; use one of "
                          f"{', '.join(GRAPH_CLASSIFIER_KINDS)}")
    module, name = facts.graph_layer.split(":")
    return getattr(importlib.import_module(module), name)


def build_model(m: ModelConfig, num_features: int, num_outputs: int, rng: np.random.Generator,
                edge_index: np.ndarray | None = None, dtype: Any = np.float32) -> Module:
    """The model `m` describes, with `num_outputs` logits and parameters of `dtype` (the
    task's: a float64 task steps a float64 model). `edge_index` is read only by a GCN that
    learns its edge weights (it rebuilds Â from them every step); every other model is
    handed its graph operand at call time, by the task."""
    facts = MODELS[m.kind]
    options = {key: getattr(m, key) for key in facts.options}
    if options.get("learn_edge_weight"):
        options["edge_index"] = edge_index
    cls = getattr(mgsparse.nn, facts.builder)
    try:
        model = cls(num_features, m.hidden, num_outputs, layers=m.layers, dropout=m.dropout,
                    activation=m.activation, rng=rng, dtype=dtype, **options)
    except MemoryError as e:  # parameters alone past the RAM: name the sizes that ask for it
        sizes = f"model.hidden={m.hidden}, model.layers={m.layers}" + (
            f", model.heads={m.heads}" if "heads" in facts.options else "")
        raise MemoryBudgetError(f"model.kind {m.kind!r}: its parameters do not fit in memory "
                                f"({sizes}; {e}); use a smaller model") from None
    model.keyed_masks = m.keyed_dropout  # hashed masks: what a partitioned run draws
    return model


def first_layer_parameters(model: Module) -> list:
    """The parameters of the first layer: the GCN recipe decays these only."""
    first = next(iter(model.children()))  # convs / linears
    return [p for name, p in first.named_parameters() if name.startswith("0.")]


def decay_groups(o: OptimConfig, model: Module) -> list[dict] | None:
    """The model's own parameter groups when `optim.conv_weight_decay` is set: a model whose
    convolutions are apart from its dense layers (`param_groups`, GCNII) decays them apart."""
    if o.conv_weight_decay is None:
        return None
    if not hasattr(model, "param_groups"):
        raise ConfigError(f"optim.conv_weight_decay: {type(model).__name__} does not separate its "
                          "convolutions from its dense layers (gcnii does); set it to null")
    if o.weight_decay_first_layer_only:
        raise ConfigError("optim.conv_weight_decay and optim.weight_decay_first_layer_only: true "
                          "both choose the decayed parameters; set the latter to false")
    return model.param_groups(o.weight_decay, o.conv_weight_decay)


def build_optimizer(o: OptimConfig, model: Module) -> Optimizer:
    params = model.parameters()
    groups = decay_groups(o, model)
    if groups is None and o.weight_decay_first_layer_only and o.weight_decay > 0:
        first = {id(p) for p in first_layer_parameters(model)}
        groups = [{"params": [p for p in params if id(p) in first], "weight_decay": o.weight_decay},
                  {"params": [p for p in params if id(p) not in first], "weight_decay": 0.0}]
        groups = [g for g in groups if g["params"]]
    elif groups is None:
        groups = [{"params": params, "weight_decay": o.weight_decay}]
    if o.name == "sgd":
        return SGD(groups, lr=o.lr, momentum=o.momentum, nesterov=o.nesterov)
    if o.name == "adam":
        return Adam(groups, lr=o.lr, betas=tuple(o.betas))
    return AdamW(groups, lr=o.lr, betas=tuple(o.betas))


def build_schedule(o: OptimConfig, optimizer: Optimizer, epochs: int,
                   maximize: bool = False) -> Schedule | None:
    """The run's learning-rate schedule (`optim.schedule`; None: a constant rate). A plateau
    watches the selection column: `maximize` when a higher value is better (an accuracy)."""
    return make_schedule(o.schedule, optimizer, epochs, step_size=o.step_size, gamma=o.gamma,
                         warmup=o.warmup, min_lr=o.min_lr, patience=o.plateau_patience,
                         mode="max" if maximize else "min")
