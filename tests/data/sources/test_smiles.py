"""OGB's molecule featurisation, written here: the integer features of a few molecules worked
by hand, the vocabularies' widths, and the one-hots the model reads."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data.sources import smiles


def test_vocabulary_widths_are_ogbs():
    assert smiles.ATOM_WIDTHS == (119, 5, 12, 12, 10, 6, 6, 2, 2)
    assert smiles.BOND_WIDTHS == (5, 6, 2)
    assert sum(smiles.ATOM_WIDTHS) == 174 and sum(smiles.BOND_WIDTHS) == 13


def test_index_falls_back_to_the_last_entry():
    values = dict(smiles.ATOM_FEATURES)
    assert smiles.index(values["formal_charge"], 0) == 5
    assert smiles.index(values["formal_charge"], 7) == 11  # misc
    assert smiles.index(values["atomic_num"], 6) == 5
    assert smiles.index(dict(smiles.BOND_FEATURES)["bond_stereo"], "STEREOATROPCW") == 5


def test_ethanol_and_benzene_by_hand(capfd):
    pytest.importorskip("rdkit")
    chem = smiles.require_rdkit()
    atoms, bonds, feats = smiles.smiles_graph("CCO", chem)
    # atomic_num-1, chirality, total degree (H included), charge+5, H count, radicals,
    # hybridization (SP3: 2), aromatic, in ring
    assert atoms.tolist() == [[5, 0, 4, 5, 3, 0, 2, 0, 0], [5, 0, 4, 5, 2, 0, 2, 0, 0],
                              [7, 0, 2, 5, 1, 0, 2, 0, 0]]
    assert bonds.tolist() == [[0, 1], [1, 2]] and feats.tolist() == [[0, 0, 0], [0, 0, 0]]
    atoms, bonds, feats = smiles.smiles_graph("c1ccccc1", chem)
    assert (atoms == [5, 0, 3, 5, 1, 0, 1, 1, 1]).all()  # SP2, aromatic, in a ring
    assert bonds.shape == (6, 2) and (feats == [3, 0, 1]).all()  # aromatic, conjugated
    charged, _, _ = smiles.smiles_graph("[NH4+]", chem)
    assert charged.tolist() == [[6, 0, 4, 6, 4, 0, 2, 0, 0]]
    assert smiles.smiles_graph("C1CC(", chem) is None and smiles.smiles_graph("", chem) is None
    assert capfd.readouterr().err == ""  # RDKit's parse error is held back: the library is quiet


def test_one_hot_sets_one_column_per_feature():
    ints = np.array([[0, 1], [2, 0]])
    np.testing.assert_array_equal(smiles.one_hot(ints, (3, 2)),
                                  [[1, 0, 0, 0, 1], [0, 0, 1, 1, 0]])
    assert smiles.one_hot(np.zeros((0, 2), dtype=np.int64), (3, 2)).shape == (0, 5)
