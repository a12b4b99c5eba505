"""Checking a config: each value against its type and range, and the rules across sections.
A bad config is one ConfigError line naming the key and where it was written."""

from __future__ import annotations

import pytest

from mgsparse.config import ModelConfig, config_from_dict, load_config
from mgsparse.errors import ConfigError
from tests.config import HEADER, config_error, write
from tests.conftest import one_line_error

# ---------------------------------------------------------------- the table of bad configs

# (YAML text, line the message must name, text the message must contain)
BAD_CONFIGS = [
    pytest.param(HEADER + "optim:\n  lr: -0.01\n", 5,
                 "optim.lr must be > 0 (got -0.01)", id="lr-negative"),
    pytest.param(HEADER + "optim:\n  name: adam\n  lr: 0\n", 6,
                 "optim.lr must be > 0 (got 0)", id="lr-zero"),
    pytest.param(HEADER + "optim:\n  lr: fast\n", 5,
                 "optim.lr must be a number (got 'fast')", id="lr-string"),
    pytest.param(HEADER + "optim:\n  weight_decay: -5e-4\n", 5,
                 "optim.weight_decay must be >= 0 (got -0.0005)", id="weight-decay-negative"),
    pytest.param(HEADER + "optim:\n  momentum: 1.0\n", 5,
                 "optim.momentum must be in [0, 1) (got 1.0)", id="momentum-one"),
    pytest.param(HEADER + "optim:\n  betas: [0.9]\n", 5,
                 "optim.betas must be a list of 2 numbers (got a list)", id="betas-length"),
    pytest.param(HEADER + "optim:\n  betas: [0.9, 1.5]\n", 5,
                 "optim.betas[1] must be in [0, 1) (got 1.5)", id="betas-range"),
    pytest.param(HEADER + "optim:\n  name: adma\n", 5,
                 "optim.name must be one of 'sgd', 'adam', 'adamw' (got 'adma'); "
                 "did you mean 'adam'?", id="optim-name-typo"),
    pytest.param(HEADER + "optim:\n  lrr: 0.1\n", 5,
                 "unknown key optim.lrr; did you mean 'lr'?", id="unknown-key-typo"),
    pytest.param(HEADER + "\noptimizer:\n  lr: 0.1\n", 5,
                 "unknown section optimizer; did you mean 'optim'?", id="unknown-section"),
    pytest.param(HEADER + "train:\n  epochs: true\n", 5,
                 "train.epochs must be an integer (got true)", id="epochs-bool"),
    pytest.param(HEADER + "train:\n  epochs: 0\n", 5,
                 "train.epochs must be >= 1 (got 0)", id="epochs-zero"),
    pytest.param(HEADER + "train:\n  seed: 1\n  epochs: 1.5\n", 6,
                 "train.epochs must be an integer (got 1.5)", id="epochs-fraction"),
    pytest.param(HEADER + "train:\n  patience: 0\n", 5,
                 "train.patience must be >= 1 or null (got 0)", id="patience-zero"),
    pytest.param(HEADER + "train:\n  grad_clip_norm: 0\n", 5,
                 "train.grad_clip_norm must be > 0 or null (got 0)", id="clip-zero"),
    pytest.param(HEADER + "train:\n  loss: hinge\n", 5,
                 "train.loss must be one of 'cross_entropy', 'bce', 'mse', 'l1', 'huber' (got 'hinge')",
                 id="loss-unknown"),
    pytest.param(HEADER + "sampler:\n  fanouts: [0, 5]\n", 5,
                 "sampler.fanouts entries must be >= 1 or -1 (all neighbours), got [0, 5]",
                 id="fanout-zero"),
    pytest.param(HEADER + "train:\n  batch_size: 32\nsampler:\n  fanouts: [10]\n", 7,
                 "sampler.fanouts needs one entry per layer (2), got [10]",
                 id="fanouts-per-layer"),
    pytest.param("dataset:\n  name: moons\n  num_val: 100\n  num_test: 100\nmodel:\n"
                 "  head: sigmoid\n  kind: mlp\n", 1,
                 "train.loss 'cross_entropy' does not fit model.head 'sigmoid'",
                 id="loss-head-mismatch"),
    pytest.param(HEADER + "model:\n  head: sigmoid\n  kind: mlp\n", 5,
                 "model.head 'sigmoid' is for point clouds: graph tasks train with "
                 "cross_entropy on a softmax head (dataset 'cora'; set head: softmax)",
                 id="graph-head-sigmoid"),
    pytest.param(HEADER + "train:\n  loss: mse\n", 5,
                 "train.loss 'mse' is for point clouds: graph tasks train with cross_entropy "
                 "(dataset 'cora'; set loss: cross_entropy)", id="graph-loss-mse"),
    pytest.param(HEADER + "  split: random\n  num_val: 0\n", 5,
                 "dataset.num_val must be >= 1 with dataset.split: random (got 0): the "
                 "validation nodes choose the best epoch", id="random-split-no-validation"),
    pytest.param("dataset:\n  name: moons\n  num_val: 0\nmodel:\n  kind: mlp\n", 3,
                 "dataset.num_val must be >= 1 for point cloud 'moons' (got 0): the "
                 "validation points choose the best epoch", id="moons-no-validation"),
    pytest.param(HEADER + "model:\n  dropout: 1.0\n", 5,
                 "model.dropout must be in [0, 1) (got 1.0)", id="dropout-one"),
    pytest.param(HEADER + "model:\n  dropout: -0.1\n", 5,
                 "model.dropout must be in [0, 1) (got -0.1)", id="dropout-negative"),
    pytest.param(HEADER + "model:\n  hidden: '16'\n", 5,
                 "model.hidden must be an integer (got '16')", id="hidden-quoted"),
    pytest.param(HEADER + "model:\n  hiden: 16\n", 5,
                 "unknown key model.hiden; did you mean 'hidden'?", id="hidden-typo"),
    pytest.param(HEADER + "model:\n  kind: gccn\n", 5,
                 "(got 'gccn'); did you mean 'gcn'?", id="kind-typo"),
    pytest.param(HEADER + "model: 16\n", 4,
                 "model must be a mapping of keys (got 16)", id="section-not-mapping"),
    pytest.param("# no name\n\ndataset:\n  root: data\n", 3,
                 "dataset.name is required (one of cora, citeseer, pubmed", id="name-missing"),
    pytest.param("model:\n  hidden: 16\n", 1,
                 "dataset.name is required", id="dataset-section-missing"),
    pytest.param("dataset:\n  name: imagenet\n", 2,
                 "dataset.name must be one of 'cora'", id="name-unknown"),
    pytest.param("dataset:\n  name: Cora\n", 2,
                 "(got 'Cora'); did you mean 'cora'?", id="name-capitalised"),
    pytest.param(HEADER + "  homophily: 1.2\n", 4,
                 "dataset.homophily must be in [0, 1] (got 1.2)", id="homophily-range"),
    pytest.param(HEADER + "  normalize_features: 1\n", 4,
                 "dataset.normalize_features must be true or false (got 1)", id="bool-as-int"),
    pytest.param(HEADER + "  root: ''\n", 4,
                 "dataset.root must be a non-empty string or null (got '')", id="root-empty"),
    pytest.param(HEADER + "  name: citeseer\n", 4,
                 "duplicate key dataset.name (first set on line 3)", id="duplicate-key"),
    pytest.param("dataset:\n  name: moons\n  num_val: 100\n  num_test: 100\n", 1,
                 "model.kind 'gcn' needs a graph", id="moons-needs-mlp"),
    pytest.param("dataset:\n  name: moons\n  num_samples: 100\nmodel:\n  kind: mlp\n", 1,
                 "dataset.num_val + dataset.num_test (1500) leave no training samples",
                 id="moons-split-too-big"),
    pytest.param(HEADER + "sparse:\n  sparsity_threshold: 1.5\n", 5,
                 "sparse.sparsity_threshold must be in [0, 1] (got 1.5)", id="threshold-range"),
    pytest.param(HEADER + "monitor:\n  memory: yes please\n", 5,
                 "monitor.memory must be true or false (got 'yes please')", id="memory-string"),
    pytest.param(HEADER + "monitor:\n  memory_budget_mb: .inf\n", 5,
                 "monitor.memory_budget_mb must be a finite number or 'auto' or null (got .inf)", id="budget-inf"),
    pytest.param(HEADER + "monitor:\n  log_every: 0\n", 5,
                 "monitor.log_every must be >= 1 (got 0)", id="log-every-zero"),
]


