"""Run configuration: YAML sections become frozen, validated dataclasses, built once.

A config file has up to seven sections (``dataset``, ``model``, ``optim``, ``train``,
``sparse``, ``sampler``, ``monitor``); every key has a default except ``dataset.name``. The
schema is the dataclasses below: each field's annotation gives its type (``Literal`` for a choice,
``X | None`` when null is allowed, ``tuple[float, float]`` for a pair) and its metadata
gives its range, so one table drives every check. Errors are ``ConfigError`` with one
line ``<file>:<line>: <section.key> <problem>`` (or ``--set section.key=value: ...`` for
a command-line override), so a user can jump straight to the bad key; the lines come from
`mgsparse.config_yaml`, which reads the file.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from mgsparse.catalog import DATASET_NAMES, DATASETS, MODEL_KINDS, MODELS, is_points
from mgsparse.config_check import BOUNDS, check_value, show, suggest
from mgsparse.config_yaml import Loader, Where, parse_yaml, yaml_error
from mgsparse.errors import ConfigError

FILE_KEYS = ("edges", "features", "labels", "train_nodes", "val_nodes", "test_nodes")
def _num(default: Any, **bounds: float) -> Any:
    """A dataclass field with an allowed interval: ``_num(0.5, ge=0, lt=1)`` is [0, 1)."""
    assert set(bounds) <= set(BOUNDS), bounds
    return field(default=default, metadata=bounds)


# ---------------------------------------------------------------- sections

@dataclass(frozen=True)
class DatasetConfig:
    """Which graph (or point cloud) to load and how to split it.

    ``num_val``/``num_test`` are node counts for the random split and held-out sample
    counts for moons/circles/blobs; the ``num_nodes``…``homophily`` keys shape the
    synthetic stochastic block model, ``noise``/``num_samples`` the point clouds;
    ``edges``…``test_nodes`` name the user's files for ``name: csv``.
    """

    name: Literal[DATASET_NAMES]  # the catalog's names
    root: str | None = None
    split: Literal["public", "full", "random"] = "public"
    normalize_features: bool = True
    url: str | None = None
    num_train_per_class: int = _num(20, ge=1)
    num_val: int = _num(500, ge=0)
    num_test: int = _num(1000, ge=1)
    num_nodes: int = _num(1000, ge=2)
    num_classes: int = _num(4, ge=2)
    avg_degree: float = _num(10.0, gt=0)
    homophily: float = _num(0.8, ge=0, le=1)
    num_features: int = _num(64, ge=1)
    noise: float = _num(0.1, ge=0)
    num_samples: int = _num(1000, ge=2)
    seed: int = _num(0, ge=0)
    edges: str | None = None  # name: csv — the user's files, relative to the config's folder
    features: str | None = None
    labels: str | None = None
    train_nodes: str | None = None
    val_nodes: str | None = None
    test_nodes: str | None = None
    directed: bool = False  # csv and OGB: keep edges one-way (GCN expects both ways)


@dataclass(frozen=True)
class ModelConfig:
    """Architecture: passed to the model constructors as plain arguments."""

    kind: Literal[MODEL_KINDS] = MODEL_KINDS[0]  # the catalog's first: a GCN
    hidden: int = _num(16, ge=1)
    layers: int = _num(2, ge=1)
    dropout: float = _num(0.5, ge=0, lt=1)
    activation: Literal["relu", "elu", "tanh", "leaky_relu"] = "relu"
    heads: int = _num(8, ge=1)
    output_heads: int = _num(1, ge=1)
    attn_dropout: float = _num(0.6, ge=0, lt=1)
    learn_edge_weight: bool = False
    normalize: bool = False
    head: Literal["softmax", "sigmoid"] = "softmax"
    keyed_dropout: bool = False  # masks hashed from node ids: the masks a partitioned run draws


@dataclass(frozen=True)
class OptimConfig:
    """Optimizer and its hyper-parameters (momentum/nesterov: SGD; betas: Adam, AdamW)."""

    name: Literal["sgd", "adam", "adamw"] = "adam"
    lr: float = _num(0.01, gt=0)
    weight_decay: float = _num(5e-4, ge=0)
    momentum: float = _num(0.9, ge=0, lt=1)
    nesterov: bool = False
    betas: tuple[float, float] = _num((0.9, 0.999), ge=0, lt=1)
    weight_decay_first_layer_only: bool = True


@dataclass(frozen=True)
class TrainConfig:
    """The loop: ``patience=None`` disables early stopping, ``batch_size=None`` is full batch."""

    epochs: int = _num(200, ge=1)
    patience: int | None = _num(100, ge=1)
    seed: int = _num(0, ge=0)
    runs: int = _num(1, ge=1)
    grad_clip_norm: float | None = _num(1.0, gt=0)
    loss: Literal["cross_entropy", "bce", "mse"] = "cross_entropy"
    batch_size: int | None = _num(None, ge=1)
    # full batch computed on the rows the loss and scores read, and their neighbourhoods
    # (run/field.py); "auto": when that is at most half the graph
    receptive_field: bool | Literal["auto"] = "auto"


@dataclass(frozen=True)
class SparseConfig:
    """A matrix stays sparse while its density (nnz / size) is <= ``sparsity_threshold``.
    Kernels run on ``threads`` cores (None: $MGSPARSE_NUM_THREADS, else every core allowed)."""

    sparsity_threshold: float = _num(0.1, ge=0, le=1)
    threads: int | None = _num(None, ge=1)


@dataclass(frozen=True)
class SamplerConfig:
    """Neighbour-sampled mini-batches (a graph model with ``train.batch_size`` set).

    ``fanouts``: in-neighbours drawn per target node, one entry per layer from the input
    layer up (-1: all of them); ``max_batch_nnz``: cap on the stored entries of a batch's
    blocks (batches are cut smaller to stay under it); ``eval_chunk_size``: rows per chunk
    of the exact layer-wise evaluation over the whole graph.
    """

    fanouts: tuple[int, ...] = _num((25, 10), ge=-1)
    max_batch_nnz: int | None = _num(None, ge=1)
    eval_chunk_size: int = _num(8192, ge=1)


@dataclass(frozen=True)
class MonitorConfig:
    """Live monitoring: tracemalloc on/off, the memory budget, table refresh period.

    ``memory_budget_mb``: "auto" is half the memory available when the run starts, null is no
    limit. Operands are placed within it, and a run that passes 80% of it falls back to sparse.
    """

    memory: bool = True
    memory_budget_mb: float | Literal["auto"] | None = _num("auto", gt=0)
    log_every: int = _num(10, ge=1)


SECTIONS: dict[str, type] = {
    "dataset": DatasetConfig, "model": ModelConfig, "optim": OptimConfig,
    "train": TrainConfig, "sparse": SparseConfig, "sampler": SamplerConfig,
    "monitor": MonitorConfig,
}


@dataclass(frozen=True)
class Config:
    """The whole resolved run configuration; ``source`` names where it came from."""

    dataset: DatasetConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sparse: SparseConfig = field(default_factory=SparseConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    source: str = field(default="<dict>", compare=False)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every section with every key resolved (JSON-ready; `config_from_dict` inverts it)."""
        return {name: {key: list(value) if isinstance(value, tuple) else value
                       for key, value in dataclasses.asdict(getattr(self, name)).items()}
                for name in SECTIONS}


