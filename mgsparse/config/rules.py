"""Rules across sections for keys a task would otherwise accept and never read (the extra
scores of `train.metrics`, a set of graphs' node-dataset keys, link prediction's pair budget),
and link prediction's own.

Each is refused with one line naming where the key was written (`check.check_combination`
runs them), because a key that is recorded in metrics.json but changes nothing tells the user
that it did.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mgsparse.catalog import MODELS, is_graphset, is_molecules, is_points
from mgsparse.config.sections import FILE_KEYS, Config, DatasetConfig, ModelConfig, OptimConfig
from mgsparse.config.yaml import Where
from mgsparse.errors import ConfigError

# what a set of graphs reads of the dataset section (`data.sources.tu.Tu.reads`, and the
# name); reorder and the file keys have their own rules
GRAPHSET_READS = ("name", "root", "url", "reorder", *FILE_KEYS)
# link prediction draws neg_ratio · E negatives a step: past this many per positive edge the
# sample is a dense matrix in disguise (use link.negatives: all, which scores every pair)
MAX_NEG_RATIO = 1000.0


def check_unread_keys(config: Config, where: Where) -> None:
    _check_metrics(config, where)
    _check_graphset_keys(config, where)
    _check_neg_ratio(config, where)


def _check_metrics(config: Config, where: Where) -> None:
    """`train.metrics` adds macro-F1 and ROC-AUC to a classification (node or graph labels):
    each once; link prediction scores AUC and average precision whatever it says."""
    metrics = config.train.metrics or ()
    twice = [m for i, m in enumerate(metrics) if m in metrics[:i]]
    if twice:
        raise ConfigError(f"{where(('train', 'metrics'))}: train.metrics lists {twice[0]!r} "
                          f"twice (got {list(metrics)}); name each score once")
    if metrics and config.task == "link":
        raise ConfigError(f"{where(('train', 'metrics'))}: train.metrics adds macro-F1 and "
                          f"ROC-AUC to classification; task: link always scores AUC and "
                          f"average precision (link.hits_k adds Hits@K): remove it")


def _check_graphset_keys(config: Config, where: Where) -> None:
    """A set of graphs (MUTAG, NCI1, ...) is split by the graph task (stratified folds, or
    80/10/10 by train.seed) and its one-hot features are used as they are: the node
    datasets' split, size and normalisation keys would be recorded and never read."""
    data = config.dataset
    if not is_graphset(data.name):
        return
    for key, default in _DATASET_DEFAULTS.items():
        if key in GRAPHSET_READS:
            continue
        path = ("dataset", key)
        if getattr(data, key) != default or path in where.lines or path in where.overrides:
            raise ConfigError(f"{where(path)}: dataset.{key} is not read for dataset "
                              f"{data.name!r}, a set of graphs: graph classification splits "
                              f"into stratified folds (train.folds) or 80/10/10 by "
                              f"train.seed, and uses the features as they are; remove it")


def _check_neg_ratio(config: Config, where: Where) -> None:
    ratio = config.link.neg_ratio
    if config.task == "link" and ratio > MAX_NEG_RATIO:
        raise ConfigError(f"{where(('link', 'neg_ratio'))}: link.neg_ratio must be <= "
                          f"{MAX_NEG_RATIO:g} sampled non-edges per training edge (got "
                          f"{ratio:g}); link.negatives: all scores every pair instead")


def check_link(config: Config, where: Where) -> None:
    """Link prediction (`task: link`) holds edges out of one graph, full batch: the split must
    leave edges to train on, an undirected split needs an undirected graph, and a VGAE needs
    a body below its two heads."""
    data, link = config.dataset, config.link
    if is_points(data.name) or is_graphset(data.name) or is_molecules(data.name):
        raise ConfigError(f"{where(('task',))}: task: link predicts the edges of one graph; "
                          f"dataset {data.name!r} is not one")
    if link.val + link.test >= 1:
        raise ConfigError(f"{where(('link', 'test'))}: link.val + link.test must be < 1 (got "
                          f"{link.val:g} + {link.test:g}): no edge would be left to train on")
    if data.directed and link.undirected:
        raise ConfigError(f"{where(('link', 'undirected'))}: dataset.directed: true keeps "
                          f"edges one-way, so they cannot be held out in both directions; "
                          f"set link.undirected: false")
    if config.train.batch_size is not None:
        raise ConfigError(f"{where(('train', 'batch_size'))}: task: link trains full batch "
                          f"(sampled pairs are designed, not built); set batch_size: null")
    if link.negatives == "all" and link.decoder != "inner":
        raise ConfigError(f"{where(('link', 'negatives'))}: link.negatives: all scores every "
                          f"pair as Z·Zᵀ, the inner-product decoder (set link.decoder: inner)")
    if link.variational and config.model.layers < 2:
        raise ConfigError(f"{where(('model', 'layers'))}: link.variational needs model.layers "
                          f">= 2 (a body, then the μ and log σ layers), got "
                          f"{config.model.layers}")


_DATASET_DEFAULTS = {f.name: f.default for f in dataclasses.fields(DatasetConfig)
                     if f.default is not dataclasses.MISSING}


# optim keys read only by some schedules (warmup: `check._check_schedule`)
SCHEDULE_KEYS = {"step_size": ("step",), "gamma": ("step", "plateau"),
                 "min_lr": ("cosine", "plateau"), "plateau_patience": ("plateau",)}


def check_unread_options(config: Config, where: Where) -> None:
    """A key set away from its default that the chosen model kind or schedule never reads
    (model.k on a GIN, model.heads on an SGC, optim.step_size without schedule: step) would
    be dropped silently while metrics.json recorded it: refused, naming who reads it."""
    model, optim = config.model, config.optim
    readers = {key: tuple(kind for kind, facts in MODELS.items() if key in facts.options)
               for facts in MODELS.values() for key in facts.options}
    unread = [("model", key, "model.kind", model.kind, kinds) for key, kinds in readers.items()
              if model.kind not in kinds]
    unread += [("optim", key, "optim.schedule", optim.schedule, names)
               for key, names in SCHEDULE_KEYS.items() if optim.schedule not in names]
    for section, key, chooser, chosen, users in unread:
        default = _DEFAULTS[section][key]
        if getattr(getattr(config, section), key) != default:
            raise ConfigError(f"{where((section, key))}: {section}.{key} is read by {chooser} "
                              f"{', '.join(users)} only ({chooser} is {chosen!r}); remove it "
                              f"or set it back to {_yaml(default)}")


def _yaml(value: Any) -> str:
    """A default as the YAML that writes it: null, true, false, 'text', a number."""
    return {None: "null", True: "true", False: "false"}.get(value, repr(value)) \
        if value is None or isinstance(value, bool) else repr(value)


_DEFAULTS = {section: {f.name: f.default for f in dataclasses.fields(cls)}
             for section, cls in (("model", ModelConfig), ("optim", OptimConfig))}
