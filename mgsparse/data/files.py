"""Graphs from the user's own files: an edge list, optional features, optional labels.

Formats:

- edge list: CSV/TSV/whitespace text, one edge ``source target [weight]`` per line, node
  ids are integers from 0; lines starting with ``#`` and blank lines are skipped; every
  line has the same number of columns (2, or 3 with a weight).
- features: ``.npy`` (2-D array), ``.npz`` (a scipy sparse matrix saved by
  ``scipy.sparse.save_npz``, or one dense array, or an array named ``x``/``features``), or
  CSV text with one row of numbers per node.
- labels: ``.npy`` (1-D integers) or text with one integer per line (node 0 first);
  ``-1`` means "no label".

Every malformed input raises a DataError naming the file and, for text, the line (for
``.npy``/``.npz`` arrays, the row): unreadable files, wrong shapes, NaN or infinite features
and weights, and node ids too large to be meant (see `load_edge_list`).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mgsparse.data.checks import load_sparse_npz
from mgsparse.data.graph import Graph
from mgsparse.data.transforms import default_split_sizes, random_split
from mgsparse.errors import DataError, InputFileError

_FIELD_SEPARATOR = re.compile(r"\s*[,;\t]\s*|\s+")
# Without features or labels to give the node count, ids must lie below the larger of these:
# E edges touch at most 2E nodes, and a small graph may keep a few isolated ids besides.
MIN_INFERRED_NODES = 1 << 16
# What np.load raises on a truncated, emptied or foreign .npy/.npz (a huge bogus header: Memory).
_NUMPY_FILE_ERRORS = (OSError, ValueError, EOFError, KeyError, TypeError, MemoryError,
                      zipfile.BadZipFile)


# --- text tables --------------------------------------------------------------------------------

def _read_table(path: Path, widths: tuple[int, ...] | None,
                what: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, line_numbers): a 2-D str array of the data lines and their 1-based numbers.

    All rows must have the width of the first, which must be one of ``widths`` (any if None).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:  # a folder, no permission, an I/O error
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a UTF-8 text file (expected {what})") from None
    numbered = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
    numbered = [(n, line) for n, line in numbered if line and not line.startswith("#")]
    if not numbered:
        raise DataError(f"{path}: no data lines (expected {what})")
    fields = [_FIELD_SEPARATOR.split(line) for _, line in numbered]
    line_numbers = np.array([n for n, _ in numbered], dtype=np.int64)
    counts = np.fromiter(map(len, fields), dtype=np.int64, count=len(fields))
    width = int(counts[0])
    if widths is not None and width not in widths:
        raise DataError(f"{path} line {line_numbers[0]}: {width} columns, expected {what}")
    bad = np.flatnonzero(counts != width)
    if bad.size:
        row = bad[0]
        raise DataError(f"{path} line {line_numbers[row]}: {counts[row]} columns, expected "
                        f"{width} like line {line_numbers[0]}")
    return np.array(fields, dtype=str), line_numbers


def _convert(cells: np.ndarray, dtype, path: Path, line_numbers: np.ndarray, what: str):
    """``cells.astype(dtype)``; on failure, find the first bad cell to name its line."""
    try:
        return cells.astype(dtype)
    except (ValueError, OverflowError):
        python_type = int if np.issubdtype(dtype, np.integer) else float
        kind = "an integer" if python_type is int else "a number"
        for row, values in enumerate(cells.reshape(cells.shape[0], -1)):
            for value in values:
                where = f"{path} line {line_numbers[row]}"
                try:
                    np.array(python_type(value)).astype(dtype)
                except ValueError:
                    raise DataError(f"{where}: {what} {str(value)!r} is not {kind}") from None
                except OverflowError:
                    raise DataError(f"{where}: {what} {str(value)} is out of range for "
                                    f"{np.dtype(dtype).name}") from None
        raise DataError(f"{path}: values out of range for {np.dtype(dtype).name}") from None


def _require_finite(values: np.ndarray | sp.csr_matrix, path: Path,
                    line_numbers: np.ndarray | None, what: str) -> None:
    """A DataError naming the first row (its text line, or its index in an array file) that
    holds a NaN or an infinity: training on one would only "diverge" many epochs later."""
    if sp.issparse(values):
        bad = np.flatnonzero(~np.isfinite(values.data))
        rows, found = np.searchsorted(values.indptr, bad, side="right") - 1, values.data[bad]
    else:
        flat = values.reshape(values.shape[0], -1)
        rows, cols = np.nonzero(~np.isfinite(flat))  # row-major: rows[0] is the first bad row
        found = flat[rows, cols]
    if not rows.size:
        return
    row, value = int(rows[0]), found[0]
    where = f"line {line_numbers[row]}" if line_numbers is not None else f"row {row}"
    raise DataError(f"{path} {where}: {what} {value} is not a finite float32 (NaN, infinity "
                    "or beyond 3.4e38); fix or remove it")


# --- the three loaders --------------------------------------------------------------------------

def load_edge_list(path: str | Path, num_nodes: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """(edge_index (2, E) int64 as written, weights (E,) float32 or None).

    With ``num_nodes`` given every id must lie in ``[0, num_nodes)``. Otherwise the node
    count is the largest id + 1, and ids must lie below ``max(2 * E, MIN_INFERRED_NODES)``:
    E edges touch at most 2E nodes, so an id beyond that is a typo or a foreign numbering
    (a node id of 10^18 would otherwise allocate 10^18 nodes). Weights must be finite.
    """
    path = Path(path)
    table, lines = _read_table(path, (2, 3), "2 columns (source, target) or 3 (with weight)")
    ids = _convert(table[:, :2], np.int64, path, lines, "node id")
    if num_nodes is not None:
        limit, wanted = num_nodes, f"[0, {num_nodes})"
    else:
        limit = max(2 * ids.shape[0], MIN_INFERRED_NODES)
        wanted = (f"in [0, {limit:,}) when no features or labels give the node count "
                  f"(at most 2 per edge, or {MIN_INFERRED_NODES:,}); number the nodes from 0 "
                  "or give features or labels")
    bad = np.flatnonzero(((ids < 0) | (ids >= limit)).any(axis=1))
    if bad.size:
        row = bad[0]
        raise DataError(f"{path} line {lines[row]}: node id out of range in edge "
                        f"{ids[row, 0]} -> {ids[row, 1]} (ids must be {wanted})")
    weights = None
    if table.shape[1] == 3:
        with np.errstate(over="ignore"):  # an overflow to inf is reported just below
            weights = _convert(table[:, 2], np.float64, path, lines, "weight").astype(np.float32)
        _require_finite(weights, path, lines, "weight")
    return np.ascontiguousarray(ids.T), weights


def load_features(path: str | Path) -> sp.csr_matrix | np.ndarray:
    """(N, F) float32 features: CSR from a sparse ``.npz``, dense ndarray otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    lines = None
    if path.suffix == ".npy":
        x = _load_npy(path)
    elif path.suffix == ".npz":
        x = _load_npz(path)
    else:
        table, lines = _read_table(path, None, "one row of numbers per node")
        x = _convert(table, np.float64, path, lines, "feature")
    if x.ndim != 2:
        raise DataError(f"{path}: features must be 2-D (nodes x features), got shape {x.shape}")
    with np.errstate(over="ignore"):  # an overflow to inf is reported just below
        x = sp.csr_matrix(x, dtype=np.float32) if sp.issparse(x) else x.astype(np.float32)
    _require_finite(x, path, lines, "feature")  # after the cast: 1e39 overflows to inf
    return x


