"""The SDF V2000 reader on small files written here: what it reads (LF and CRLF alike), the
features it makes, and every refusal's one line with its exit code."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.sources import molecules, sdf_io
from mgsparse.errors import ConfigError, DataError, InputFileError
from tests.data.sources.molfiles import (
    ACETATE,
    ETHANOL,
    ETHYNE,
    record,
    three_molecules,
    write_sdf,
)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_records_atoms_bonds_charges_and_properties(tmp_path, newline):
    records = sdf_io.read_sdf(three_molecules(tmp_path / "m.sdf", newline))
    assert [r.title for r in records] == ["ethanol", "acetate", "ethyne"]
    assert [r.name for r in records] == ["ethanol", "acetate", "chloroethyne"]  # NAME item
    assert [r.line for r in records] == [1, 21, 44]
    assert records[1].symbols == ["C", "C", "O", "O"]
    assert records[1].charges.tolist() == [0, 0, 0, -1]  # from M  CHG
    assert records[1].bonds.tolist() == [[0, 1], [1, 2], [1, 3]]  # atom ids from 0
    assert records[1].orders.tolist() == [1, 2, 1]
    assert records[2].orders.tolist() == [3, 1]
    assert records[0].properties == {"NAME": "ethanol", "SOL": "1.1", "CLS": "(C) high"}


def test_crlf_and_lf_files_give_the_same_set(tmp_path):
    a = molecules.load_user(three_molecules(tmp_path / "lf.sdf", "\n"), "SOL")
    b = molecules.load_user(three_molecules(tmp_path / "crlf.sdf", "\r\n"), "SOL")
    for key in ("x", "edge_index", "edge_attr", "node_ptr", "edge_ptr", "y"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))


def test_atom_block_charge_codes_and_m_chg_replacing_them(tmp_path):
    # code 3 is +1, 5 is -1; an M  CHG line resets every atom-block charge it does not name
    plain = record("ion", ["N", "O"], [(1, 2, 1)], {"SOL": "0"}, codes={0: 3, 1: 5})
    both = record("ion", ["N", "O"], [(1, 2, 1)], {"SOL": "0"}, codes={0: 3, 1: 5},
                  m_lines=("M  CHG  1   1   2",))
    a, b = sdf_io.read_sdf(write_sdf(tmp_path / "c.sdf", [plain, both]))
    assert a.charges.tolist() == [1, -1] and b.charges.tolist() == [2, 0]


def test_features_one_hot_element_charge_degree_and_bond_order(tmp_path):
    mols = molecules.load_user(three_molecules(tmp_path / "m.sdf"), "SOL")
    # vocabulary in atomic-number order: C, O, Cl; then other, charge, degree 0..5+
    assert mols.num_features == 3 + 1 + 1 + 6 and mols.num_edge_features == 4
    assert mols.node_ptr.tolist() == [0, 3, 7, 10] and mols.edge_ptr.tolist() == [0, 4, 10, 14]
    x = mols.x
    np.testing.assert_array_equal(x[:, :4].argmax(1), [0, 0, 1, 0, 0, 1, 1, 0, 0, 2])
    np.testing.assert_array_equal(x[:, 4], [0, 0, 0, 0, 0, 0, -1, 0, 0, 0])
    np.testing.assert_array_equal(x[:, 5:].argmax(1), [1, 2, 1, 1, 3, 1, 1, 1, 2, 1])
    # both directions of every bond, sorted by (source, target), each with its order's one-hot
    ei = mols.edge_index
    assert ei[:, :4].tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    order = mols.edge_attr.argmax(1) + 1
    pairs = {(int(s), int(d)): int(o) for s, d, o in zip(ei[0], ei[1], order)}
    assert pairs[(4, 5)] == pairs[(5, 4)] == 2 and pairs[(7, 8)] == pairs[(8, 7)] == 3
    assert mols.y.tolist() == [1.1, 0.5, -1.25] and mols.names[2] == "chloroethyne"


def test_a_test_molecule_of_an_element_outside_the_training_vocabulary(tmp_path):
    train = write_sdf(tmp_path / "train.sdf", [record(*ETHANOL)])
    test = write_sdf(tmp_path / "test.sdf", [record(*ETHYNE)])
    mols = molecules.sdf_set("s", [train, test], "SOL")
    assert mols.num_features == 2 + 1 + 1 + 6  # C, O, other, charge, degrees
    assert mols.x[5, 2] == 1.0  # the Cl of the test file: "other element"
    assert mols.test_mask.tolist() == [False, True]


def test_class_target_and_its_graphset(tmp_path):
    mols = molecules.load_user(three_molecules(tmp_path / "m.sdf"), "CLS")
    assert mols.classes == ("(A) low", "(B) medium", "(C) high")
    assert mols.y.tolist() == [2, 1, 0]
    graphs = mols.graphset()
    assert graphs.num_classes == 3 and graphs.num_edges == 14


def test_subset_renumbers_and_keeps_the_bond_rows(tmp_path):
    mols = molecules.load_user(three_molecules(tmp_path / "m.sdf"), "SOL")
    sub = mols.subset([2, 1])
    assert sub.node_ptr.tolist() == [0, 3, 7] and sub.y.tolist() == [-1.25, 0.5]
    np.testing.assert_array_equal(sub.edge_index[:, :4], mols.edge_index[:, 10:14] - 7)
    np.testing.assert_array_equal(sub.edge_attr[:4], mols.edge_attr[10:14])
    assert sub.names == ("chloroethyne", "acetate")


# --- bad input ------------------------------------------------------------------------------------

BAD = {
    "counts line unreadable": (
        lambda: [record(*ETHANOL)[:3] + ["  x  2  0  0  0  0  0  0  0  0999 V2000"] +
                 record(*ETHANOL)[4:]],
        ("molecule 1 (line 4): counts line 'x  2  0  0  0  0  0  0  0  0999 V2000' does not "
        "start with the atom and bond counts")),
    "fewer bonds counted than written": (
        lambda: [record(*ETHANOL), record(*ACETATE, counts=(4, 2))],
        ("molecule 2 (line 31): '2  4  1  0' follows the counts line's 4 atoms and 2 bonds: "
        "the counts line is wrong")),
    "more atoms counted than written": (
        lambda: [record(*ETHANOL, counts=(4, 2))],
        ("molecule 1 (line 8): atom 4 of 4 (the counts line's): '1  2  1  0' is not an atom "
        "line")),
    "more bonds counted than written": (
        lambda: [record(*ETHANOL, counts=(3, 9))],
        "molecule 1 (line 10): bond 3 of 9 (the counts line's): 'M  END' is not a bond line"),
    "more bonds counted than the record holds": (
        lambda: [record(*ETHANOL, counts=(3, 50))],
        ("molecule 1 (line 4): the counts line gives 3 atoms and 50 bonds, but the record has "
        "15 lines below it")),
    "atom index outside the molecule": (
        lambda: [record(*ETHANOL), record("bad", ["C", "O"], [(1, 3, 1)], {"SOL": "1"})],
        "molecule 2 (line 27): bond 1 joins atom 3, outside the molecule's atoms 1..2"),
    "charge on an atom outside": (
        lambda: [record("bad", ["C", "O"], [(1, 2, 1)], {"SOL": "1"},
                        m_lines=("M  CHG  1   7  -1",))],
        "molecule 1 (line 8): charge on atom 7, outside the molecule's atoms 1..2"),
    "unknown bond order": (
        lambda: [record(*ETHANOL), record(*ETHYNE), record("q", ["C", "N"], [(1, 2, 8)],
                                                           {"SOL": "2"})],
        ("molecule 3 (line 47): bond 1 has order 8, not one of 1 (single), 2 (double), "
        "3 (triple), 4 (aromatic)")),
    "empty molecule": (
        lambda: [record(*ETHANOL), record("nothing", [], [], {"SOL": "0"})],
        "molecule 2 (line 24): an empty molecule (the counts line gives 0 atoms)"),
    "missing target": (
        lambda: [record(*ETHANOL), record("nameless", ["C"], [], {"LOGP": "1"})],
        "molecule 2 (line 21): no value of the target 'SOL' (it has: LOGP)"),
    "non-numeric target": (
        lambda: [record(*ETHANOL), record(*ACETATE), record("t", ["C"], [], {"SOL": "n/a"})],
        "molecule 3 (line 43): target 'SOL' is 'n/a', not a finite number"),
    "no M  END": (
        lambda: [[line for line in record(*ETHANOL) if line != "M  END"]],
        "molecule 1 (line 10): no 'M  END' line before the record ends (line 19)"),
    "V3000": (
        lambda: [record(*ETHANOL)[:3] + ["  0  0  0     0  0            999 V3000"] +
                 record(*ETHANOL)[4:]],
        "molecule 1 (line 4): a V3000 record; only V2000 molfiles are read"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_user_file_is_one_line_naming_file_molecule_and_line_exit_2(tmp_path, case):
    build, expected = BAD[case]
    path = write_sdf(tmp_path / "bad.sdf", build())
    with pytest.raises(InputFileError) as info:
        molecules.load_user(path, "SOL")
    message = str(info.value)
    assert message == f"{path}: {expected}" or message.startswith(f"{path}: {expected}"), message
    assert "\n" not in message and info.value.exit_code == 2


def test_the_same_fault_in_a_download_parse_is_a_data_error_exit_1(tmp_path):
    path = write_sdf(tmp_path / "bad.sdf", [record("q", ["C", "N"], [(1, 2, 5)], {"SOL": "2"})])
    with pytest.raises(DataError) as info:
        sdf_io.read_sdf(path)
    assert type(info.value) is DataError and info.value.exit_code == 1


def test_no_molecules_and_no_target_key(tmp_path):
    empty = tmp_path / "empty.sdf"
    empty.write_text("\n\n")
    with pytest.raises(InputFileError, match=r"empty.sdf: no molecules \(no record ending"):
        molecules.load_user(empty, "SOL")
    with pytest.raises(ConfigError, match="dataset.target is not set"):
        molecules.load_user(three_molecules(tmp_path / "m.sdf"), None)
    with pytest.raises(InputFileError, match=r"nowhere.sdf: no such file \(dataset.path\)"):
        molecules.load_user(tmp_path / "nowhere.sdf", "SOL")
