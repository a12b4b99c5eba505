"""`build_model` and `build_optimizer`: the model kind the catalog names, built from plain
arguments; the GCN recipe's weight decay on the first layer only."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mgsparse import nn
from mgsparse.catalog import MODELS, NODE_MODEL_KINDS
from mgsparse.errors import ConfigError
from mgsparse.optim import SGD, Adam, AdamW
from mgsparse.run.build import build_model, build_optimizer, first_layer_parameters
from tests.conftest import make_config


@pytest.mark.parametrize("kind", sorted(NODE_MODEL_KINDS))
def test_every_model_kind_builds_its_catalog_class(kind):
    config = make_config(model={"kind": kind, "hidden": 8})
    model = build_model(config.model, 5, 3, np.random.default_rng(0))
    assert type(model) is getattr(nn, MODELS[kind].builder)


def test_the_same_generator_state_gives_the_same_weights():
    config = make_config()
    a = build_model(config.model, 5, 3, np.random.default_rng(4)).state_dict()
    b = build_model(config.model, 5, 3, np.random.default_rng(4)).state_dict()
    c = build_model(config.model, 5, 3, np.random.default_rng(5)).state_dict()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def test_sizes_come_from_the_arguments():
    config = make_config(model={"hidden": 8})
    model = build_model(config.model, 5, 3, np.random.default_rng(0))
    assert model.convs[0].weight.shape == (5, 8) and model.convs[-1].weight.shape == (8, 3)


def test_a_gcn_learning_edge_weights_keeps_the_edge_list():
    edge_index = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])
    config = make_config(model={"learn_edge_weight": True})
    model = build_model(config.model, 4, 2, np.random.default_rng(0), edge_index=edge_index)
    names = [name for name, _ in model.named_parameters()]
    assert any("edge" in name for name in names), names


def test_weight_decay_applies_to_the_first_layer_only():
    config = make_config(model={"hidden": 4})
    model = build_model(config.model, 34, 2, np.random.default_rng(0))
    opt = build_optimizer(config.optim, model)
    first = {id(p) for p in first_layer_parameters(model)}
    assert first == {id(model.convs[0].weight), id(model.convs[0].bias)}
    decays = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert set(decays) == {id(p) for p in model.parameters()}
    assert all(decays[i] == 5e-4 for i in first)
    assert all(d == 0 for i, d in decays.items() if i not in first)


def test_weight_decay_everywhere_when_not_first_layer_only():
    config = make_config(optim={"weight_decay": 0.01, "weight_decay_first_layer_only": False})
    model = build_model(config.model, 34, 2, np.random.default_rng(0))
    opt = build_optimizer(config.optim, model)
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["weight_decay"] == 0.01


def test_gcnii_decays_its_convolutions_apart():
    """The paper's groups: 0.01 on the convolutions, weight_decay on the two Linear layers."""
    config = make_config(model={"kind": "gcnii", "hidden": 8, "layers": 4},
                         optim={"weight_decay": 5e-4, "conv_weight_decay": 0.01,
                                "weight_decay_first_layer_only": False})
    model = build_model(config.model, 34, 2, np.random.default_rng(0))
    decays = {id(p): g["weight_decay"] for g in build_optimizer(config.optim, model).param_groups
              for p in g["params"]}
    assert set(decays) == {id(p) for p in model.parameters()}
    assert {decays[id(c.weight)] for c in model.convs} == {0.01}
    assert {decays[id(p)] for p in model.linears.parameters()} == {5e-4}


@pytest.mark.parametrize("model, optim, needle", [
    ({"kind": "gcn"}, {"weight_decay_first_layer_only": False},
     "optim.conv_weight_decay: GCN does not separate its convolutions from its dense layers"),
    ({"kind": "gcnii"}, {"weight_decay_first_layer_only": True},
     "optim.conv_weight_decay and optim.weight_decay_first_layer_only: true both choose"),
])
def test_conv_weight_decay_it_cannot_honour_is_refused(model, optim, needle):
    config = make_config(model=model, optim={"conv_weight_decay": 0.01, **optim})
    built = build_model(config.model, 34, 2, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        build_optimizer(config.optim, built)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)


@pytest.mark.parametrize("name, cls", [("sgd", SGD), ("adam", Adam), ("adamw", AdamW)])
def test_the_optimizer_section_names_the_class(name, cls):
    config = make_config(optim={"name": name, "lr": 0.03})
    model = build_model(config.model, 34, 2, np.random.default_rng(0))
    opt = build_optimizer(config.optim, model)
    assert type(opt) is cls
    assert all(g["lr"] == 0.03 for g in opt.param_groups)


@pytest.mark.parametrize("kind, key", [("gcn", "hidden"), ("gat", "heads")])
def test_parameters_past_the_memory_are_one_line_naming_the_sizes(cli, tmp_path, kind, key):
    """A hidden width or head count of 10^10 was a MemoryError traceback from glorot_; it is
    one line naming the model's sizes, exit 1 (a run that cannot fit, as an over-budget one)."""
    from tests.conftest import CONFIGS, one_line_error

    result = cli("train", CONFIGS / "karate.yaml", "--quiet", "--epochs", "1", "--set",
                 f"model.kind={kind}", "--set", f"model.{key}=10000000000")
    one_line_error(result, 1, f"model.kind '{kind}': its parameters do not fit in memory",
                   f"model.{key}=10000000000", "TiB")
