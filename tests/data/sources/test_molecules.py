"""The molecules source: the real files served over loopback (the download code runs, the
checksum is recorded on first use and checked after), a damaged or wrong download refused
with nothing kept, FreeSolv's SMILES through RDKit, the user's own CSV, and the CLI's line."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from mgsparse.data import load_dataset
from mgsparse.data.sources import molecules
from mgsparse.errors import ChecksumError, ConfigError, DataError, InputFileError
from tests.conftest import require_real_molecules
from tests.data.sources.molfiles import three_molecules


@pytest.fixture
def real_mirror(serve_folder, monkeypatch, tmp_path):
    """MGSPARSE_MOLECULES_URL at a loopback server over the real files; a fresh cache."""
    url, log = serve_folder(require_real_molecules())
    monkeypatch.setenv("MGSPARSE_MOLECULES_URL", url)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    return url, log


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_solubility_over_loopback_records_then_checks_its_checksums(real_mirror, tmp_path):
    _, log = real_mirror
    mols = load_dataset("solubility")
    assert mols.num_graphs == 1_282 and int(mols.test_mask.sum()) == 257
    assert not mols.test_mask[:1_025].any() and mols.test_mask[1_025:].all()
    # ten elements in the training file, then other, charge, six degrees; four bond orders
    assert mols.num_features == 18 and mols.num_edge_features == 4
    # the counts lines give 13,323 + 3,348 atoms and 13,703 + 3,450 bonds, each bond both ways
    assert mols.num_nodes == 16_671 and mols.num_edges == 2 * (13_703 + 3_450)
    assert mols.target == "SOL" and mols.names[0] == "n-pentane" and mols.y[0] == -3.18
    assert sorted(log) == ["/solubility.test.sdf", "/solubility.train.sdf"]
    raw = molecules.raw_path("solubility", "solubility.train.sdf")
    real = require_real_molecules() / "solubility.train.sdf"
    assert molecules.dl.recorded_sha256(raw) == _sha(real)
    load_dataset("solubility")
    assert len(log) == 2  # the checked cache: no bytes move
    raw.write_bytes(raw.read_bytes()[:-100])  # a damaged cache is fetched again, and checked
    load_dataset("solubility")
    assert len(log) == 3 and _sha(raw) == _sha(real)


def test_a_mirror_whose_file_differs_from_the_recorded_one_is_refused(real_mirror,
                                                                       serve_folder, tmp_path,
                                                                       monkeypatch):
    load_dataset("solubility")
    other = tmp_path / "other"
    shutil.copytree(require_real_molecules(), other)
    (other / "solubility.test.sdf").write_bytes(
        (other / "solubility.test.sdf").read_bytes().replace(b"\r\n", b"\n"))
    url, _ = serve_folder(other)
    raw = molecules.raw_path("solubility", "solubility.test.sdf")
    raw.unlink()
    with pytest.raises(ChecksumError, match=r"solubility.test.sdf from .* has SHA-256") as info:
        load_dataset("solubility", url=url)
    assert info.value.exit_code == 1 and not raw.exists()


def test_solubility_classes(real_mirror):
    mols = molecules.load("solubility", target="SOL_classification")
    assert mols.classes == ("(A) low", "(B) medium", "(C) high")
    assert np.bincount(mols.y[:1_025]).tolist() == [417, 402, 206]


def _broken_folder(tmp_path):
    folder = tmp_path / "mirror"
    folder.mkdir()
    three_molecules(folder / "solubility.train.sdf")
    text = (folder / "solubility.train.sdf").read_text().replace("  2  3  2  0", "  2  9  2  0")
    (folder / "solubility.train.sdf").write_text(text)
    shutil.copy(require_real_molecules() / "solubility.test.sdf", folder)
    return folder


def test_a_damaged_download_is_exit_1_and_nothing_is_kept(serve_folder, tmp_path, monkeypatch):
    url, _ = serve_folder(_broken_folder(tmp_path))
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    with pytest.raises(DataError) as info:
        molecules.load("solubility", url=url)
    assert type(info.value) is DataError and info.value.exit_code == 1
    assert "solubility.train.sdf: molecule 2 (line 30): bond 2 joins atom 9, outside the " \
           "molecule's atoms 1..4" in str(info.value)
    raw = molecules.raw_path("solubility", "solubility.train.sdf")
    assert not raw.exists() and not raw.with_name(raw.name + ".sha256").exists()


def test_a_bad_file_in_the_users_own_folder_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    with pytest.raises(InputFileError, match=r"molecule 2 \(line 30\): bond 2 joins atom 9"):
        molecules.load("solubility", url=str(_broken_folder(tmp_path)))


def test_a_download_with_the_wrong_count_is_refused(serve_folder, tmp_path, monkeypatch):
    folder = tmp_path / "mirror"
    folder.mkdir()
    three_molecules(folder / "solubility.train.sdf")
    url, _ = serve_folder(folder)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    with pytest.raises(DataError, match=r"solubility.train.sdf from .*: 3 molecules, expected "
                                        r"1,025"):
        molecules.load("solubility", url=url)


def test_user_keys_are_checked(tmp_path):
    source = molecules.Molecules()
    with pytest.raises(ConfigError, match="dataset.path must name an .sdf file"):
        source.load("molecules")
    with pytest.raises(ConfigError, match="dataset.path is read for your own molecules"):
        source.load("solubility", path=str(three_molecules(tmp_path / "m.sdf")))


def test_training_on_a_bad_sdf_is_one_line_and_exit_2(cli, tmp_path):
    bad = tmp_path / "bad.sdf"
    bad.write_text(three_molecules(tmp_path / "m.sdf").read_text().replace("SOL", "LOGP", 1))
    config = tmp_path / "c.yaml"
    config.write_text("dataset:\n  name: molecules\n  path: bad.sdf\n  target: SOL\n"
                      "model:\n  kind: gin\ntrain:\n  loss: mse\n  epochs: 1\n")
    result = cli("train", config, "--quiet")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        (f"error: {bad}: molecule 1 (line 1): no value of the target 'SOL' (it has: CLS, LOGP, "
        "NAME)")], result.stderr


# --- SMILES ----------------------------------------------------------------------------------

def write_csv(path, rows, header="name,smiles,expt"):
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_without_rdkit_one_line_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "rdkit", None)  # `import rdkit` fails
    path = write_csv(tmp_path / "m.csv", ["ethanol,CCO,-5.0"])
    with pytest.raises(ConfigError) as info:
        molecules.load_user(path, "expt")
    assert str(info.value) == (f"{path}: reading SMILES needs RDKit, the optional 'chem' extra, "
                               "which is not installed: pip install rdkit (or pip install -e "
                               "'.[chem]' from a checkout)")
    assert info.value.exit_code == 2


def test_csv_bad_input_names_file_and_line(tmp_path):
    pytest.importorskip("rdkit")
    path = write_csv(tmp_path / "m.csv", ["ethanol,CCO,-5.0", "broken,C1CC(,-1.0"])
    with pytest.raises(InputFileError, match=r"m.csv line 3: SMILES 'C1CC\(' cannot be parsed "
                                             r"by RDKit") as info:
        molecules.load_user(path, "expt")
    assert info.value.exit_code == 2
    with pytest.raises(InputFileError, match=r"m.csv: no column 'dG' \(columns: name, smiles, "
                                             r"expt\)"):
        molecules.load_user(path, "dG")
    bad = write_csv(tmp_path / "n.csv", ["ethanol,CCO,-5.0", "water,O,cold"])
    with pytest.raises(InputFileError, match=r"n.csv line 3: target 'expt' is 'cold', not a "
                                             r"finite number"):
        molecules.load_user(bad, "expt")
    with pytest.raises(InputFileError, match=r"n.csv: no column 'SMILES'"):
        molecules.load_user(bad, "expt", smiles_column="SMILES")


def test_freesolv_over_loopback_with_ogb_features(real_mirror):
    pytest.importorskip("rdkit")
    mols = load_dataset("freesolv")
    assert mols.num_graphs == 642 and mols.test_mask is None
    assert mols.num_features == 174 and mols.num_edge_features == 13
    assert mols.target == "expt" and mols.unit == "kcal/mol" and mols.y[0] == -11.01
    assert mols.names[1] == "CS(=O)(=O)Cl"
    assert (mols.x.sum(axis=1) == 9).all() and (mols.edge_attr.sum(axis=1) == 3).all()


def test_datasets_info_describes_a_molecule_file(cli, tmp_path):
    config = tmp_path / "c.yaml"
    three_molecules(tmp_path / "m.sdf")
    config.write_text("dataset:\n  name: molecules\n  path: m.sdf\n  target: SOL\n")
    result = cli("datasets", "info", config)
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in result.stdout.splitlines() if line.count("│") == 3}
    assert rows["molecules"] == "3" and rows["atoms"] == "10" and rows["edges (directed)"] == "14"
    assert rows["atom features"] == "11" and rows["bond features"] == "4"
    assert rows["target SOL"] == "mean 0.117, std 0.997, range -1.25 .. 1.10"
    assert rows["fixed test part"] == "none (split by seed)"