@pytest.mark.parametrize("text, line, expected", BAD_CONFIGS)
def test_bad_config_names_key_and_line(tmp_path, text, line, expected):
    path = write(tmp_path, text)
    message = str(config_error(path))
    assert message.startswith(f"{path}:{line}: "), message
    assert expected in message


def test_bad_config_table_is_large():
    assert len(BAD_CONFIGS) >= 20

def test_unknown_key_without_close_match_lists_the_known_keys(tmp_path):
    path = write(tmp_path, HEADER + "sparse:\n  zzz: 1\n")
    message = str(config_error(path))
    assert message == f"{path}:5: unknown key sparse.zzz (known: sparsity_threshold, threads)"


def test_null_is_allowed_only_where_documented(tmp_path):
    config = load_config(write(tmp_path, HEADER + "train:\n  patience: null\n  "
                                         "grad_clip_norm: null\n", "ok.yaml"))
    assert (config.train.patience, config.train.grad_clip_norm) == (None, None)
    message = str(config_error(write(tmp_path, HEADER + "train:\n  epochs: null\n")))
    assert message.endswith(":5: train.epochs must be an integer (got null)")



@pytest.mark.parametrize("override, expected", [
    ("optim.lr=-1", "--set optim.lr=-1: optim.lr must be > 0 (got -1)"),
    ("optim.lr=abc", "--set optim.lr=abc: optim.lr must be a number (got 'abc')"),
    ("optim.lrr=0.1", "--set optim.lrr=0.1: unknown key optim.lrr; did you mean 'lr'?"),
    ("optimm.lr=0.1", "--set optimm.lr=0.1: unknown section optimm; did you mean 'optim'?"),
    ("lr=0.1", "--set lr=0.1: expected section.key=value, e.g. --set optim.lr=0.005"),
    ("optim.lr", "--set optim.lr: expected section.key=value, e.g. --set optim.lr=0.005"),
    ("optim.betas=[0.9", "--set optim.betas=[0.9: invalid YAML: expected ',' or ']'"),
    ("train.epochs=", "--set train.epochs=: train.epochs must be an integer (got null)"),
])
def test_bad_override_names_the_option(tmp_path, override, expected):
    message = str(config_error(write(tmp_path, HEADER, "ok.yaml"), (override,)))
    assert message.startswith(expected), message


