"""Checking a config: one value against its field's annotation and range, with the messages a
user sees (`must be > 0 (got -1)`, `must be one of 'gcn', ... ; did you mean 'gcn'?`), then the
rules across sections (settings each valid alone that cannot work together).

`mgsparse.config` builds the sections (`sections.py`) from the data `yaml.py` read; every
message here is one line, and the rules across sections prefix it with where the key was
written (``<file>:<line>:`` or ``--set section.key=value:``).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from mgsparse.catalog import (
    DATASETS,
    GRAPH_CLASSIFIER_KINDS,
    MODELS,
    NODE_MODEL_KINDS,
    is_graphset,
    is_molecules,
    is_points,
)
from mgsparse.config.kg import check_kg
from mgsparse.config.rules import check_link, check_unread_keys, check_unread_options
from mgsparse.config.sections import (
    FILE_KEYS,
    MOLECULE_KEYS,
    Config,
    DatasetConfig,
    ModelConfig,
)
from mgsparse.config.yaml import Where
from mgsparse.errors import ConfigError, did_you_mean

# ---------------------------------------------------------------- one value

BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"),
           "le": (operator.le, "<="), "lt": (operator.lt, "<")}


class Bad(Exception):
    """A value that is not ``expected``; the caller adds the key and where it was written."""

    def __init__(self, expected: str, value: Any, hint: str = "") -> None:
        super().__init__(expected)
        self.expected, self.value, self.hint = expected, value, hint


def show(value: Any) -> str:
    """Spell a value the way YAML would, shortened, for error messages."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def suggest(word: Any, options: Sequence[str]) -> str:
    """The package's one close-match hint (`errors.did_you_mean`), as ``; did you mean 'x'?``."""
    return did_you_mean(word, options)


def _range_problem(value: float, bounds: Mapping[str, float]) -> str | None:
    """``None`` when ``value`` is inside; else the interval, e.g. ``in [0, 1)`` or ``> 0``."""
    if all(BOUNDS[name][0](value, bound) for name, bound in bounds.items()):
        return None
    if len(bounds) == 2:  # one lower and one upper bound
        opening, low = ("[", bounds["ge"]) if "ge" in bounds else ("(", bounds["gt"])
        closing, high = ("]", bounds["le"]) if "le" in bounds else (")", bounds["lt"])
        return f"in {opening}{low:g}, {high:g}{closing}"
    (name, bound), = bounds.items()
    return f"{BOUNDS[name][1]} {bound:g}"