def load_labels(path: str | Path) -> np.ndarray:
    """(N,) int64 labels, ``-1`` for "no label"."""
    return _read_labels(Path(path))[0]


def read_int_column(path: Path, what: str, one: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(integers (K,) int64, their text line numbers or None for ``.npy``): a 1-D integer
    ``.npy``, or one integer a line; `what` names them in errors ("labels"), `one` one of
    them ("label")."""
    if path.suffix == ".npy":
        values, lines = _load_npy(path), None
        if values.ndim != 1 or values.dtype.kind not in "iu":
            raise DataError(f"{path}: {what} must be a 1-D integer array, got {values.dtype} "
                            f"{values.shape}")
    else:
        table, lines = _read_table(path, (1,), f"one {one} per line")
        values = _convert(table[:, 0], np.int64, path, lines, one)
    return values.astype(np.int64), lines


def _read_labels(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    y, lines = read_int_column(path, "labels", "label")
    bad = np.flatnonzero(y < -1)
    if bad.size:
        where = f" line {lines[bad[0]]}" if lines is not None else f" entry {bad[0]}"
        raise DataError(f"{path}{where}: label {y[bad[0]]} is negative (-1 means no label)")
    # Classes are numbered 0..K-1 with K at most the node count (one label per node); a larger
    # id would size the model's output layer by a typo.
    bad = np.flatnonzero(y >= y.size)
    if bad.size:
        where = f" line {lines[bad[0]]}" if lines is not None else f" entry {bad[0]}"
        raise DataError(f"{path}{where}: label {y[bad[0]]} is not below {y.size}, the number "
                        "of labels; number the classes 0, 1, 2, ...")
    return y.astype(np.int64), lines


def _load_npy(path: Path) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except _NUMPY_FILE_ERRORS as exc:  # includes "Object arrays cannot be loaded when ..."
        raise DataError(f"{path}: not a plain numeric .npy file "
                        f"({type(exc).__name__}: {exc})") from None
    if array.dtype.kind not in "biuf":
        raise DataError(f"{path}: expected numbers, found dtype {array.dtype}")
    return array


def _load_npz(path: Path) -> sp.spmatrix | np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as archive:
            keys = list(archive.keys())
            if "format" in keys and {"indptr", "row"} & set(keys):
                return load_sparse_npz(archive, path, InputFileError, finite=False)
            chosen = next((k for k in ("x", "features") if k in keys), None)
            if chosen is None and len(keys) == 1:
                chosen = keys[0]
            if chosen is None:
                raise DataError(f"{path}: holds {keys}; name the feature array 'x'")
            return archive[chosen]
    except _NUMPY_FILE_ERRORS as exc:
        raise DataError(f"{path}: not a readable .npz file ({type(exc).__name__}: "
                        f"{exc})") from None


# --- assembling a Graph -------------------------------------------------------------------------

def load_user_graph(edges: str | Path, features: str | Path | None = None,
                    labels: str | Path | None = None, *, num_nodes: int | None = None,
                    name: str | None = None, undirected: bool = True, seed: int = 0,
                    **split_kwargs) -> Graph:
    """A `Graph` from the user's files, with a seeded random split of the labelled nodes.

    The node count is ``num_nodes``, else the feature rows, else the label count, else the
    largest edge id + 1. Missing features become the identity (one-hot node ids); missing
    labels leave every node unlabelled (-1) and every mask empty. Self loops are dropped
    and repeated edges merged (the first weight wins); ``undirected`` adds each reverse
    edge. ``split_kwargs`` are `random_split`'s sizes (defaults: `default_split_sizes`).
    """
    x = load_features(features) if features is not None else None
    y, label_lines = _read_labels(Path(labels)) if labels is not None else (None, None)
    if num_nodes is None:
        num_nodes = x.shape[0] if x is not None else (y.size if y is not None else None)
    if x is not None and x.shape[0] != num_nodes:
        raise DataError(f"{features}: {x.shape[0]} feature rows for {num_nodes} nodes")
    if y is not None:
        _check_label_count(Path(labels), y, label_lines, num_nodes)
    edge_index, weights = load_edge_list(edges, num_nodes)
    if num_nodes is None:
        num_nodes = int(edge_index.max()) + 1 if edge_index.size else 0
    edge_index, weights = coalesce(edge_index, weights, num_nodes, undirected)
    if x is None:
        x = sp.identity(num_nodes, dtype=np.float32, format="csr")
    if y is None:
        y = np.full(num_nodes, -1, dtype=np.int64)
    masks = _split(y, seed, split_kwargs)
    return Graph(x=x, y=y, edge_index=edge_index, num_nodes=num_nodes,
                 num_classes=int(y.max()) + 1 if y.size else 0, train_mask=masks[0],
                 val_mask=masks[1], test_mask=masks[2], name=name or Path(edges).stem,
                 edge_weight=weights)


def _check_label_count(path: Path, y: np.ndarray, lines: np.ndarray | None,
                       num_nodes: int | None) -> None:
    if num_nodes is None or y.size == num_nodes:
        return
    if lines is None:
        raise DataError(f"{path}: {y.size} labels for {num_nodes} nodes")
    if y.size > num_nodes:
        raise DataError(f"{path} line {lines[num_nodes]}: label for node {num_nodes}, but "
                        f"the graph has {num_nodes} nodes ({y.size} labels)")
    raise DataError(f"{path} line {lines[-1]}: last label is for node {y.size - 1}, but the "
                    f"graph has {num_nodes} nodes")


def coalesce(edge_index: np.ndarray, weights: np.ndarray | None, num_nodes: int,
             undirected: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Sorted by (source, target), self loops dropped, repeats merged (first weight wins)."""
    row, col = edge_index
    if undirected:
        row, col = np.concatenate([row, col]), np.concatenate([col, row])
        weights = None if weights is None else np.concatenate([weights, weights])
    keep = np.flatnonzero(row != col)
    keys = row[keep] * num_nodes + col[keep]
    order = np.argsort(keys, kind="stable")  # stable: the first occurrence leads its run
    sorted_keys = keys[order]
    first = np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]])
    chosen = keep[order[first]]
    merged = np.stack([row[chosen], col[chosen]]).astype(np.int64)
    return merged, (None if weights is None else weights[chosen])


def _split(y: np.ndarray, seed: int, split_kwargs: dict):
    if not (y >= 0).any():
        empty = np.zeros(y.size, dtype=bool)
        return empty, empty.copy(), empty.copy()
    return random_split(y, seed=seed, **{**default_split_sizes(y), **split_kwargs})
