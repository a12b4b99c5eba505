"""The schema of a run configuration: one frozen dataclass per YAML section, and `Config`.

Each field's annotation is its type (``Literal`` for a choice, ``X | None`` when null is
allowed, ``tuple[float, float]`` for a pair) and its metadata its range, so this one table
drives every value check (`mgsparse.config.check`). Every key has a default except
``dataset.name``. Layers and models never see these objects: the run layer passes their
fields on as plain arguments.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from mgsparse.catalog import DATASET_NAMES, MODEL_KINDS
from mgsparse.config.kg import KgConfig

FILE_KEYS = ("edges", "features", "labels", "train_nodes", "val_nodes", "test_nodes")
MOLECULE_KEYS = ("target", "smiles_column", "path")  # read for molecule sets only
TRIPLE_KEYS = ("train_triples", "valid_triples", "test_triples")  # name: triples — your files
MAX_DEPTH = 1024  # model.layers and model.k: see ModelConfig
BOUND_NAMES = ("ge", "gt", "le", "lt")  # >=, >, <=, <: `check.BOUNDS` gives their meaning


def _num(default: Any, **bounds: float) -> Any:
    """A dataclass field with an allowed interval: ``_num(0.5, ge=0, lt=1)`` is [0, 1)."""
    assert set(bounds) <= set(BOUND_NAMES), bounds
    return field(default=default, metadata=bounds)


# ---------------------------------------------------------------- sections

@dataclass(frozen=True)
class DatasetConfig:
    """Which graph (or point cloud) to load and how to split it.

    ``num_val``/``num_test`` are node counts for the random split and held-out sample
    counts for moons/circles/blobs (``num_val`` at least 1 where it is read: the validation
    rows choose the best epoch); the ``num_nodes``…``homophily`` keys shape the
    synthetic stochastic block model, ``noise``/``num_samples`` the point clouds;
    ``edges``…``test_nodes`` name the user's files for ``name: csv``; ``reorder`` numbers
    the nodes of one graph anew at load for cache locality (outputs keep the file's ids).
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
    train_triples: str | None = None  # name: triples — head<TAB>relation<TAB>tail files,
    valid_triples: str | None = None  # relative to the config's folder
    test_triples: str | None = None
    directed: bool = False  # csv and OGB: keep edges one-way (GCN expects both ways)
    # node order at load (data/reorder.py); metis needs pymetis (the distributed extra)
    reorder: Literal["none", "rcm", "degree", "metis"] = "none"
    # molecules (solubility, freesolv; name: molecules for your own file): the SDF property
    # or CSV column to predict (null: the set's own, SOL or expt), the CSV's SMILES column,
    # and your own .sdf or .csv file (relative to the config's folder)
    target: str | None = None
    smiles_column: str = "smiles"
    path: str | None = None


@dataclass(frozen=True)
class ModelConfig:
    """Architecture: passed to the model constructors as plain arguments."""

    kind: Literal[MODEL_KINDS] = MODEL_KINDS[0]  # the catalog's first: a GCN
    hidden: int = _num(16, ge=1)
    # depth and propagation steps are bounded: beyond ~1000 (deeper than any published GNN,
    # GCNII's 64, RevGNN's 1001) a typo would build or iterate for hours instead of failing
    layers: int = _num(2, ge=1, le=MAX_DEPTH)
    dropout: float = _num(0.5, ge=0, lt=1)
    activation: Literal["relu", "elu", "tanh", "leaky_relu"] = "relu"
    heads: int = _num(8, ge=1)
    output_heads: int = _num(1, ge=1)
    attn_dropout: float = _num(0.6, ge=0, lt=1)
    learn_edge_weight: bool = False
    normalize: bool = False
    train_eps: bool = False  # gin: learn ε (GIN-ε) instead of the fixed 0 (GIN-0)
    readout: Literal["sum", "mean", "max"] = "sum"  # graph classification: nodes -> graph
    head: Literal["softmax", "sigmoid"] = "softmax"  # sigmoid: point clouds only
    keyed_dropout: bool = False  # masks hashed from node ids: the masks a partitioned run draws
    residual: bool = False  # h + layer(h) where a layer keeps the width
    jk: Literal["none", "cat", "max", "sum"] = "none"  # jumping knowledge over every layer
    norm: Literal["none", "batch", "layer"] = "none"  # between layers, before the activation
    # APPNP, SGC: propagation steps (null: 10, 2); ChebNet: Chebyshev terms, >= 1 (null: 2)
    k: int | None = _num(None, ge=0, le=MAX_DEPTH)
    alpha: float = _num(0.1, ge=0, le=1)  # APPNP teleport, GCNII initial-residual weight
    # GCNII: λ of the identity mapping, β_l = log(λ/l + 1). Chen et al. use 0.5 to 1.5; at
    # most 10 (β_1 = log 11 ≈ 2.4), since a huge λ (1e308: β_1 = 709) overflows at once
    theta: float = _num(0.5, gt=0, le=10)


@dataclass(frozen=True)
class OptimConfig:
    """Optimizer and its hyper-parameters (momentum/nesterov: SGD; betas: Adam, AdamW), and
    the learning-rate schedule (`mgsparse.optim.schedules`)."""

    name: Literal["sgd", "adam", "adamw"] = "adam"
    lr: float = _num(0.01, gt=0)
    weight_decay: float = _num(5e-4, ge=0)
    momentum: float = _num(0.9, ge=0, lt=1)
    nesterov: bool = False
    betas: tuple[float, float] = _num((0.9, 0.999), ge=0, lt=1)
    weight_decay_first_layer_only: bool = True
    conv_weight_decay: float | None = _num(None, ge=0)  # gcnii: its convolutions' own decay
    # the learning rate per epoch: none (constant) | step: × gamma every step_size epochs |
    # cosine: linear warmup, then a half cosine to min_lr | plateau: × gamma after
    # plateau_patience epochs without a better selection metric, not below min_lr
    schedule: Literal["none", "step", "cosine", "plateau"] = "none"
    step_size: int = _num(50, ge=1)
    gamma: float = _num(0.5, gt=0, lt=1)
    warmup: int = _num(0, ge=0)
    min_lr: float = _num(0.0, ge=0)
    plateau_patience: int = _num(10, ge=0)


@dataclass(frozen=True)
class TrainConfig:
    """The loop: ``patience=None`` disables early stopping, ``batch_size=None`` is full batch.

    ``loss`` (with ``model.head``) is a point-cloud choice: graph tasks train with
    cross_entropy on a softmax head, and any other setting on a graph is a config error.
    """

    epochs: int = _num(200, ge=1)
    patience: int | None = _num(100, ge=1)
    seed: int = _num(0, ge=0)
    runs: int = _num(1, ge=1)
    grad_clip_norm: float | None = _num(1.0, gt=0)
    # molecules: mse, l1 or huber (δ = 1 on standardised targets) train a numeric target,
    # cross_entropy a class target
    loss: Literal["cross_entropy", "bce", "mse", "l1", "huber"] = "cross_entropy"
    batch_size: int | None = _num(None, ge=1)
    # full batch computed on the rows the loss and scores read, and their neighbourhoods
    # (run/field.py); "auto": when that is at most half the graph
    receptive_field: bool | Literal["auto"] = "auto"
    # full batch: once two steps (and two scorings) run the same ops, run them from a tape,
    # without the model's Python between them (run/replay.py); the same numbers either way
    replay: bool = True
    # a full checkpoint (for `mgsparse train --resume`) every N epochs; null: only when a run
    # is stopped (Ctrl-C, SIGTERM). Written with --out only.
    checkpoint_every: int | None = _num(None, ge=1)
    # the validation metric that picks the best epoch: loss, acc, or any the task declares
    # (f1, auc with train.metrics); null: the task's own (classification: loss)
    select: str | None = None
    min_delta: float = _num(0.0, ge=0)  # a better epoch must beat the best by more than this
    metrics: tuple[Literal["f1", "auc"], ...] | None = None  # node classification: extra scores
    # graph classification: stratified k-fold cross-validation, one run per fold (null: a
    # stratified 80/10/10 split)
    folds: int | None = _num(None, ge=2)


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


@dataclass(frozen=True)
class LinkConfig:
    """Link prediction (``task: link``, `mgsparse.run.tasks.links`): ``val``/``test`` are the
    fractions of the graph's edges held out (Kipf & Welling's 5% / 10%), each with as many
    fixed non-edges; ``neg_ratio`` sampled non-edges per training edge, drawn anew every
    epoch (``negatives: all`` scores every pair instead, Kipf's loss); ``seed`` fixes the split; ``undirected`` holds each edge out in both directions.
    The encoder is the model section's, ``latent`` wide; ``decoder`` scores a pair (inner
    product or an MLP on z_u ⊙ z_v); ``variational`` makes it a VGAE; ``hits_k`` adds Hits@K.
    """

    val: float = _num(0.05, gt=0, lt=1)
    test: float = _num(0.10, gt=0, lt=1)
    neg_ratio: float = _num(1.0, gt=0)
    negatives: Literal["sampled", "all"] = "sampled"
    seed: int = _num(0, ge=0)
    undirected: bool = True
    latent: int = _num(16, ge=1)
    decoder: Literal["inner", "mlp"] = "inner"
    variational: bool = False
    hits_k: int | None = _num(None, ge=1)


SECTIONS: dict[str, type] = {
    "dataset": DatasetConfig, "model": ModelConfig, "optim": OptimConfig,
    "train": TrainConfig, "sparse": SparseConfig, "sampler": SamplerConfig,
    "monitor": MonitorConfig, "link": LinkConfig, "kg": KgConfig,
}
TASKS = ("node", "link")  # the top-level `task:` key: what a graph run predicts


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
    link: LinkConfig = field(default_factory=LinkConfig)
    kg: KgConfig = field(default_factory=KgConfig)
    task: Literal[TASKS] = "node"  # node labels (the default) or held-out edges
    source: str = field(default="<dict>", compare=False)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The task and every section with every key resolved (JSON-ready;
        `config_from_dict` inverts it)."""
        return {"task": self.task} | {name: {key: list(value) if isinstance(value, tuple) else value
                       for key, value in dataclasses.asdict(getattr(self, name)).items()}
                for name in SECTIONS}
