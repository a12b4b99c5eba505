"""Molecule sets for graph regression: the RDKit book's solubility SDF files, MoleculeNet's
FreeSolv (SMILES), and the user's own SDF or CSV of SMILES: download -> check -> parse, as a
`MoleculeSet`.

==========  =========  ===================================  ========  ===================
name        molecules  files                                target    unit
==========  =========  ===================================  ========  ===================
solubility  1,282      solubility.train.sdf (1,025) and     SOL       log S (S in mol/L)
                       solubility.test.sdf (257): the split
freesolv    642        freesolv.csv (SMILES, needs RDKit)   expt      kcal/mol (hydration
                                                                      free energy)
molecules   any        ``dataset.path``: .sdf, or .csv      ``dataset.target``
==========  =========  ===================================  ========  ===================

The solubility files also carry ``SOL_classification`` (``(A) low``, ``(B) medium``,
``(C) high``: 417 / 402 / 206 in the training file), read as a class target with
``dataset.target: SOL_classification``. Features: an SDF's atoms and bonds as
`sdf_io.atom_features` and `sdf_io.bond_features` say (the element vocabulary is the training
file's: solubility's train file, or the user's whole file); SMILES through RDKit with OGB's
vocabulary, as one-hots (`smiles`).

Where the files come from: ``dataset.url``, else ``MGSPARSE_MOLECULES_URL``, a URL or a folder
holding the files under the names above; else each file's public home (RDKit's repository,
``Docs/Book/data/``, and MoleculeNet's FreeSolv ``SAMPL.csv`` on deepchem's mirror, saved as
``freesolv.csv``).

Trust. Nobody publishes checksums of these files (and a public download may differ from a
mirror's copy: line endings), so they are trusted on first use, as the TU sets are: the first
copy is parsed and its molecule count checked before its SHA-256 is written beside it
(``<file>.sha256``); from then on the cached file, and any new download, must match it. A
damaged download is a `DataError` (exit 1), a bad file in the user's own folder or
``dataset.path`` an `InputFileError` (exit 2), each one line naming the file and molecule;
nothing of a refused file is kept.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mgsparse.data import download as dl
from mgsparse.data.cache import folder_status, resolve_root
from mgsparse.data.moleculeset import MoleculeSet, from_bonds, targets_from_text
from mgsparse.data.sources import Source, sdf_io, smiles
from mgsparse.errors import ConfigError, DataError, InputFileError

URL_ENV = "MGSPARSE_MOLECULES_URL"
RDKIT_BOOK = "https://raw.githubusercontent.com/rdkit/rdkit/master/Docs/Book/data/"
PUBLIC = {"solubility.train.sdf": RDKIT_BOOK + "solubility.train.sdf",
          "solubility.test.sdf": RDKIT_BOOK + "solubility.test.sdf",
          "freesolv.csv": "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/SAMPL.csv"}
FETCH_OPTIONS = {"timeout": (10.0, 60.0), "retries": 3, "backoff": 1.0}
MIRROR_HINT = (f"to use a mirror, set {URL_ENV} (or the config key dataset.url) to a URL or a "
               "folder holding the files")
DEFAULT_SMILES_COLUMN = "smiles"


@dataclass(frozen=True)
class MoleculeSpec:
    """One downloadable set: its files (the first the training part), their molecule counts."""

    name: str
    files: tuple[str, ...]
    counts: tuple[int, ...]
    target: str  # the default target
    unit: str
    max_bytes: int = 16 << 20  # the real files: 1.4 MB, 246 kB, 32 kB


DATASETS: dict[str, MoleculeSpec] = {s.name: s for s in (
    MoleculeSpec("solubility", ("solubility.train.sdf", "solubility.test.sdf"), (1_025, 257),
                 "SOL", "log S"),
    MoleculeSpec("freesolv", ("freesolv.csv",), (642,), "expt", "kcal/mol"),
)}


def check_name(name: str) -> MoleculeSpec:
    spec = DATASETS.get(str(name).lower())
    if spec is None:
        raise ConfigError(f"unknown molecule set {name!r}; expected one of {', '.join(DATASETS)}")
    return spec


def raw_path(name: str, filename: str, root: str | Path | None = None) -> Path:
    return resolve_root(root) / "molecules" / check_name(name).name / "raw" / filename


# --- download: trust on first use -------------------------------------------------------------

def download(name: str, root: str | Path | None = None, url: str | None = None,
             progress: dl.Progress | None = None) -> list[Path]:
    """Every file of `name` checked in the cache (see the module docstring); their paths."""
    spec = check_name(name)
    base = dl.resolve_url(url, URL_ENV, "") or None  # "": each file's own public home
    return [_download_one(spec, filename, count, base, root, progress)
            for filename, count in zip(spec.files, spec.counts)]


def _download_one(spec: MoleculeSpec, filename: str, count: int, base: str | None,
                  root: str | Path | None, progress: dl.Progress | None) -> Path:
    dest = raw_path(spec.name, filename, root)
    source = dl.source_of(base, filename) if base else PUBLIC[filename]
    recorded = dl.recorded_sha256(dest)
    with dl.mirror_hint(MIRROR_HINT):
        if recorded is not None:
            return dl.fetch(source, dest, recorded, progress=progress, max_bytes=spec.max_bytes,
                            **FETCH_OPTIONS)
        if not dest.is_file():
            dl.fetch_unpinned(source, dest, spec.max_bytes, progress, **FETCH_OPTIONS)
    try:
        found = _count_molecules(dest)
        if found != count:
            raise DataError(f"{dest.name} from {source}: {found:,} molecules, expected "
                            f"{count:,}")
    except DataError as exc:
        dest.unlink(missing_ok=True)  # never keep, and never trust, a damaged first copy
        if base is None or dl.is_remote(base):
            raise
        raise InputFileError(str(exc)) from None  # the user's own folder: theirs to fix
    dl.record_sha256(dest)
    return dest


def _count_molecules(path: Path) -> int:
    """Molecules in a first download, read whole (an SDF parsed, a CSV's rows counted: its
    SMILES are parsed at load, where RDKit is needed anyway)."""
    if path.suffix == ".sdf":
        return len(sdf_io.read_sdf(path))
    header, rows = read_csv(path)
    if DEFAULT_SMILES_COLUMN not in header:
        raise DataError(f"{path}: no column {DEFAULT_SMILES_COLUMN!r} (columns: "
                        f"{', '.join(header)})")
    return len(rows)


# --- parse ------------------------------------------------------------------------------------

def sdf_set(name: str, paths: list[Path], target: str, unit: str = "") -> MoleculeSet:
    """The molecules of SDF files (the first the training part: its elements make the
    vocabulary; with more than one file, the last is the fixed test part)."""
    parts = [sdf_io.read_sdf(p) for p in paths]
    records = [r for part in parts for r in part]
    places = [f"{p}: molecule {k + 1} (line {r.line})" for p, part in zip(paths, parts)
              for k, r in enumerate(part)]
    first_missing = next((r for r in records if target not in r.properties), records[0])
    y, classes = targets_from_text([r.properties.get(target) for r in records], places,
                                   target, sorted(first_missing.properties))
    elements = sdf_io.element_vocabulary(parts[0])
    x = sdf_io.atom_features(records, elements)
    bonds = np.concatenate([r.bonds for r in records]).reshape(-1, 2)
    orders = np.concatenate([r.orders for r in records])
    test = None
    if len(parts) > 1:
        test = np.repeat(np.arange(len(parts)) == len(parts) - 1, [len(p) for p in parts])
    return from_bonds(name, x, np.array([len(r.symbols) for r in records]), bonds,
                      sdf_io.bond_features(orders), np.array([len(r.orders) for r in records]),
                      y, target=target, unit=unit, classes=classes,
                      names=tuple(r.name for r in records), test_mask=test, elements=elements)


def read_csv(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(line number, cells)]) of a comma-separated file with a header row."""
    lines = sdf_io.read_text(path)
    reader = csv.reader(lines)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise DataError(f"{path}: empty file (expected a header row)") from None
    rows = [(reader.line_num, row) for row in reader if any(c.strip() for c in row)]
    return header, rows


