"""Your own graph, named in a config: edge list, features, labels, and a split from node files
or drawn at random.

The config shape this serves (``dataset`` section; paths relative to the config's folder)::

    dataset:
      name: csv
      edges: examples/two-communities/edges.csv      # "source,target[,weight]" per line
      features: examples/two-communities/features.csv  # optional: .csv, .npy or .npz
      labels: examples/two-communities/labels.csv    # optional: one class id per line, -1: none
      train_nodes: examples/two-communities/train.csv  # optional, with val_nodes and
      val_nodes: examples/two-communities/val.csv      # test_nodes: one node id per line
      test_nodes: examples/two-communities/test.csv
      directed: false   # false: add every reverse edge (the usual GCN input)
      split: public     # public: the three node files; full: their val and test, every other
                        # labelled node trains; random: num_train_per_class / num_val /
                        # num_test drawn with seed

File formats and their one-line errors (``<file> line <n>: ...``) are those of
`mgsparse.data.files`; node files follow the label format (text or ``.npy``). Errors in these
files are `InputFileError`: a DataError with the exit code of a usage error (2).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from mgsparse.data.files import load_edge_list, load_user_graph, read_int_column
from mgsparse.data.graph import Graph
from mgsparse.data.transforms import (
    SPLIT_OPTIONS,
    SPLITS,
    apply_normalize,
    full_split,
    index_to_mask,
)
from mgsparse.errors import ConfigError, DataError, InputFileError

FILE_KEYS = ("edges", "features", "labels", "train_nodes", "val_nodes", "test_nodes")
NODE_FILE_KEYS = ("train_nodes", "val_nodes", "test_nodes")
OPTION_KEYS = ("directed", "split", "normalize_features", *SPLIT_OPTIONS)
# `datasets info FOLDER`: the file of each key, by stem; the first suffix found wins.
FOLDER_NAMES = {"edges": "edges", "features": "features", "labels": "labels",
                "train_nodes": "train", "val_nodes": "val", "test_nodes": "test"}
SUFFIXES = (".csv", ".tsv", ".txt", ".npy", ".npz")


def load_csv_graph(edges: str | Path, features: str | Path | None = None,
                   labels: str | Path | None = None, *, train_nodes: str | Path | None = None,
                   val_nodes: str | Path | None = None, test_nodes: str | Path | None = None,
                   directed: bool = False, split: str = "public",
                   normalize_features: bool = False, base_dir: str | Path | None = None,
                   name: str | None = None, seed: int = 0, **split_sizes) -> Graph:
    """A `Graph` from the user's files (see the module docstring for the keys).

    ``split_sizes`` are `random_split`'s ``num_train_per_class``, ``num_val``, ``num_test``
    (split 'random' only; missing ones fit the graph, see `default_split_sizes`). Relative
    paths are read from ``base_dir`` (the config file's folder), else the working folder.
    """
    paths = _resolve(base_dir, edges=edges, features=features, labels=labels,
                     train_nodes=train_nodes, val_nodes=val_nodes, test_nodes=test_nodes)
    node_files = _node_files(paths, split)
    unknown = sorted(set(split_sizes) - set(SPLIT_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown split option(s) {', '.join(unknown)}; expected "
                          f"{', '.join(SPLIT_OPTIONS)}")
    sizes = {k: v for k, v in split_sizes.items() if v is not None} if split == "random" else {}
    try:
        graph = load_user_graph(paths["edges"], paths["features"], paths["labels"],
                                name=name or Path(paths["edges"]).stem,
                                undirected=not directed, seed=seed, split=not node_files,
                                **sizes)
        if node_files:
            train, val, test = split_from_files(node_files, graph.y)
            if split == "full":
                train, val, test = full_split(graph.y, val, test)
            graph = replace(graph, train_mask=train, val_mask=val, test_mask=test)
    except DataError as exc:  # the user's own file: a usage error, as a bad config value is
        raise InputFileError(str(exc)) from None
    return apply_normalize(graph) if normalize_features else graph


def _resolve(base_dir: str | Path | None, **paths) -> dict[str, Path | None]:
    base = Path(base_dir) if base_dir is not None else None
    return {key: None if p is None else (base / p if base is not None else Path(p))
            for key, p in paths.items()}


def _node_files(paths: dict[str, Path | None], split: str) -> list[Path]:
    """The three node files when the split reads them; ConfigError naming what is missing."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    given = [key for key in NODE_FILE_KEYS if paths[key] is not None]
    if given and len(given) < 3:
        missing = [key for key in NODE_FILE_KEYS if key not in given]
        raise ConfigError(f"dataset.{given[0]} is set but dataset.{missing[0]} is not: give "
                          f"all three of {', '.join(NODE_FILE_KEYS)}, or none")
    if split == "random":
        return []
    if not given:
        raise ConfigError(f"dataset.split {split} needs the node files "
                          f"{', '.join(NODE_FILE_KEYS)}; without them use split: random")
    if paths["labels"] is None:
        raise ConfigError(f"dataset.split {split} reads the labels of the nodes in "
                          f"{', '.join(NODE_FILE_KEYS)}, but dataset.labels is not set")
    return [paths[key] for key in NODE_FILE_KEYS]


# --- node files ----------------------------------------------------------------------------------

def load_node_ids(path: str | Path, num_nodes: int, one: str = "node"
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """(node ids (K,) int64, their text line numbers or None for ``.npy``); every id in
    ``[0, num_nodes)`` and none repeated. `one` names an item in errors: the graphs of a set
    are listed the same way (``one="graph"``)."""
    path = Path(path)
    ids, lines = read_int_column(path, f"{one} ids", f"{one} id")
    bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
    if bad.size:
        raise DataError(f"{_where(path, lines, bad[0])}: {one} {ids[bad[0]]} out of range "
                        f"[0, {num_nodes})")
    order = np.argsort(ids, kind="stable")
    repeat = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if repeat.size:
        at = order[repeat[0] + 1]
        raise DataError(f"{_where(path, lines, at)}: {one} {ids[at]} is listed twice")
    return ids, lines


def load_pairs(path: str | Path, num_nodes: int) -> np.ndarray:
    """(2, P) int64 node pairs to score, one ``src dst`` (or ``src,dst``) a line as in an edge
    list (`load_edge_list`: ``#`` comments, every id in ``[0, num_nodes)``). The user's own
    file: its errors are usage errors (exit 2)."""
    try:
        pairs, weights = load_edge_list(path, num_nodes)
    except DataError as exc:
        raise InputFileError(str(exc)) from None
    if weights is not None:
        raise InputFileError(f"{path}: 3 columns, expected 2 (src, dst) a line")
    return pairs


def split_from_files(files: list[Path], y: np.ndarray):
    """(train, val, test) masks from three node files: disjoint, and only labelled nodes."""
    masks, owner = [], np.full(y.size, -1)
    for k, path in enumerate(files):
        ids, lines = load_node_ids(path, y.size)
        clash = np.flatnonzero(owner[ids] >= 0)
        if clash.size:
            other = files[owner[ids[clash[0]]]].name
            raise DataError(f"{_where(path, lines, clash[0])}: node {ids[clash[0]]} is also "
                            f"in {other}")
        unlabelled = np.flatnonzero(y[ids] < 0)
        if unlabelled.size:
            raise DataError(f"{_where(path, lines, unlabelled[0])}: node "
                            f"{ids[unlabelled[0]]} has no label")
        owner[ids] = k
        masks.append(index_to_mask(ids, y.size))
    return tuple(masks)


def _where(path: Path, lines: np.ndarray | None, row: int) -> str:
    return f"{path} line {lines[row]}" if lines is not None else f"{path} entry {row}"


# --- from a folder or a config section -------------------------------------------------------

def csv_files(path: str | Path) -> dict[str, Path]:
    """The files `load_csv_graph` takes, by key: a single edge-list file, or a folder holding
    ``edges.*`` and optionally ``features.*``, ``labels.*``, ``train.*``, ``val.*``, ``test.*``."""
    path = Path(path)
    if path.is_file():
        return {"edges": path}
    if not path.is_dir():
        try:
            path.stat()
        except OSError as exc:  # a symlink loop, a dangling link, a missing path
            raise InputFileError(f"{path}: {exc.strerror or exc}") from None
        return {"edges": path}  # a pipe or a device: the reader refuses it by name
    found = {}
    for key, stem in FOLDER_NAMES.items():
        hits = [path / f"{stem}{s}" for s in SUFFIXES if (path / f"{stem}{s}").is_file()]
        if hits:
            found[key] = hits[0]
    if "edges" not in found:
        raise InputFileError(f"{path}: no edges.csv (or .tsv, .txt) in this folder")
    return found


def load_csv_path(path: str | Path, directed: bool = False) -> Graph:
    """`load_csv_graph` over `csv_files(path)`: the files' own split when all three node files
    are there, else a random one sized to the graph."""
    files = csv_files(path)
    split = "public" if all(key in files for key in NODE_FILE_KEYS) else "random"
    name = Path(path).name if Path(path).is_dir() else None
    return load_csv_graph(**files, split=split, directed=directed, name=name)


def config_kwargs(section) -> dict:
    """`load_csv_graph`'s keyword arguments from a config's ``dataset`` section (any object
    with these attributes: this leaf module does not import the config)."""
    return {key: getattr(section, key) for key in (*FILE_KEYS, *OPTION_KEYS)
            if hasattr(section, key)}