def _check_scalar(value: Any, hint: Any, meta: Mapping[str, Any]) -> Any:
    """Return ``value`` as type ``hint`` or raise `Bad`; bools are never numbers."""
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if isinstance(value, str) and value in choices:
            return value
        raise Bad(f"one of {', '.join(map(repr, choices))}", value, suggest(value, choices))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise Bad("true or false", value)
    if hint is str:
        if isinstance(value, str) and value:
            return value
        raise Bad("a non-empty string", value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Bad("an integer" if hint is int else "a number", value)
    if not math.isfinite(value):
        raise Bad("a finite number", value)
    if hint is int and value != int(value):
        raise Bad("an integer", value)
    problem = _range_problem(value, meta)
    if problem:
        raise Bad(problem, value)
    return int(value) if hint is int else float(value)


def check_value(value: Any, hint: Any, meta: Mapping[str, Any], key: str) -> Any:
    """Check one field's value against its annotation; ``key`` is the dotted name."""
    nullable = type(None) in typing.get_args(hint)
    words: tuple = ()  # a number that may also be one of some words: `float | Literal["auto"]`
    if nullable or typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and nullable:
            return None
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        words = next((arg for arg in args if typing.get_origin(arg) is Literal), ())
        hint = next(arg for arg in args if arg is not words)
        other = "true or false" if hint is bool else "a number"
        if words and isinstance(value, str):
            hint = words
    if hint is words:
        or_null = f" or {other}"
    else:
        or_null = "".join(f" or {word!r}" for word in typing.get_args(words) if words)
    or_null += " or null" if nullable else ""
    if typing.get_origin(hint) is tuple:
        return _check_list(value, typing.get_args(hint), meta, key, or_null)
    try:
        return _check_scalar(value, hint, meta)
    except Bad as bad:
        raise ConfigError(f"{key} must be {bad.expected}{or_null} "
                          f"(got {show(bad.value)}){bad.hint}") from None


def _check_list(value: Any, item_hints: tuple, meta: Mapping[str, Any], key: str,
                or_null: str) -> tuple:
    """A YAML list as a tuple, each item checked: ``tuple[float, float]`` is a pair,
    ``tuple[int, ...]`` a non-empty list of any length."""
    if item_hints[-1:] == (Ellipsis,):
        if not isinstance(value, list) or not value:
            got = "an empty list" if value == [] else show(value)
            raise ConfigError(f"{key} must be a non-empty list of {_items(item_hints[0])}"
                              f"{or_null} (got {got})")
        item_hints = item_hints[:1] * len(value)
    if not isinstance(value, list) or len(value) != len(item_hints):
        raise ConfigError(f"{key} must be a list of {len(item_hints)} numbers{or_null} "
                          f"(got {show(value)})")
    checked = []
    for index, (item, item_hint) in enumerate(zip(value, item_hints)):
        try:
            checked.append(_check_scalar(item, item_hint, meta))
        except Bad as bad:
            raise ConfigError(f"{key}[{index}] must be {bad.expected} "
                              f"(got {show(bad.value)})") from None
    return tuple(checked)


def _items(hint: Any) -> str:
    """What a list's items are, for its message: numbers, or the words it may hold."""
    if typing.get_origin(hint) is Literal:
        return ", ".join(map(repr, typing.get_args(hint)))
    return "integers" if hint is int else "numbers"


# ---------------------------------------------------------------- across sections

def check_combination(config: Config, where: Where) -> None:
    """Settings that are each valid but cannot work together: the first one found is raised."""
    _check_data(config, where)
    _check_held_out(config.dataset, where)
    _check_sampling(config, where)
    if config.train.receptive_field is True and not is_points(config.dataset.name):
        _check_receptive_field(config.model, _sampled(config), where)
    _check_loss(config, where)
    _check_terms(config.model, where)
    _check_graph_classification(config, where)
    _check_schedule(config, where)
    check_unread_options(config, where)
    if config.task == "link":
        check_link(config, where)
    _check_reorder(config, where)
    check_unread_keys(config, where)
    check_kg(config, where)


def _graphless() -> list[str]:
    """The model kinds that read no graph (an MLP)."""
    return [kind for kind, facts in MODELS.items() if facts.operand is None]


def _sampled(config: Config) -> bool:
    """A graph run on neighbour-sampled mini-batches (point clouds batch without sampling)."""
    name = config.dataset.name
    return config.train.batch_size is not None and not (is_points(name) or _graph_sets(name))


def _graph_sets(name: str) -> bool:
    """Many small graphs trained in batches of graphs: TU sets and molecule sets."""
    return is_graphset(name) or is_molecules(name)


def _check_data(config: Config, where: Where) -> None:
    """The dataset can feed the model, and only the user's own files read file keys."""
    data, model = config.dataset, config.model
    graphless = _graphless()
    if is_points(data.name) and model.kind not in graphless:
        raise ConfigError(f"{where(('model', 'kind'))}: model.kind {model.kind!r} needs a "
                          f"graph, and dataset {data.name!r} has none; use kind: "
                          f"{' or '.join(graphless)}")
    if not _graph_sets(data.name) and model.kind not in NODE_MODEL_KINDS:
        raise ConfigError(f"{where(('model', 'kind'))}: model.kind {model.kind!r} classifies "
                          f"sets of graphs only, and dataset {data.name!r} is not one; use "
                          f"one of {', '.join(NODE_MODEL_KINDS)}")
    files = DATASETS[data.name].source == "files"
    if files and data.edges is None:
        raise ConfigError(f"{where(('dataset', 'name'))}: dataset.name {data.name!r} reads "
                          f"your files: dataset.edges must name the edge list")
    named = [key for key in FILE_KEYS if getattr(data, key) is not None]
    if named and not files:
        raise ConfigError(f"{where(('dataset', named[0]))}: dataset.{named[0]} is read only "
                          f"for your own files (dataset.name: csv), not {data.name!r}")
    _check_molecule_keys(data, where)


def _check_molecule_keys(data: DatasetConfig, where: Where) -> None:
    """The molecule keys are read for molecule sets only; your own molecules need a file."""
    defaults = {f.name: f.default for f in dataclasses.fields(DatasetConfig)}
    named = [key for key in MOLECULE_KEYS if getattr(data, key) != defaults[key]]
    if named and not is_molecules(data.name):
        raise ConfigError(f"{where(('dataset', named[0]))}: dataset.{named[0]} is read for "
                          f"molecule sets only (solubility, freesolv, molecules), not "
                          f"{data.name!r}")
    if data.name == "molecules" and data.path is None:
        raise ConfigError(f"{where(('dataset', 'name'))}: dataset.name 'molecules' reads your "
                          f"own file: dataset.path must name an .sdf file or a .csv of SMILES")
    if data.name != "molecules" and data.path is not None:
        raise ConfigError(f"{where(('dataset', 'path'))}: dataset.path is read for your own "
                          f"molecules (dataset.name: molecules), not {data.name!r}")


def _check_held_out(data: DatasetConfig, where: Where) -> None:
    """Where ``num_val`` is read (a random split of a graph, a point cloud) it must hold a
    row: the validation rows score every epoch and choose the best one, so none at all
    would fail at the first evaluation."""
    points = is_points(data.name)
    if data.num_val == 0 and (points or data.split == "random"):
        reads = f"for point cloud {data.name!r}" if points else "with dataset.split: random"
        rows = "points" if points else "nodes"
        raise ConfigError(f"{where(('dataset', 'num_val'))}: dataset.num_val must be >= 1 "
                          f"{reads} (got 0): the validation {rows} choose the best epoch")
    if points and data.num_val + data.num_test >= data.num_samples:
        raise ConfigError(f"{where(('dataset', 'num_test'))}: dataset.num_val + "
                          f"dataset.num_test ({data.num_val + data.num_test}) leave no "
                          f"training samples out of dataset.num_samples ({data.num_samples})")


def _check_sampling(config: Config, where: Where) -> None:
    """Fanouts are counts (or -1), and sampled mini-batches need a graph model that runs on
    blocks, with one fanout per layer."""
    model, fanouts = config.model, config.sampler.fanouts
    if any(k == 0 or k < -1 for k in fanouts):
        raise ConfigError(f"{where(('sampler', 'fanouts'))}: sampler.fanouts entries must be "
                          f">= 1 or -1 (all neighbours), got {list(fanouts)}")
    if not _sampled(config):
        return
    if model.kind in _graphless():
        raise ConfigError(f"{where(('train', 'batch_size'))}: train.batch_size on a graph "
                          f"samples neighbourhoods for a graph model; model.kind "
                          f"{model.kind!r} reads no graph (set batch_size: null)")
    if not MODELS[model.kind].block_form:
        raise ConfigError(f"{where(('train', 'batch_size'))}: train.batch_size samples blocks "
                          f"for each layer; model.kind {model.kind!r} propagates over the "
                          f"whole graph (no block form; set batch_size: null)")
    options = [k for k in ("residual", "jk", "norm") if getattr(model, k) not in (False, "none")]
    if options:
        raise ConfigError(f"{where(('model', options[0]))}: model.{options[0]} is for "
                          f"full-batch training (receptive fields included), not sampled "
                          f"mini-batches: their layer-wise evaluation runs the plain stack")
    if model.learn_edge_weight or model.keyed_dropout:
        key = "learn_edge_weight" if model.learn_edge_weight else "keyed_dropout"
        raise ConfigError(f"{where(('model', key))}: model.{key} is for full-batch graph "
                          f"training, not sampled mini-batches (train.batch_size)")
    if len(fanouts) != model.layers:
        raise ConfigError(f"{where(('sampler', 'fanouts'))}: sampler.fanouts needs one entry per "
                          f"layer ({model.layers}), got {list(fanouts)}")


def _check_loss(config: Config, where: Where) -> None:
    """Graph tasks (full batch, field, sampled, partitioned) all train with softmax
    cross-entropy: a graph run with another loss or head would silently train that one
    while metrics.json recorded the setting, so it is refused. Point clouds pair them."""
    data, loss, head = config.dataset, config.train.loss, config.model.head
    if is_molecules(data.name) and loss == "bce":
        raise ConfigError(f"{where(('train', 'loss'))}: train.loss 'bce' is for point clouds; "
                          f"a molecule set trains mse, l1 or huber (a numeric target) or "
                          f"cross_entropy (a class target)")
    if loss in ("l1", "huber") and not is_molecules(data.name):
        raise ConfigError(f"{where(('train', 'loss'))}: train.loss {loss!r} is for molecule "
                          f"regression (solubility, freesolv, molecules), not {data.name!r}")
    if not is_points(data.name) and not is_molecules(data.name) and loss != "cross_entropy":
        raise ConfigError(f"{where(('train', 'loss'))}: train.loss {loss!r} is for point "
                          f"clouds: graph tasks train with cross_entropy (dataset "
                          f"{data.name!r}; set loss: cross_entropy)")
    if not is_points(data.name) and head != "softmax":
        raise ConfigError(f"{where(('model', 'head'))}: model.head {head!r} is for point "
                          f"clouds: graph tasks train with cross_entropy on a softmax head "
                          f"(dataset {data.name!r}; set head: softmax)")
    if (loss, head) in (("bce", "softmax"), ("cross_entropy", "sigmoid")):
        raise ConfigError(f"{where(('train', 'loss'))}: train.loss {loss!r} does not "
                          f"fit model.head {head!r} (bce goes with sigmoid, "
                          f"cross_entropy with softmax, mse with either)")


def _check_terms(model: ModelConfig, where: Where) -> None:
    """ChebNet's model.k counts Chebyshev terms T_0 .. T_{K-1}: a filter needs one at least
    (the section's range, >= 0, is the propagation steps of APPNP and SGC)."""
    if model.kind == "cheb" and model.k == 0:
        raise ConfigError(f"{where(('model', 'k'))}: model.k must be >= 1 for model.kind "
                          f"'cheb' (Chebyshev terms; 1 is a Linear layer), got 0")


def no_receptive_field(model: ModelConfig, sampled: bool = False) -> str | None:
    """Why a run of this model cannot train on receptive fields (run/field.py), or None."""
    if MODELS[model.kind].operand is None:
        return f"model.kind {model.kind!r} reads no graph"
    if not MODELS[model.kind].block_form:
        return f"model.kind {model.kind!r} propagates over the whole graph (no block form)"
    if model.learn_edge_weight:
        return "model.learn_edge_weight rebuilds the whole graph's Â every step"
    if model.keyed_dropout:
        return "model.keyed_dropout keys masks by whole-graph rows"
    return "sampled mini-batches (train.batch_size) build blocks of their own" if sampled else None


def _check_receptive_field(model: ModelConfig, sampled: bool, where: Where) -> None:
    """`train.receptive_field: true` asks for something: refuse what cannot give it."""
    why = no_receptive_field(model, sampled)
    if why:
        raise ConfigError(f"{where(('train', 'receptive_field'))}: train.receptive_field: "
                          f"true cannot apply: {why} (use auto or false)")


def _check_graph_classification(config: Config, where: Where) -> None:
    """k-fold runs classify sets of graphs, one model per fold; a set of graphs needs a
    model with a graph classifier's shape."""
    data, train, kind = config.dataset, config.train, config.model.kind
    if train.folds is not None and not is_graphset(data.name):
        raise ConfigError(f"{where(('train', 'folds'))}: train.folds (k-fold cross-validation) "
                          f"is for sets of graphs (graph classification); dataset "
                          f"{data.name!r} is not one")
    if train.folds is not None and train.runs > 1:
        raise ConfigError(f"{where(('train', 'runs'))}: train.runs {train.runs} with "
                          f"train.folds {train.folds}: a k-fold run trains one model per "
                          f"fold (set runs: 1)")
    if _graph_sets(data.name) and kind not in GRAPH_CLASSIFIER_KINDS:
        raise ConfigError(f"{where(('model', 'kind'))}: model.kind {kind!r} has no graph "
                          f"classifier for dataset {data.name!r}; use one of "
                          f"{', '.join(GRAPH_CLASSIFIER_KINDS)}")


def _check_schedule(config: Config, where: Where) -> None:
    """Warmup belongs to the cosine schedule and fits in the run; a floor is below the rate."""
    o, epochs = config.optim, config.train.epochs
    if o.warmup > 0 and o.schedule != "cosine":
        raise ConfigError(f"{where(('optim', 'warmup'))}: optim.warmup is read by schedule: "
                          f"cosine only (schedule is {o.schedule!r})")
    if o.warmup > epochs:
        raise ConfigError(f"{where(('optim', 'warmup'))}: optim.warmup ({o.warmup} epochs) is "
                          f"longer than train.epochs ({epochs})")
    if o.schedule in ("cosine", "plateau") and o.min_lr >= o.lr:
        raise ConfigError(f"{where(('optim', 'min_lr'))}: optim.min_lr ({o.min_lr:g}) must be "
                          f"below optim.lr ({o.lr:g}), the rate the {o.schedule} schedule "
                          f"lowers")


def _check_reorder(config: Config, where: Where) -> None:
    """A new node order is mapped back for node classification only: a link run's held-out
    pairs, a set of graphs and a point cloud keep their own ids, and a GCN that learns its
    edge weights saves one weight per edge of the order it trained in."""
    data = config.dataset
    if data.reorder == "none":
        return
    if config.task == "link" or is_points(data.name) or _graph_sets(data.name):
        what = "task: link" if config.task == "link" else f"dataset {data.name!r}"
        raise ConfigError(f"{where(('dataset', 'reorder'))}: dataset.reorder: {data.reorder} "
                          f"orders the nodes of one graph for node classification, not "
                          f"{what} (set reorder: none)")
    if config.model.learn_edge_weight:
        raise ConfigError(f"{where(('dataset', 'reorder'))}: dataset.reorder: {data.reorder} "
                          f"with model.learn_edge_weight: the saved weights, one per edge, "
                          f"would be in the new order (set reorder: none)")