# ---------------------------------------------------------------- what a run reads

KARATE = "dataset:\n  name: karate\n"


@pytest.mark.parametrize("overrides, option", [
    (("train.loss=mse",), "train.loss=mse"),
    (("model.head=sigmoid", "train.loss=bce"), "train.loss=bce"),
    (("model.head=sigmoid", "train.loss=mse"), "train.loss=mse"),
    (("model.head=sigmoid", "train.loss=mse", "model.kind=mlp"), "train.loss=mse"),
    (("model.head=sigmoid", "train.loss=mse", "train.batch_size=8", "sampler.fanouts=[5, 5]"),
     "train.loss=mse"),
    (("model.head=sigmoid",), "model.head=sigmoid"),
], ids=["mse", "sigmoid-bce", "sigmoid-mse", "mlp", "sampled", "sigmoid"])
def test_graph_tasks_refuse_a_loss_or_head_they_would_not_apply(tmp_path, overrides, option):
    """Every graph task (full batch, field, sampled, MLP on the features) trains softmax
    cross-entropy and reads neither key: another setting is refused, not recorded as run."""
    message = str(config_error(write(tmp_path, KARATE, "ok.yaml"), overrides))
    key = option.partition("=")[0]
    assert message.startswith(f"--set {option}: {key} "), message
    assert "is for point clouds: graph tasks train with cross_entropy" in message


