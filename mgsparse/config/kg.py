"""The ``kg`` section (knowledge-graph completion, `mgsparse.run.tasks.kg`) and its rules.

A knowledge graph (``dataset.name: umls | kinships | nations | triples``) trains an embedding
model named here, not in the model section: the scorer, its width, how a step scores (1-N or
sampled negatives), its regulariser. `check_kg` refuses the settings such a run would record
and never read (the model section, a node split, ``train.batch_size``), and kg keys on a
dataset that is not a knowledge graph.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from mgsparse.catalog import is_triples
from mgsparse.errors import ConfigError

SCORERS = ("distmult", "complex", "transe", "rotate")
DATASET_READS = ("name", "root", "url", "train_triples", "valid_triples", "test_triples")


def _num(default: Any, **bounds: float) -> Any:
    return field(default=default, metadata=bounds)


@dataclass(frozen=True)
class KgConfig:
    """Knowledge-graph completion.

    ``scorer``: DistMult, ComplEx, TransE or RotatE (`mgsparse.nn.kge`); ``dim`` its rank (a
    complex scorer keeps a real and an imaginary half, 2·dim numbers per entity); ``encoder``
    rgcn puts an R-GCN (`mgsparse.nn.rgcn`, ``rgcn_layers`` deep, ``rgcn_bases`` bases) under
    the scorer. ``reciprocal`` learns an inverse relation r⁻¹ per relation and trains and
    scores (t, r⁻¹, ?) for head queries; otherwise a head query scores through the scorer's own
    inverse. ``training``: 1vsall (each triple a query, cross-entropy over every entity,
    Lacroix et al. 2018), kvsall (each (head, relation) against all its training tails, BCE
    with ``label_smoothing``, Dettmers et al. 2018) or negatives (``num_negatives`` uniform
    tails per triple, weighted by RotatE's self-adversarial softmax at
    ``adversarial_temperature``, 0: uniform weights). ``regularizer`` n3 (Σ|e|³ of the factors
    a batch reads, Lacroix et al.) or l2, ``reg_weight`` its weight; ``margin`` the γ of
    TransE and RotatE; ``p_norm`` TransE's distance; ``init_scale`` the embeddings' initial
    standard deviation; ``batch_size`` queries per step; ``eval_batch`` queries per scoring.
    """

    scorer: Literal[SCORERS] = "complex"
    dim: int = _num(200, ge=1)
    reciprocal: bool = True
    training: Literal["1vsall", "kvsall", "negatives"] = "1vsall"
    label_smoothing: float = _num(0.0, ge=0, lt=1)
    num_negatives: int = _num(64, ge=1)
    adversarial_temperature: float = _num(1.0, ge=0)
    regularizer: Literal["n3", "l2", "none"] = "n3"
    reg_weight: float = _num(0.01, ge=0)
    margin: float = _num(9.0, ge=0)
    p_norm: int = _num(2, ge=1, le=2)
    init_scale: float = _num(1e-3, gt=0)
    batch_size: int = _num(1000, ge=1)
    eval_batch: int = _num(1024, ge=1)
    encoder: Literal["none", "rgcn"] = "none"
    rgcn_layers: int = _num(1, ge=1, le=8)
    rgcn_bases: int | None = _num(None, ge=1)


_KG_DEFAULTS = {f.name: f.default for f in dataclasses.fields(KgConfig)}


def _set(config: Any, where: Any, section: str, key: str, default: Any) -> bool:
    """Set away from its default. (A key written at its default is let through: a resolved
    config, every key written out, must load again.)"""
    return getattr(getattr(config, section), key) != default


def check_kg(config: Any, where: Any) -> None:
    """A knowledge graph reads the kg section; anything else must leave it alone."""
    from mgsparse.config.sections import DatasetConfig, ModelConfig  # one import cycle away

    data = config.dataset
    if not is_triples(data.name):
        for key, default in _KG_DEFAULTS.items():
            if _set(config, where, "kg", key, default):
                raise ConfigError(f"{where(('kg', key))}: kg.{key} is read for knowledge "
                                  f"graphs only (dataset.name: umls, kinships, nations or "
                                  f"triples), not {data.name!r}; remove it")
        return
    defaults = [("dataset", f.name, f.default) for f in dataclasses.fields(DatasetConfig)
                if f.name not in DATASET_READS]
    defaults += [("model", f.name, f.default) for f in dataclasses.fields(ModelConfig)]
    defaults += [("train", key, None) for key in ("batch_size", "folds", "metrics")]
    for section, key, default in defaults:
        if _set(config, where, section, key, default):
            reads = {"model": "the kg section names the model (kg.scorer, kg.dim)",
                     "train": "the kg section batches queries (kg.batch_size)",
                     "dataset": "a knowledge graph keeps its published splits"}[section]
            raise ConfigError(f"{where((section, key))}: {section}.{key} is not read for "
                              f"knowledge graph {data.name!r}: {reads}; remove it")
    if config.task != "node":
        raise ConfigError(f"{where(('task',))}: task: {config.task} does not apply to "
                          f"knowledge graph {data.name!r}, which always completes triples; "
                          "remove it")
    _check_kg_values(config, where)


def _check_kg_values(config: Any, where: Any) -> None:
    from mgsparse.config.sections import OptimConfig

    kg, optim, data = config.kg, config.optim, config.dataset
    _OPTIM_DECAY = OptimConfig.weight_decay
    own = data.name == "triples"
    for key in ("train_triples", "valid_triples", "test_triples"):
        if own and getattr(data, key) is None:
            raise ConfigError(f"{where(('dataset', 'name'))}: dataset.name: triples reads your "
                              f"files: dataset.{key} must name one")
        if not own and getattr(data, key) is not None:
            raise ConfigError(f"{where(('dataset', key))}: dataset.{key} is read for your own "
                              f"triples (dataset.name: triples), not {data.name!r}")
    if (optim.weight_decay > 0 and optim.weight_decay_first_layer_only
            and _set(config, where, "optim", "weight_decay", _OPTIM_DECAY)):  # the default: none
        raise ConfigError(f"{where(('optim', 'weight_decay'))}: an embedding model has no "
                          "first layer to decay; set optim.weight_decay_first_layer_only: "
                          "false, or use kg.regularizer: l2")
    if kg.label_smoothing and kg.training != "kvsall":
        raise ConfigError(f"{where(('kg', 'label_smoothing'))}: kg.label_smoothing smooths "
                          "kvsall's multi-hot targets; set kg.training: kvsall or remove it")
    if kg.encoder == "rgcn" and kg.scorer != "distmult":
        raise ConfigError(f"{where(('kg', 'encoder'))}: kg.encoder: rgcn decodes with "
                          f"DistMult (Schlichtkrull et al.); set kg.scorer: distmult")
    if kg.scorer != "transe" and kg.p_norm != 2:
        raise ConfigError(f"{where(('kg', 'p_norm'))}: kg.p_norm is TransE's distance; "
                          f"remove it for kg.scorer: {kg.scorer}")