# ---------------------------------------------------------------- building sections

def _unknown(kind: str, name: Any, options: Sequence[str], where: str,
             parent: str = "") -> ConfigError:
    """An unknown section or key, with the closest known name (or the list of them)."""
    if not isinstance(name, str):
        inside = f" in section {parent}" if parent else ""
        return ConfigError(f"{where}: {kind} names must be strings (got {show(name)}{inside})")
    dotted = f"{parent}.{name}" if parent else name
    hint = suggest(name, options) or f" (known: {', '.join(options)})"
    return ConfigError(f"{where}: unknown {kind} {dotted}{hint}")


def _build_section(cls: type, name: str, raw: Any, where: Where) -> Any:
    """Check a section's keys in file order and build its frozen dataclass."""
    if raw is None:  # `optim:` followed only by comments means "all defaults"
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where((name,))}: {name} must be a mapping of keys "
                          f"(got {show(raw)})")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in raw.items():
        path = (name, key)
        if key not in fields:
            raise _unknown("key", key, list(fields), where(path), name)
        try:
            values[key] = check_value(value, hints[key], fields[key].metadata, f"{name}.{key}")
        except ConfigError as err:
            raise ConfigError(f"{where(path)}: {err}") from None
    for key, spec in fields.items():
        if key not in values and spec.default is dataclasses.MISSING:
            options = ", ".join(typing.get_args(hints[key]))
            raise ConfigError(f"{where((name, key))}: {name}.{key} is required "
                              f"(one of {options})")
    return cls(**values)