def smiles_set(name: str, path: Path, target: str, smiles_column: str = DEFAULT_SMILES_COLUMN,
               unit: str = "") -> MoleculeSet:
    """The molecules of a CSV with a SMILES column and a target column, through RDKit."""
    header, rows = read_csv(path)
    for column in (smiles_column, target):
        if column not in header:
            raise DataError(f"{path}: no column {column!r} (columns: {', '.join(header)})")
    s_col, t_col = header.index(smiles_column), header.index(target)
    places = [f"{path} line {line}" for line, _ in rows]
    cells = [(row[s_col].strip() if s_col < len(row) else "",
              row[t_col] if t_col < len(row) else None) for _, row in rows]
    y, classes = targets_from_text([t for _, t in cells], places, target)
    chem = smiles.require_rdkit(f"{path}: reading SMILES")
    graphs = []
    for place, (text, _) in zip(places, cells):
        graph = smiles.smiles_graph(text, chem) if text else None
        if graph is None:
            raise DataError(f"{place}: SMILES {text!r} cannot be parsed by RDKit")
        graphs.append(graph)
    atoms, bonds, feats = (np.concatenate([g[k] for g in graphs]) for k in range(3))
    return from_bonds(name, smiles.one_hot(atoms, smiles.ATOM_WIDTHS),
                      np.array([len(g[0]) for g in graphs]), bonds.reshape(-1, 2),
                      smiles.one_hot(feats.reshape(-1, 3), smiles.BOND_WIDTHS),
                      np.array([len(g[1]) for g in graphs]), y, target=target, unit=unit,
                      classes=classes, names=tuple(t for t, _ in cells))