def test_point_clouds_keep_their_losses_and_heads():
    for loss, head in (("bce", "sigmoid"), ("mse", "sigmoid"), ("mse", "softmax"),
                       ("cross_entropy", "softmax")):
        config = config_from_dict({"dataset": {"name": "moons", "num_val": 100, "num_test": 100},
                                   "model": {"kind": "mlp", "head": head},
                                   "train": {"loss": loss}})
        assert (config.train.loss, config.model.head) == (loss, head)


def test_num_val_zero_is_refused_only_where_it_is_read(tmp_path):
    for split in ("public", "full"):  # the dataset's own split: num_val is not read
        config = config_from_dict({"dataset": {"name": "karate", "split": split, "num_val": 0}})
        assert config.dataset.num_val == 0
    for name in ("karate", "synthetic", "cora"):
        with pytest.raises(ConfigError, match=r"^<dict>: dataset.num_val must be >= 1 with "
                                              r"dataset.split: random \(got 0\)"):
            config_from_dict({"dataset": {"name": name, "split": "random", "num_val": 0}})
    for name in ("moons", "circles", "blobs"):
        with pytest.raises(ConfigError, match=f"for point cloud '{name}' \\(got 0\\)"):
            config_from_dict({"dataset": {"name": name, "num_val": 0},
                              "model": {"kind": "mlp"}})
    config = load_config(write(tmp_path, KARATE + "  split: random\n  num_val: 1\n", "ok.yaml"))
    assert config.dataset.num_val == 1


@pytest.mark.parametrize("text, needle", [
    (KARATE + "  split: random\n  num_train_per_class: 2\n  num_val: 0\n  num_test: 10\n",
     ":5: dataset.num_val must be >= 1"),
    (KARATE + "model:\n  head: sigmoid\ntrain:\n  loss: bce\n", ":6: train.loss 'bce'"),
], ids=["num-val-zero", "graph-bce"])
def test_the_cli_refuses_them_before_training_with_exit_2(cli, tmp_path, text, needle):
    path = write(tmp_path, text)
    out = tmp_path / "out"
    result = cli("train", path, "--epochs", 2, "--out", out)
    line = one_line_error(result, 2, f"{path}{needle}")
    assert "graph tasks train with cross_entropy" in line or "validation nodes" in line
    assert not (out / "metrics.json").exists()



@pytest.mark.parametrize("overrides, message", [
    (("optim.schedule=cosin",), ("--set optim.schedule=cosin: optim.schedule must be one of "
     "'none', 'step', 'cosine', 'plateau' (got 'cosin'); did you mean 'cosine'?")),
    (("optim.schedule=cosine", "optim.warmup=300"), ("--set optim.warmup=300: optim.warmup "
     "(300 epochs) is longer than train.epochs (200)")),
    (("optim.warmup=5",), ("--set optim.warmup=5: optim.warmup is read by schedule: cosine "
     "only (schedule is 'none')")),
    (("optim.schedule=plateau", "optim.min_lr=0.01"), ("--set optim.min_lr=0.01: optim.min_lr "
     "(0.01) must be below optim.lr (0.01), the rate the plateau schedule lowers")),
    (("optim.gamma=1",), "--set optim.gamma=1: optim.gamma must be in (0, 1) (got 1)"),
    (("model.kind=appnp", "train.receptive_field=true"), ("--set train.receptive_field=true: "
     "train.receptive_field: true cannot apply: model.kind 'appnp' propagates over the whole "
     "graph (no block form) (use auto or false)")),
    (("model.kind=gcnii", "train.batch_size=8"), ("--set train.batch_size=8: train.batch_size "
     "samples blocks for each layer; model.kind 'gcnii' propagates over the whole graph (no "
     "block form; set batch_size: null)")),
    (("model.k=-1",), "--set model.k=-1: model.k must be in [0, 1024] or null (got -1)"),
    (("model.alpha=1.5",), "--set model.alpha=1.5: model.alpha must be in [0, 1] (got 1.5)"),
    (("model.norm=batch", "train.batch_size=8", "sampler.fanouts=[5, 5]"), ("--set "
     "model.norm=batch: model.norm is for full-batch training (receptive fields included), "
     "not sampled mini-batches: their layer-wise evaluation runs the plain stack")),
    (("model.jk=mean",), ("--set model.jk=mean: model.jk must be one of 'none', 'cat', 'max', "
     "'sum' (got 'mean')")),
], ids=["unknown-schedule", "warmup-past-epochs", "warmup-without-cosine", "floor-above-lr",
        "gamma-one", "appnp-field", "gcnii-sampled", "negative-k", "alpha", "norm-sampled",
        "unknown-jk"])
