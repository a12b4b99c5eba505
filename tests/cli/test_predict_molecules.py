"""`mgsparse predict RUN --molecules FILE`: a molecule run's model on new molecules, featurised
as its training molecules were. The predictions are the model's own, in the target's units (a
regression) or class probabilities; SMILES of an SDF-trained run read as their SDF forms do;
a file that cannot be read, or options that choose other rows, are one line with exit 2."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest

from mgsparse.data.sources import sdf_io
from mgsparse.run.kinds import make_task
from mgsparse.run.predict import restore_saved, saved_run
from mgsparse.run.tasks.regression import molecule_batch
from tests.conftest import one_line_error
from tests.data.sources.molfiles import record, three_molecules, toy_molecules, write_sdf

pytest.importorskip("rdkit")  # the SMILES cases; the SDF ones need no RDKit but share runs

CONFIG = """dataset: {{name: molecules, path: {path}, target: {target}}}
model: {{kind: gine, layers: 2, hidden: 16, dropout: 0.0}}
optim: {{lr: 0.01, weight_decay: 0.0}}
train: {{loss: {loss}, epochs: {epochs}, batch_size: 16}}
monitor: {{memory: false}}
"""

# four small molecules as SDF records and as SMILES (kekulé bonds, implicit hydrogens)
SMALL = [("ethanol", ["C", "C", "O"], [(1, 2, 1), (2, 3, 1)], "CCO"),
         ("acetic acid", ["C", "C", "O", "O"], [(1, 2, 1), (2, 3, 2), (2, 4, 1)], "CC(=O)O"),
         ("methylamine", ["C", "N"], [(1, 2, 1)], "CN"),
         ("benzene", ["C"] * 6, [(1, 2, 2), (2, 3, 1), (3, 4, 2), (4, 5, 1), (5, 6, 2),
                                 (6, 1, 1)], "c1ccccc1")]


def train_run(cli, folder, path, target="Y", loss="mse", epochs=15):
    config = folder / "run.yaml"
    config.write_text(CONFIG.format(path=path, target=target, loss=loss, epochs=epochs))
    run = folder / "run"
    result = cli("train", config, "--out", run, "--quiet")
    assert result.exit_code == 0, result.output
    return run


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


@pytest.fixture(scope="module")
def sdf_run(tmp_path_factory):
    from typer.testing import CliRunner

    from mgsparse.cli import app
    folder = tmp_path_factory.mktemp("mol")
    runner = CliRunner()
    return train_run(lambda *a: runner.invoke(app, [str(x) for x in a]), folder,
                     toy_molecules(folder / "toy.sdf", 60))


def by_hand(run, path):
    """The saved model on the molecules of an SDF, through the task's own batch."""
    from mgsparse.data.sources.molecules import sdf_set

    config, entry, state = saved_run(run)
    task = make_task(config)
    model = restore_saved(task, state, run / entry["params"]).eval()
    mols = sdf_set("x", [path], "Y")  # its bonds; its atoms over the training elements
    mols = dataclasses.replace(mols, x=sdf_io.atom_features(sdf_io.read_sdf(path),
                                                            task.mols.elements))
    return model.in_units(model(molecule_batch(mols, np.arange(len(mols)))).data)


def test_an_sdf_is_predicted_in_the_targets_units(cli, tmp_path, sdf_run):
    path = write_sdf(tmp_path / "new.sdf", [record(n, s, b, {"Y": "0"}) for n, s, b, _ in SMALL])
    result = cli("predict", sdf_run, "--molecules", path, "--out", tmp_path / "p.csv")
    assert result.exit_code == 0, result.output
    header, rows = read(tmp_path / "p.csv")
    assert header == ["name", "prediction"]
    assert [r[0] for r in rows] == ["ethanol", "acetic acid", "methylamine", "benzene"]
    np.testing.assert_allclose([float(r[1]) for r in rows], by_hand(sdf_run, path), atol=1e-5)
    # the toy target is 0.3 per C, -0.2 per N, -0.8 per O: benzene above ethanol
    assert float(rows[3][1]) > float(rows[0][1]) + 0.5