def _check_combination(config: Config, where: Where) -> None:
    """Settings that are each valid but cannot work together."""
    data, model, train = config.dataset, config.model, config.train
    graphless = [kind for kind, facts in MODELS.items() if facts.operand is None]
    if is_points(data.name) and model.kind not in graphless:
        raise ConfigError(f"{where(('model', 'kind'))}: model.kind {model.kind!r} needs a "
                          f"graph, and dataset {data.name!r} has none; use kind: "
                          f"{' or '.join(graphless)}")
    files = DATASETS[data.name].source == "files"
    if files and data.edges is None:
        raise ConfigError(f"{where(('dataset', 'name'))}: dataset.name {data.name!r} reads "
                          f"your files: dataset.edges must name the edge list")
    named = [key for key in FILE_KEYS if getattr(data, key) is not None]
    if named and not files:
        raise ConfigError(f"{where(('dataset', named[0]))}: dataset.{named[0]} is read only "
                          f"for your own files (dataset.name: csv), not {data.name!r}")
    if is_points(data.name) and data.num_val + data.num_test >= data.num_samples:
        raise ConfigError(f"{where(('dataset', 'num_test'))}: dataset.num_val + "
                          f"dataset.num_test ({data.num_val + data.num_test}) leave no "
                          f"training samples out of dataset.num_samples ({data.num_samples})")
    fanouts = config.sampler.fanouts
    if any(k == 0 or k < -1 for k in fanouts):
        raise ConfigError(f"{where(('sampler', 'fanouts'))}: sampler.fanouts entries must be "
                          f">= 1 or -1 (all neighbours), got {list(fanouts)}")
    sampled = train.batch_size is not None and not is_points(data.name)
    if sampled and model.kind in graphless:
        raise ConfigError(f"{where(('train', 'batch_size'))}: train.batch_size on a graph "
                          f"samples neighbourhoods for a graph model; model.kind "
                          f"{model.kind!r} reads no graph (set batch_size: null)")
    if sampled and (model.learn_edge_weight or model.keyed_dropout):
        key = "learn_edge_weight" if model.learn_edge_weight else "keyed_dropout"
        raise ConfigError(f"{where(('model', key))}: model.{key} is for full-batch graph "
                          f"training, not sampled mini-batches (train.batch_size)")
    if sampled and len(fanouts) != model.layers:
        raise ConfigError(f"{where(('sampler', 'fanouts'))}: sampler.fanouts needs one entry per "
                          f"layer ({model.layers}), got {list(fanouts)}")
    if train.receptive_field is True and not is_points(data.name):
        _check_receptive_field(model, sampled, where)
    if (train.loss, model.head) in (("bce", "softmax"), ("cross_entropy", "sigmoid")):
        raise ConfigError(f"{where(('train', 'loss'))}: train.loss {train.loss!r} does not "
                          f"fit model.head {model.head!r} (bce goes with sigmoid, "
                          f"cross_entropy with softmax, mse with either)")


def no_receptive_field(model: ModelConfig, sampled: bool = False) -> str | None:
    """Why a run of this model cannot train on receptive fields (run/field.py), or None."""
    if MODELS[model.kind].operand is None:
        return f"model.kind {model.kind!r} reads no graph"
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


# ---------------------------------------------------------------- overrides

def _apply_override(data: dict, text: str, where: Where) -> None:
    """Apply one ``section.key=value`` option; the value is read as YAML (null, 1e-3, [a, b])."""
    dotted, sep, raw_value = text.partition("=")
    dotted = dotted.strip()
    origin = f"--set {text}"
    if not sep or dotted.count(".") != 1:
        raise ConfigError(f"{origin}: expected section.key=value, e.g. --set optim.lr=0.005")
    section, key = dotted.split(".")
    if section not in SECTIONS:
        raise _unknown("section", section, list(SECTIONS), origin)
    known = [f.name for f in dataclasses.fields(SECTIONS[section])]
    if key not in known:
        raise _unknown("key", key, known, origin, section)
    try:
        value = yaml.load(raw_value, Loader=Loader)
    except yaml.YAMLError as err:
        raise yaml_error(err, origin, with_line=False) from None
    if data.get(section) is None:
        data[section] = {}
    if isinstance(data[section], dict):  # otherwise building the section reports it
        data[section][key] = value
        where.overrides[(section, key)] = origin


# ---------------------------------------------------------------- public entry points

def _build(data: Any, where: Where, overrides: Sequence[str]) -> Config:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where(())}: top level must be a mapping of sections "
                          f"(got {show(data)})")
    data = {name: dict(body) if isinstance(body, Mapping) else body
            for name, body in data.items()}
    for text in overrides:
        _apply_override(data, text, where)
    for name in data:
        if name not in SECTIONS:
            raise _unknown("section", name, list(SECTIONS), where((name,)))
    ordered = list(data) + [name for name in SECTIONS if name not in data]
    built = {name: _build_section(SECTIONS[name], name, data.get(name), where)
             for name in ordered}
    config = Config(**built, source=where.source)
    _check_combination(config, where)
    return config


def config_from_dict(d: Mapping[str, Any], source: str = "<dict>",
                     overrides: Sequence[str] = ()) -> Config:
    """Validate an already-parsed mapping (e.g. ``Config.to_dict()`` read back from JSON)."""
    try:
        return _build(d, Where(source), overrides)
    except ConfigError as err:  # a key or value may hold a newline; the CLI shows one line
        raise ConfigError(" ".join(str(err).splitlines())) from None


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> Config:
    """Read, override (``["optim.lr=0.005", ...]``) and validate a YAML config file."""
    where = Where(str(path))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:  # a directory, no permission...
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    try:
        config = _build(parse_yaml(text, where), where, overrides)
    except ConfigError as err:  # a key or value may hold a newline; the CLI shows one line
        raise ConfigError(" ".join(str(err).splitlines())) from None
    return _files_from(config, Path(path).parent)


def _files_from(config: Config, folder: Path) -> Config:
    """The user's files named relative to the config's folder, made absolute once, so the
    resolved config saved beside a run finds them again from anywhere."""
    ds = config.dataset
    files = {key: str((folder / getattr(ds, key)).resolve()) for key in FILE_KEYS
             if getattr(ds, key) is not None}
    if not files:
        return config
    return dataclasses.replace(config, dataset=dataclasses.replace(ds, **files))