def test_schedules_and_propagation_models_refuse_bad_settings(tmp_path, overrides, message):
    assert str(config_error(write(tmp_path, KARATE, "ok.yaml"), overrides)) == message


def test_schedule_and_propagation_keys_reach_the_sections():
    config = config_from_dict({"dataset": {"name": "cora"},
                               "model": {"kind": "appnp", "k": 3, "alpha": 0.2},
                               "optim": {"schedule": "cosine", "warmup": 10, "min_lr": 1e-4},
                               "train": {"receptive_field": "auto"}})
    assert (config.model.k, config.model.alpha) == (3, 0.2)
    deep = config_from_dict({"dataset": {"name": "cora"},
                             "model": {"kind": "gcnii", "alpha": 0.2, "theta": 1.0}})
    assert (deep.model.alpha, deep.model.theta) == (0.2, 1.0)
    assert (config.optim.schedule, config.optim.warmup, config.optim.min_lr) == ("cosine", 10,
                                                                                 1e-4)
    assert ModelConfig().k is None  # null: each model's own K (APPNP 10, SGC 2)


@pytest.mark.parametrize("kind", ["gcn", "gat", "sage", "gin", "mlp"])
def test_stack_options_reach_the_model(kind):
    import numpy as np

    from mgsparse.run.build import build_model

    config = config_from_dict({"dataset": {"name": "karate"},
                               "model": {"kind": kind, "residual": True, "jk": "sum",
                                         "norm": "layer", "layers": 3}})
    model = build_model(config.model, 5, 2, np.random.default_rng(0), edge_index=None)
    assert (model.residual, model.jk, len(model.norms)) == (True, "sum", 3)
    assert model.jk_linear.out_features == 2


@pytest.mark.parametrize("overrides, message", [
    (("model.kind=gin", "model.k=3"), ("--set model.k=3: model.k is read by model.kind appnp, "
     "sgc, cheb only (model.kind is 'gin'); remove it or set it back to null")),
    (("model.kind=sgc", "model.heads=4"), ("--set model.heads=4: model.heads is read by "
     "model.kind gat, gat_edge only (model.kind is 'sgc'); remove it or set it back to 8")),
    (("model.kind=appnp", "model.residual=true"), ("--set model.residual=true: model.residual "
     "is read by model.kind gcn, gat, sage, gin, mlp only (model.kind is 'appnp'); remove it "
     "or set it back to false")),
    (("optim.step_size=10",), ("--set optim.step_size=10: optim.step_size is read by "
     "optim.schedule step only (optim.schedule is 'none'); remove it or set it back to 50")),
    (("optim.schedule=cosine", "optim.plateau_patience=3"), ("--set optim.plateau_patience=3: "
     "optim.plateau_patience is read by optim.schedule plateau only (optim.schedule is "
     "'cosine'); remove it or set it back to 10")),
], ids=["k-on-gin", "heads-on-sgc", "residual-on-appnp", "step-size-unscheduled",
        "plateau-key-on-cosine"])
def test_a_key_the_chosen_kind_never_reads_is_refused(tmp_path, overrides, message):
    """These trained as if unset while metrics.json recorded them; a key left at its default
    (a shipped config listing heads: 8 for a GCN) still loads."""
    assert str(config_error(write(tmp_path, KARATE, "ok.yaml"), overrides)) == message
    assert config_from_dict({"dataset": {"name": "karate"},
                             "model": {"kind": "gcn", "heads": 8, "k": None}}).model.heads == 8