def test_smiles_read_as_their_sdf_forms_do(cli, tmp_path, sdf_run):
    sdf = write_sdf(tmp_path / "new.sdf", [record(n, s, b, {"Y": "0"}) for n, s, b, _ in SMALL])
    smi = tmp_path / "new.smi"
    smi.write_text("".join(f"{text} {name}\n" for name, _, _, text in SMALL))
    table = tmp_path / "new.csv"
    table.write_text("name,smiles\n" + "".join(f"{n},{t}\n" for n, _, _, t in SMALL))
    values = {}
    for path in (sdf, smi, table):
        out = tmp_path / f"{path.suffix[1:]}.csv"
        assert cli("predict", sdf_run, "--molecules", path, "--out", out).exit_code == 0
        _, rows = read(out)
        assert [r[0] for r in rows] == [n for n, _, _, _ in SMALL]
        values[path.suffix] = [float(r[1]) for r in rows]
    np.testing.assert_allclose(values[".smi"], values[".sdf"], rtol=1e-6)
    np.testing.assert_allclose(values[".csv"], values[".sdf"], rtol=1e-6)


def test_bad_molecules_and_mixed_options_are_one_line(cli, tmp_path, sdf_run):
    out = tmp_path / "p.csv"
    smi = tmp_path / "bad.smi"
    smi.write_text("CCO ethanol\nC1CC(( broken\n")
    one_line_error(cli("predict", sdf_run, "--molecules", smi, "--out", out), 2,
                   "bad.smi line 2", "cannot be parsed by RDKit")
    counts = tmp_path / "bad.sdf"
    write_sdf(counts, [record("x", ["C", "O"], [(1, 2, 1)], {}, counts=(3, 1))])
    one_line_error(cli("predict", sdf_run, "--molecules", counts, "--out", out), 2,
                   "bad.sdf", "molecule 1")
    one_line_error(cli("predict", sdf_run, "--molecules", tmp_path / "none.sdf", "--out", out),
                   2, "none.sdf: no such file")
    table = tmp_path / "t.csv"
    table.write_text("name,smi\nethanol,CCO\n")
    one_line_error(cli("predict", sdf_run, "--molecules", table, "--out", out), 2,
                   "no column 'smiles'")
    one_line_error(cli("predict", sdf_run, "--molecules", smi, "--split", "all", "--out", out),
                   2, "--molecules and --split")
    assert not out.exists()


def test_a_class_target_gives_class_probabilities(cli, tmp_path):
    path = three_molecules(tmp_path / "m.sdf")
    run = train_run(cli, tmp_path, path, target="CLS", loss="cross_entropy", epochs=3)
    result = cli("predict", run, "--molecules", path, "--out", tmp_path / "p.csv")
    assert result.exit_code == 0, result.output
    header, rows = read(tmp_path / "p.csv")
    assert header == ["name", "pred", "p0", "p1", "p2"]
    p = np.array([[float(v) for v in r[2:]] for r in rows])
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    classes = ["(A) low", "(B) medium", "(C) high"]
    assert [r[1] for r in rows] == [classes[k] for k in p.argmax(axis=1)]
    assert [r[0] for r in rows] == ["ethanol", "acetate", "chloroethyne"]


def test_a_smiles_run_reads_smiles_and_refuses_an_sdf(cli, tmp_path):
    table = tmp_path / "train.csv"
    rng = np.random.default_rng(0)
    chains = ["C" * int(k) + "O" * int(j) for k, j in rng.integers(1, 6, size=(30, 2))]
    table.write_text("smiles,Y\n" + "".join(f"{s},{0.3 * s.count('C') - 0.8 * s.count('O')}\n"
                                            for s in chains))
    run = train_run(cli, tmp_path, table, epochs=3)
    new = tmp_path / "new.csv"
    new.write_text("smiles\nCCO\nCCCC\n")
    result = cli("predict", run, "--molecules", new, "--out", tmp_path / "p.csv")
    assert result.exit_code == 0, result.output
    header, rows = read(tmp_path / "p.csv")
    assert header == ["name", "prediction"] and [r[0] for r in rows] == ["CCO", "CCCC"]
    sdf = write_sdf(tmp_path / "new.sdf", [record("ethanol", ["C", "C", "O"],
                                                  [(1, 2, 1), (2, 3, 1)], {})])
    one_line_error(cli("predict", run, "--molecules", sdf, "--out", tmp_path / "q.csv"), 2,
                   "new.sdf", "OGB's features", ".smi or .csv")
