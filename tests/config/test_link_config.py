"""The `task:` key and the `link` section: defaults, `--set task=link`, the values each key takes,
the rules across sections, each error one line pointing at the key's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from mgsparse.config import TASKS, Config, LinkConfig, config_from_dict, load_config
from mgsparse.errors import ConfigError


def test_node_classification_is_the_default_and_link_the_other_task():
    config = config_from_dict({"dataset": {"name": "karate"}})
    assert TASKS == ("node", "link") and config.task == "node"
    assert config.link == LinkConfig(val=0.05, test=0.10, neg_ratio=1.0, negatives="sampled",
                                     seed=0, undirected=True, latent=16, decoder="inner",
                                     variational=False, hits_k=None)


def test_the_task_round_trips_and_is_set_from_the_command_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("dataset:\n  name: karate\n")
    config = load_config(path, ["task=link", "link.hits_k=20", "link.decoder=mlp"])
    assert (config.task, config.link.hits_k, config.link.decoder) == ("link", 20, "mlp")
    again = config_from_dict(config.to_dict())
    assert isinstance(again, Config) and again == config and again.to_dict()["task"] == "link"


@pytest.mark.parametrize("body, message", [
    ("task: edges\n", "c.yaml:1: task must be one of 'node', 'link' (got 'edges')"),
    ("task: link\nlink:\n  val: 0.6\n  test: 0.4\n",
     ("c.yaml:4: link.val + link.test must be < 1 (got 0.6 + 0.4): no edge would be left to "
     "train on")),
    ("task: link\nlink:\n  neg_ratio: -1\n", "c.yaml:3: link.neg_ratio must be > 0 (got -1)"),
    ("task: link\nlink:\n  val: 0\n", "c.yaml:3: link.val must be in (0, 1) (got 0)"),
    ("task: link\nlink:\n  negatives: all\n  decoder: mlp\n",
     ("c.yaml:3: link.negatives: all scores every pair as Z·Zᵀ, the inner-product decoder "
     "(set link.decoder: inner)")),
    ("task: link\nlink:\n  hits_k: 0\n", "c.yaml:3: link.hits_k must be >= 1 or null (got 0)"),
    ("task: link\nlink:\n  variational: true\nmodel:\n  layers: 1\n",
     ("c.yaml:5: link.variational needs model.layers >= 2 (a body, then the μ and log σ "
     "layers), got 1")),
])
def test_bad_link_settings_name_the_key_and_its_line(tmp_path, body, message):
    path = tmp_path / "c.yaml"
    path.write_text(body + "dataset:\n  name: karate\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{tmp_path / message}"


def test_a_link_task_on_a_set_of_graphs_is_refused():
    with pytest.raises(ConfigError, match="task: link predicts the edges of one graph; dataset "
                                          "'mutag' is not one"):
        config_from_dict({"task": "link", "dataset": {"name": "mutag"}})


@pytest.mark.parametrize("name, variational", [("cora-gae", False), ("cora-vgae", True),
                                                ("citeseer-gae", False)])
def test_the_shipped_auto_encoders_are_kipfs_recipe(name, variational):
    """Hidden 32, latent 16, Adam lr 0.01, 200 epochs, no dropout or decay, the features used
    as they are, every pair scored (their code's loss), 5% / 10% held out."""
    c = load_config(Path(__file__).parents[2] / "configs" / f"{name}.yaml")
    assert c.task == "link" and c.link.variational is variational
    assert (c.model.kind, c.model.layers, c.model.hidden, c.link.latent) == ("gcn", 2, 32, 16)
    assert (c.optim.name, c.optim.lr, c.optim.weight_decay, c.model.dropout) == (
        "adam", 0.01, 0.0, 0.0)
    assert (c.train.epochs, c.train.grad_clip_norm, c.dataset.normalize_features) == (
        200, None, False)
    assert (c.link.val, c.link.test, c.link.negatives, c.link.decoder) == (
        0.05, 0.10, "all", "inner")
