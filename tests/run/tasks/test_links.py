"""Link prediction as a task (`task: link`): chosen by `make_task`, the encoder's operand built
from the training edges only (the leak test on Â itself), the declared scores, the same seed
giving the same run bit for bit, and a model that learns."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.config import config_from_dict
from mgsparse.data.links import pair_keys
from mgsparse.nn.gae import GAE, VGAE
from mgsparse.run import fit, make_task
from mgsparse.run.tasks.links import LinkTask, bce_logits, link_metrics
from mgsparse.sparse import SparseTensor


def link_config(model=None, link=None, train=None, dataset=None):
    """A small link-prediction run on a 300-node SBM of 6 tight communities: GAE on a GCN,
    Kipf's widths halved."""
    raw = {"task": "link",
           "dataset": {"name": "synthetic", "num_nodes": 300, "num_classes": 6,
                       "homophily": 0.95, "avg_degree": 8.0, "num_features": 16, "seed": 1,
                       **(dataset or {})},
           "model": {"hidden": 16, "dropout": 0.0, **(model or {})},
           "link": {"latent": 8, **(link or {})},
           "optim": {"weight_decay": 0.0},
           "train": {"epochs": 40, "patience": None, "grad_clip_norm": None, **(train or {})},
           "monitor": {"memory": False}}
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def task():
    return make_task(link_config())


def test_make_task_picks_the_link_task_and_its_declared_scores(task):
    assert isinstance(task, LinkTask)
    assert task.metrics.names == ("val_loss", "val_auc", "val_ap", "test_auc", "test_ap")
    assert task.metrics.select == "val_auc" and task.metrics.metric("val_auc").higher_is_better
    assert task.metrics.summary[:4] == ("test_auc_mean", "test_auc_std", "test_ap_mean",
                                        "test_ap_std")
    assert isinstance(task.build_model(np.random.default_rng(0)), GAE)
    assert task.placement["held-out edges"].startswith(
        f"{task.split.val_pos.shape[1]} val + {task.split.test_pos.shape[1]} test")


def test_hits_at_k_is_declared_when_asked_for():
    assert link_metrics(20).names == ("val_loss", "val_auc", "val_ap", "val_hits20",
                                      "test_auc", "test_ap", "test_hits20")


def test_no_held_out_edge_reaches_the_normalised_adjacency_the_encoder_reads(task):
    """The leak test on the operand itself: Â (D^-1/2 (A + I) D^-1/2 of the training graph)
    has no entry at a validation or test edge, in either direction, and holds exactly the
    training edges and the self loops."""
    adj, n = task.placed.operand, task.placed.num_nodes
    assert isinstance(adj, SparseTensor)
    dense = adj.to_dense() if hasattr(adj, "to_dense") else adj.to_tensor().data
    for held in (task.split.val_pos, task.split.test_pos):
        assert not dense[held[0], held[1]].any() and not dense[held[1], held[0]].any()
    rows, cols = np.nonzero(dense)
    stored = set(pair_keys(np.stack([cols, rows]), n).tolist())  # Â[target, source]
    expected = set(pair_keys(task.split.train_graph, n).tolist()) | {i * n + i for i in range(n)}
    assert stored == expected


def test_an_edge_list_encoder_reads_the_training_edges_only():
    t = make_task(link_config(model={"kind": "sage"}))
    assert np.array_equal(t.placed.operand, t.split.train_graph)
    held = pair_keys(np.concatenate([t.split.val_pos, t.split.test_pos], axis=1), 300)
    assert not np.isin(pair_keys(t.placed.operand, 300), held).any()
    assert not np.isin(pair_keys(t.placed.operand[::-1], 300), held).any()


def test_the_same_seed_gives_the_same_run_bit_for_bit():
    config = link_config(model={"dropout": 0.2}, link={"variational": True},
                         train={"epochs": 5})
    a, b = (fit(config, make_task(config)).runs[0] for _ in range(2))
    assert [r.as_dict() for r in a.rows] == [r.as_dict() for r in b.rows]
    assert all(a.state[k].tobytes() == b.state[k].tobytes() for k in a.state)


def test_a_gae_learns_to_rank_held_out_edges_above_non_edges(task):
    config = link_config()
    result = fit(config, task)
    (run,) = result.runs
    first, best = run.rows[0], run.rows[run.best_epoch - 1]
    assert first.loss > best.loss
    assert run.scores["val_auc"] == max(r.val_auc for r in run.rows)  # selection: highest
    assert run.scores["test_auc"] > 0.85 and run.scores["test_ap"] > 0.8
    assert run.scores["val_loss"] == pytest.approx(best.val_loss)


def test_a_vgae_with_an_mlp_decoder_and_hits_learns_too():
    config = link_config(link={"variational": True, "decoder": "mlp", "hits_k": 10},
                         train={"epochs": 60})
    t = make_task(config)
    assert isinstance(t.build_model(np.random.default_rng(0)), VGAE)
    (run,) = fit(config, t).runs
    assert run.scores["test_auc"] > 0.7 and 0.2 < run.scores["test_hits10"] < 1.0


def test_the_validation_loss_is_the_bce_of_both_sets_of_pairs(task):
    model = task.build_model(np.random.default_rng(0))
    s = task.pair_scores(model)
    scores = task.evaluate(model)
    assert scores["val_loss"] == pytest.approx(bce_logits(s["val_pos"], 1.0)
                                               + bce_logits(s["val_neg"], 0.0))
    assert bce_logits(np.array([0.0]), 1.0) == pytest.approx(np.log(2))
    assert len(s["test_pos"]) == len(s["test_neg"]) == task.split.test_pos.shape[1]


def test_every_pair_scored_as_kipfs_code_learns_and_draws_no_negatives():
    config = link_config(link={"negatives": "all"}, train={"epochs": 30})
    t = make_task(config)
    model = t.build_model(np.random.default_rng(0))
    (step,) = t.batches(model, np.random.default_rng(0))
    assert step()[1] == 300 * 300  # every entry of A_train + I
    (run,) = fit(config, t).runs
    assert run.scores["test_auc"] > 0.85


def test_cora_gae_starts_at_kipfs_loss(mirror_env):
    """configs/cora-gae.yaml (`negatives: all`) at its initial weights: 0.780, the loss of
    Kipf & Welling's code (pos_weight 816.0 from the training edges alone); weighting with
    the N self-loops counted gave 0.682."""
    from mgsparse.config import load_config
    from tests.conftest import CONFIGS

    config = load_config(CONFIGS / "cora-gae.yaml", ["monitor.memory=false"])
    t = make_task(config)
    (step,) = t.batches(t.build_model(np.random.default_rng(0)), np.random.default_rng(0))
    loss, scored = step()
    assert scored == 2708 * 2708 and round(float(loss.data), 3) == 0.780
