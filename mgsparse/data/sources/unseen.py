"""Molecules a trained model has not seen (`mgsparse predict --molecules FILE`), featurised as
the molecules it trained on were, so their columns mean what the model learnt.

The file is an SDF (``.sdf``, ``.sd``, ``.mol``), a ``.smi`` file (one SMILES a line, then
optionally its name after white space, as RDKit writes them) or a ``.csv`` with a header and a
SMILES column (`dataset.smiles_column` of the run, ``smiles`` by default; a ``name`` column,
if there is one, names the rows). No target is read.

The featurisation follows the training set (`MoleculeSet.elements`):

- a model trained on an SDF (solubility) reads `sdf_io.atom_features` over the *training*
  file's elements (an element outside them takes the "other" column) and one-hot bond orders.
  An SDF is read as it is; SMILES go through RDKit, kekulised (the single and double bonds an
  SDF writes for an aromatic ring), hydrogens implicit, as the training SDF's are;
- a model trained on SMILES (FreeSolv) reads OGB's vocabulary, so it needs SMILES: an SDF is
  refused, since the bond stereo and hybridisation OGB's columns hold are not in the file.

Every refusal is one line naming the file and the molecule or line (`InputFileError`, exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.data.moleculeset import MoleculeSet, from_bonds
from mgsparse.data.sources import sdf_io, smiles
from mgsparse.data.sources.molecules import read_csv
from mgsparse.errors import DataError, InputFileError

SDF_SUFFIXES = (".sdf", ".sd", ".mol")
NAME_COLUMN = "name"


def read_unseen(path: str | Path, like: MoleculeSet, smiles_column: str = "smiles"
                ) -> MoleculeSet:
    """The molecules of `path` with `like`'s features (module docstring), y all 0."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such file (--molecules)")
    try:
        if path.suffix.lower() in SDF_SUFFIXES:
            if not like.elements:
                raise DataError(f"{path}: this model read SMILES with OGB's features; give "
                                "it a .smi or .csv of SMILES, not an SDF")
            return _from_records(path.stem, sdf_io.read_sdf(path), like.elements)
        names, texts, places = _smiles_rows(path, smiles_column)
        chem = smiles.require_rdkit(f"{path}: reading SMILES")
        if like.elements:
            records = [_as_record(text, chem, place) for text, place in zip(texts, places)]
            for record, name in zip(records, names):
                record.title = name
            return _from_records(path.stem, records, like.elements)
        return _ogb(path.stem, texts, names, places, chem)
    except DataError as exc:
        raise InputFileError(str(exc)) from None


def _smiles_rows(path: Path, column: str) -> tuple[list[str], list[str], list[str]]:
    """(names, SMILES, places) of a .smi file or a CSV of SMILES (module docstring)."""
    if path.suffix.lower() == ".csv":
        header, rows = read_csv(path)
        if column not in header:
            raise DataError(f"{path}: no column {column!r} (columns: {', '.join(header)})")
        at = header.index(column)
        named = header.index(NAME_COLUMN) if NAME_COLUMN in header else at
        cells = [(line, row[at].strip() if at < len(row) else "",
                  row[named].strip() if named < len(row) else "") for line, row in rows]
    else:
        lines = sdf_io.read_text(path)
        cells = [(k, *(line.split(None, 1) + [""])[:2]) for k, line in
                 enumerate(lines, start=1) if line.strip() and not line.startswith("#")]
    if not cells:
        raise DataError(f"{path}: no molecules")
    places = [f"{path} line {line}" for line, _, _ in cells]
    return [n.strip() or s for _, s, n in cells], [s for _, s, _ in cells], places


def _parse(text: str, chem: Any, place: str) -> Any:
    graph = smiles.smiles_graph(text, chem) if text else None
    if graph is None:
        raise DataError(f"{place}: SMILES {text!r} cannot be parsed by RDKit")
    return graph


def _as_record(text: str, chem: Any, place: str) -> sdf_io.SdfRecord:
    """One SMILES as the atoms and kekulised bonds an SDF would hold."""
    _parse(text, chem, place)  # refuses what RDKit cannot read, its messages silenced
    mol = chem.MolFromSmiles(text)
    chem.Kekulize(mol, clearAromaticFlags=True)
    bonds = np.array([[b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in mol.GetBonds()],
                     dtype=np.int64).reshape(-1, 2)
    orders = np.array([int(b.GetBondTypeAsDouble()) for b in mol.GetBonds()], dtype=np.int64)
    return sdf_io.SdfRecord(text, 0, [a.GetSymbol() for a in mol.GetAtoms()],
                            np.array([a.GetFormalCharge() for a in mol.GetAtoms()], np.int64),
                            bonds, orders, np.zeros(len(orders), np.int64))


def _from_records(name: str, records: list[sdf_io.SdfRecord],
                  elements: tuple[str, ...]) -> MoleculeSet:
    x = sdf_io.atom_features(records, elements)
    bonds = np.concatenate([r.bonds for r in records]).reshape(-1, 2)
    orders = np.concatenate([r.orders for r in records])
    return from_bonds(name, x, np.array([len(r.symbols) for r in records]), bonds,
                      sdf_io.bond_features(orders), np.array([len(r.orders) for r in records]),
                      np.zeros(len(records)), target="", names=tuple(r.name for r in records),
                      elements=elements)


def _ogb(name: str, texts: list[str], names: list[str], places: list[str],
         chem: Any) -> MoleculeSet:
    graphs = [_parse(text, chem, place) for text, place in zip(texts, places)]
    atoms, bonds, feats = (np.concatenate([g[k] for g in graphs]) for k in range(3))
    return from_bonds(name, smiles.one_hot(atoms, smiles.ATOM_WIDTHS),
                      np.array([len(g[0]) for g in graphs]), bonds.reshape(-1, 2),
                      smiles.one_hot(feats.reshape(-1, 3), smiles.BOND_WIDTHS),
                      np.array([len(g[1]) for g in graphs]), np.zeros(len(graphs)),
                      target="", names=tuple(names))
