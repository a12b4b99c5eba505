"""SMILES to molecule graphs through RDKit (the optional ``chem`` extra), with OGB's features.

RDKit is imported inside `require_rdkit` only: without it the rest of mgsparse works, and a
config that needs SMILES fails with one line naming the extra (``pip install rdkit``, or
``pip install -e '.[chem]'`` from a checkout).

Features: the vocabulary of OGB's molecule featuriser (``ogb.utils.features``, as
``smiles2graph`` uses it), each feature an integer index into its list; a value outside a
list with a "misc" entry takes that last index (OGB's ``safe_index``):

=====================  ====================================================  =====
atom feature           values                                                width
=====================  ====================================================  =====
atomic_num             1..118, misc                                          119
chirality              unspecified, tetrahedral CW, tetrahedral CCW, other,  5
                       misc
degree                 0..10, misc (GetTotalDegree: hydrogens included)       12
formal_charge          −5..5, misc                                           12
num_hs                 0..8, misc (GetTotalNumHs)                            10
num_radical_e          0..4, misc                                            6
hybridization          SP, SP2, SP3, SP3D, SP3D2, misc                       6
is_aromatic            false, true                                           2
is_in_ring             false, true                                           2
=====================  ====================================================  =====

=============  ===================================================================  =====
bond feature   values                                                               width
=============  ===================================================================  =====
bond_type      single, double, triple, aromatic, misc                               5
bond_stereo    none, Z, E, cis, trans, any (no misc: an unknown one is "any")      6
is_conjugated  false, true                                                          2
=============  ===================================================================  =====

The model reads them as one-hots (`one_hot`): each integer column becomes its width of 0/1
columns, side by side, 174 per atom and 13 per bond, so a linear layer on them is OGB's
``AtomEncoder`` / ``BondEncoder`` (a sum of one embedding per feature).

A SMILES RDKit cannot parse is refused with one line naming the file and line; RDKit's own
log is held back while parsing (``rdBase.BlockLogs``), so the library prints nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.errors import ConfigError

MISC = object()  # a vocabulary's "anything else" entry

ATOM_FEATURES: tuple[tuple[str, tuple], ...] = (
    ("atomic_num", (*range(1, 119), MISC)),
    ("chirality", ("CHI_UNSPECIFIED", "CHI_TETRAHEDRAL_CW", "CHI_TETRAHEDRAL_CCW",
                   "CHI_OTHER", MISC)),
    ("degree", (*range(11), MISC)),
    ("formal_charge", (*range(-5, 6), MISC)),
    ("num_hs", (*range(9), MISC)),
    ("num_radical_e", (*range(5), MISC)),
    ("hybridization", ("SP", "SP2", "SP3", "SP3D", "SP3D2", MISC)),
    ("is_aromatic", (False, True)),
    ("is_in_ring", (False, True)),
)
BOND_FEATURES: tuple[tuple[str, tuple], ...] = (
    ("bond_type", ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC", MISC)),
    ("bond_stereo", ("STEREONONE", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS",
                     "STEREOANY")),
    ("is_conjugated", (False, True)),
)
ATOM_WIDTHS = tuple(len(values) for _, values in ATOM_FEATURES)  # sum 174
BOND_WIDTHS = tuple(len(values) for _, values in BOND_FEATURES)  # sum 13
INSTALL_HINT = "pip install rdkit (or pip install -e '.[chem]' from a checkout)"


def require_rdkit(why: str = "reading SMILES") -> Any:
    """RDKit's ``Chem`` module, or a ConfigError naming the extra to install."""
    try:
        from rdkit import Chem
    except ImportError:
        raise ConfigError(f"{why} needs RDKit, the optional 'chem' extra, which is not "
                          f"installed: {INSTALL_HINT}") from None
    return Chem


def index(values: tuple, value: Any) -> int:
    """`value`'s position in a vocabulary; outside it, the last entry (misc, or OGB's last)."""
    for k, v in enumerate(values):
        if v is not MISC and v == value:
            return k
    return len(values) - 1


def atom_ints(atom: Any) -> list[int]:
    """One RDKit atom's 9 integer features (the table in the module docstring)."""
    raw = (atom.GetAtomicNum(), str(atom.GetChiralTag()), atom.GetTotalDegree(),
           atom.GetFormalCharge(), atom.GetTotalNumHs(), atom.GetNumRadicalElectrons(),
           str(atom.GetHybridization()), atom.GetIsAromatic(), atom.IsInRing())
    return [index(values, v) for (_, values), v in zip(ATOM_FEATURES, raw)]


def bond_ints(bond: Any) -> list[int]:
    """One RDKit bond's 3 integer features."""
    raw = (str(bond.GetBondType()), str(bond.GetStereo()), bond.GetIsConjugated())
    return [index(values, v) for (_, values), v in zip(BOND_FEATURES, raw)]


def smiles_graph(smiles: str, chem: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(atoms (A, 9) int64, bonds (B, 2) int64 atom ids from 0, bond features (B, 3) int64)
    of one SMILES, or None when RDKit cannot parse it (or it has no atoms)."""
    from rdkit import rdBase

    blocker = rdBase.BlockLogs()  # RDKit's parse errors would go to stderr
    try:
        mol = chem.MolFromSmiles(smiles)
    finally:
        del blocker
    if mol is None or mol.GetNumAtoms() == 0:
        return None
    atoms = np.array([atom_ints(a) for a in mol.GetAtoms()], dtype=np.int64)
    bonds = np.array([[b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in mol.GetBonds()],
                     dtype=np.int64).reshape(-1, 2)
    feats = np.array([bond_ints(b) for b in mol.GetBonds()], dtype=np.int64).reshape(-1, 3)
    return atoms, bonds, feats


def one_hot(ints: np.ndarray, widths: tuple[int, ...]) -> np.ndarray:
    """(R, sum(widths)) float32: integer column j as a one-hot `widths[j]` wide, side by side."""
    offsets = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    out = np.zeros((ints.shape[0], int(sum(widths))), dtype=np.float32)
    if ints.size:
        out[np.arange(ints.shape[0])[:, None], ints + offsets] = 1.0
    return out