# --- load -------------------------------------------------------------------------------------

def load(name: str, root: str | Path | None = None, url: str | None = None,
         target: str | None = None, smiles_column: str | None = None,
         progress: dl.Progress | None = None) -> MoleculeSet:
    """A downloadable molecule set, checked and parsed (module docstring)."""
    spec = check_name(name)
    paths = download(spec.name, root, url, progress)
    target = target or spec.target
    unit = spec.unit if target == spec.target else ""
    if paths[0].suffix == ".sdf":
        return sdf_set(spec.name, paths, target, unit)
    return smiles_set(spec.name, paths[0], target, smiles_column or DEFAULT_SMILES_COLUMN, unit)


def load_user(path: str | Path, target: str | None, smiles_column: str | None = None
              ) -> MoleculeSet:
    """The user's own molecules: an SDF (``> <target>`` items) or a CSV of SMILES and a target
    column. Their errors are usage errors (exit 2)."""
    if target is None:
        raise ConfigError("dataset.target is not set: name the property (SDF) or column (CSV) "
                          "the model learns to predict")
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such file (dataset.path)")
    try:
        if path.suffix.lower() in (".sdf", ".sd", ".mol"):
            return sdf_set(path.stem, [path], target)
        return smiles_set(path.stem, path, target, smiles_column or DEFAULT_SMILES_COLUMN)
    except DataError as exc:
        raise InputFileError(str(exc)) from None


def cache_status(name: str, root: str | Path | None = None) -> dict:
    spec = check_name(name)
    files = [raw_path(name, f, root) for f in spec.files]
    return folder_status(files[0].parent.parent,
                         all(f.is_file() and dl.recorded_sha256(f) for f in files))


class Molecules(Source):
    """The catalog's ``molecules`` source: the sets above, or the user's file
    (``name: molecules`` with ``dataset.path``)."""

    name = "molecules"
    reads = ("root", "url", "path", "target", "smiles_column")

    def options(self, section) -> dict:
        return {key: getattr(section, key, None) for key in self.reads}

    def load(self, dataset, *, root=None, url=None, path=None, target=None,
             smiles_column=None, progress=None, split="public", normalize_features=False,
             **options) -> MoleculeSet:
        if dataset not in DATASETS:
            if path is None:
                raise ConfigError("dataset.name molecules reads your own file: dataset.path "
                                  "must name an .sdf file or a .csv of SMILES")
            return load_user(path, target, smiles_column)
        if path is not None:
            raise ConfigError(f"dataset.path is read for your own molecules (dataset.name: "
                              f"molecules), not {dataset!r}")
        return load(dataset, root, url, target, smiles_column, progress)

    def download(self, dataset, *, root=None, url=None, progress=None) -> str:
        if dataset not in DATASETS:
            return f"{dataset} reads your own file (dataset.path); nothing to download"
        paths = download(dataset, root=root, url=url, progress=progress)
        return (f"{dataset}: {', '.join(p.name for p in paths)} checked (SHA-256 recorded) in "
                f"{paths[0].parent}")

    def cache_status(self, dataset, root=None) -> dict | None:
        return cache_status(dataset, root) if dataset in DATASETS else None
