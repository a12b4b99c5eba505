"""Graph regression: its metrics against numbers worked by hand, its losses, targets
standardised on the training part with every figure in the target's units, the splits, and
a short run on molecules written here that beats predicting the mean."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.run import fit
from mgsparse.run.kinds import make_task
from mgsparse.run.tasks.regression import (
    GraphRegressionTask,
    molecule_batch,
    regression_loss,
    regression_scores,
    split_indices,
)
from tests.conftest import make_config
from tests.data.sources.molfiles import three_molecules, toy_molecules


def test_rmse_mae_and_r2_by_hand():
    # errors 0, -1, 1, -2: squared sum 6, |.| sum 4; targets' mean 3, spread 4+0+1+9 = 14
    s = regression_scores(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 6.0]))
    assert s["rmse"] == pytest.approx(math.sqrt(6 / 4))
    assert s["mae"] == pytest.approx(1.0)
    assert s["r2"] == pytest.approx(1 - 6 / 14)
    mean = regression_scores(np.full(4, 3.0), np.array([1.0, 3.0, 2.0, 6.0]))
    assert mean["r2"] == pytest.approx(0.0) and mean["rmse"] == pytest.approx(math.sqrt(3.5))
    assert math.isnan(regression_scores(np.ones(2), np.ones(2))["r2"])


def test_mse_l1_and_huber_losses_by_hand():
    target = np.zeros(3, dtype=np.float32)
    values = {}
    for kind in ("mse", "l1", "huber"):
        pred = Tensor(np.array([0.25, -0.5, 3.0], dtype=np.float32), requires_grad=True)
        loss = regression_loss(pred, target, kind)
        loss.backward()
        values[kind] = (float(loss.data), pred.grad.tolist())
    assert values["mse"][0] == pytest.approx((0.0625 + 0.25 + 9) / 3)
    assert values["l1"][0] == pytest.approx((0.25 + 0.5 + 3) / 3)
    # huber, δ = 1: ½ d² inside, |d| − ½ beyond
    assert values["huber"][0] == pytest.approx((0.03125 + 0.125 + 2.5) / 3)
    np.testing.assert_allclose(values["l1"][1], [1 / 3, -1 / 3, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(values["huber"][1], [0.25 / 3, -0.5 / 3, 1 / 3], rtol=1e-6)


def mol_config(path, **train):
    return make_config("molecules", dataset={"path": str(path), "target": "Y"},
                       model={"kind": "gin", "layers": 2, "hidden": 16, "dropout": 0.0},
                       optim={"lr": 0.01, "weight_decay": 0.0},
                       train={"loss": "mse", "batch_size": 16, "epochs": 2, **train})


def test_targets_are_standardised_on_the_training_part_and_scored_in_units(tmp_path):
    path = toy_molecules(tmp_path / "toy.sdf", 40)
    task = make_task(mol_config(path))
    y = task.y
    model = task.build_model(np.random.default_rng(0))
    assert model.target_mean.data[0] == pytest.approx(y[task.train_idx].mean())
    assert model.target_std.data[0] == pytest.approx(y[task.train_idx].std())
    # a model whose heads give 0 predicts the training mean, in the target's units
    model.load_state_dict({k: np.zeros_like(v) if k.startswith("body.heads") else v
                           for k, v in model.state_dict().items()})
    np.testing.assert_allclose(task.predict(model), y[task.train_idx].mean(), rtol=1e-6)
    scores = task.evaluate(model)
    for split, idx in (("train", task.train_idx), ("test", task.test_idx)):
        rmse = np.sqrt(np.mean((y[idx] - y[task.train_idx].mean()) ** 2))
        assert scores[f"{split}_rmse"] == pytest.approx(rmse, rel=1e-5)
    assert scores["val_r2"] <= 0.0  # the training mean is no better than a split's own mean
    # the training step's loss reads standardised targets: a zero model's MSE is their variance
    batch_loss, n = task._step(model.train(), task.train_idx)
    assert n == task.train_idx.size and float(batch_loss.data) == pytest.approx(1.0, rel=1e-4)


def test_a_fixed_test_part_is_kept_and_a_tenth_of_the_rest_held_out(tmp_path):
    train = toy_molecules(tmp_path / "a.sdf", 50, seed=1)
    test = toy_molecules(tmp_path / "b.sdf", 10, seed=2)
    from mgsparse.data.sources.molecules import sdf_set

    mols = sdf_set("toy", [train, test], "Y")
    tr, val, te = split_indices(mols, seed=3)
    assert te.tolist() == list(range(50, 60)) and len(val) == 5 and len(tr) == 45
    assert not set(tr) & set(val) and split_indices(mols, 3)[1].tolist() == val.tolist()
    assert split_indices(mols, 4)[1].tolist() != val.tolist()


def test_a_random_80_10_10_split_by_seed(tmp_path):
    mols = make_task(mol_config(toy_molecules(tmp_path / "toy.sdf", 50))).mols
    tr, val, te = split_indices(mols, seed=0)
    assert (len(tr), len(val), len(te)) == (40, 5, 5)
    assert sorted([*tr, *val, *te]) == list(range(50))


def test_a_batch_carries_the_molecules_in_order(tmp_path):
    from mgsparse.data.sources.molecules import load_user

    mols = load_user(three_molecules(tmp_path / "m.sdf"), "SOL")
    b = molecule_batch(mols, np.array([2, 0]))
    assert b.num_graphs == 2 and b.num_nodes == 6 and b.y.tolist() == [-1.25, 1.1]
    np.testing.assert_array_equal(b.x.data, mols.x[[7, 8, 9, 0, 1, 2]])
    assert b.edge_index[:, :4].tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]


def test_training_beats_predicting_the_mean(tmp_path):
    task = make_task(mol_config(toy_molecules(tmp_path / "toy.sdf", 120), epochs=25))
    result = fit(task.config, task)
    summary = result.summary().as_dict()
    assert summary["test_r2_mean"] > 0.5, summary
    assert summary["test_rmse_mean"] < 0.7 * np.std(task.y[task.test_idx]), summary
    assert {"test_rmse_mean", "test_rmse_std", "test_mae_mean", "test_r2_mean"} <= set(summary)


def test_a_numeric_target_with_cross_entropy_and_classes_with_mse_are_refused(tmp_path):
    path = three_molecules(tmp_path / "m.sdf")
    cfg = make_config("molecules", dataset={"path": str(path), "target": "SOL"})
    with pytest.raises(ConfigError, match="target 'SOL' of m is numeric; train it with mse, "
                                          "l1, huber"):
        make_task(cfg)
    cfg = make_config("molecules", dataset={"path": str(path), "target": "CLS"},
                      train={"loss": "mse"})
    with pytest.raises(ConfigError, match=r"holds classes \(\(A\) low, \(B\) medium, \(C\) "
                                          r"high\); train it with cross_entropy"):
        make_task(cfg)


def test_a_class_target_trains_graph_classification(tmp_path):
    from mgsparse.run.tasks.graphs import GraphClassificationTask

    path = three_molecules(tmp_path / "m.sdf")
    task = make_task(make_config("molecules", dataset={"path": str(path), "target": "CLS"},
                                 model={"kind": "gin"}))
    assert isinstance(task, GraphClassificationTask) and task.num_classes == 3
    assert not isinstance(task, GraphRegressionTask)


def test_gine_reads_the_bonds_of_a_regression_batch(tmp_path):
    """model.kind: gine stacks GINE layers (not GIN's) and the bond orders reach them: the
    same atoms with every bond turned double predict differently."""
    from mgsparse.nn.gine import GINEConv

    path = toy_molecules(tmp_path / "toy.sdf", 30)
    task = make_task(make_config("molecules", dataset={"path": str(path), "target": "Y"},
                                 model={"kind": "gine", "layers": 2, "hidden": 8,
                                        "dropout": 0.0}, train={"loss": "mse"}))
    model = task.build_model(np.random.default_rng(0)).eval()
    assert all(type(c) is GINEConv and c.edge_dim == 4 for c in model.body.convs)
    ids = np.arange(10)
    batch = molecule_batch(task.mols, ids)
    np.testing.assert_array_equal(batch.edge_attr, task.mols.edge_attr[:batch.num_edges])
    mols = task.mols
    doubled = np.zeros_like(mols.edge_attr)
    doubled[:, 1] = 1.0
    swapped = type(mols)(**{**mols.__dict__, "edge_attr": doubled})
    a = model(batch).data
    b = model(molecule_batch(swapped, ids)).data
    assert np.abs(a - b).max() > 1e-3, (a, b)


def test_gine_classifies_molecules_with_their_bonds(tmp_path):
    """A class target keeps the bond features on its way to graph classification."""
    from mgsparse.nn.gine import GINEConv

    path = three_molecules(tmp_path / "m.sdf")
    task = make_task(make_config("molecules", dataset={"path": str(path), "target": "CLS"},
                                 model={"kind": "gine", "layers": 2, "hidden": 8}))
    assert task.graphs.edge_attr.shape == (14, 4)
    assert task.graphs.edge_attr[:, 2].sum() == 2  # chloroethyne's triple bond, both ways
    model = task.build_model(np.random.default_rng(0))
    assert type(model.convs[0]) is GINEConv
    assert task.logits(model).shape == (3, 3)


def test_a_last_batch_of_one_atom_joins_the_batch_before(tmp_path):
    """FreeSolv's 513 training molecules in 32s leave methane alone in the last batch: one
    row, which BatchNorm refuses. It trains inside the batch before it instead."""
    from tests.data.sources.molfiles import record, write_sdf

    mols = [record(f"m{k}", ["C", "O"], [(1, 2, 1)], {"Y": str(k)}) for k in range(8)]
    path = write_sdf(tmp_path / "m.sdf", [*mols, record("methane", ["C"], [], {"Y": "9"})])
    task = make_task(make_config("molecules", dataset={"path": str(path), "target": "Y"},
                                 model={"kind": "gine", "layers": 1, "hidden": 4},
                                 train={"loss": "mse", "batch_size": 4}))
    task.train_idx = np.arange(9)
    model = task.build_model(np.random.default_rng(0)).train()
    sizes = [step()[1] for step in task.batches(model, np.random.default_rng(np.uint64(5)))]
    assert sizes == [4, 5]
