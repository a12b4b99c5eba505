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

Text may start with a UTF-8 byte-order mark (Excel's "CSV UTF-8"); it is skipped.

Every malformed input raises a DataError naming the file and, for text, the line (for
``.npy``/``.npz`` arrays, the row): unreadable files (a folder, a pipe or device, a symlink
loop), wrong shapes, NaN or infinite features, negative or non-finite weights, and node ids
too large to be meant (see `load_edge_list`).
"""

from __future__ import annotations

import re
import stat
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mgsparse.data.checks import load_sparse_npz
from mgsparse.data.graph import Graph
from mgsparse.data.transforms import coalesce, default_split_sizes, random_split
from mgsparse.errors import DataError, InputFileError

_FIELD_SEPARATOR = re.compile(r"\s*[,;\t]\s*|\s+")
# Without features or labels to give the node count, ids must lie below the larger of these:
# E edges touch at most 2E nodes, and a small graph may keep a few isolated ids besides.
MIN_INFERRED_NODES = 1 << 16
# What np.load raises on a truncated, emptied or foreign .npy/.npz (a huge bogus header: Memory).
_NUMPY_FILE_ERRORS = (OSError, ValueError, EOFError, KeyError, TypeError, MemoryError,
                      zipfile.BadZipFile)


# --- text tables --------------------------------------------------------------------------------

def _require_regular_file(path: Path, what: str) -> None:
    """A DataError unless `path` is a regular file (after its symlinks): a folder, a symlink
    loop or a missing target names its cause, and a pipe or device (``/dev/zero``) is refused
    before a read that would never end."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:  # ELOOP: a symlink loop; EACCES on a parent folder
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{path}: cannot read it (a folder), expected a file of {what}")
    if not stat.S_ISREG(mode):
        raise DataError(f"{path}: not a regular file (a pipe or a device?), expected {what}")


def _read_table(path: Path, widths: tuple[int, ...] | None,
                what: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, line_numbers): a 2-D str array of the data lines and their 1-based numbers.

    All rows must have the width of the first, which must be one of ``widths`` (any if None).
    """
    _require_regular_file(Path(path), what)
    try:  # utf-8-sig: a leading byte-order mark is dropped, not read as part of the first id
        text = Path(path).read_text(encoding="utf-8-sig")
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
                    _fits(python_type(value), dtype)
                except ValueError:
                    hint = (" (an empty field: a separator too many?)" if not str(value)
                            else " (a header? start it with #)" if row == 0 else "")
                    raise DataError(f"{where}: {what} {str(value)!r} is not {kind}"
                                    f"{hint}") from None
                except OverflowError:
                    raise DataError(f"{where}: {what} {value!s} is out of range for "
                                    f"{np.dtype(dtype).name}") from None
        raise DataError(f"{path}: values out of range for {np.dtype(dtype).name}") from None


def _fits(value: float, dtype) -> None:
    """OverflowError when `value` does not fit `dtype`: compared as a Python int, since numpy
    casts an object array's 2^63 to int64 by wrapping it round (to -2^63), silently."""
    if isinstance(value, int):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(value)
    else:
        np.array(value).astype(dtype)


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
    (a node id of 10^18 would otherwise allocate 10^18 nodes). Weights must be finite and
    non-negative: GCN's D^-1/2 (A + I) D^-1/2 takes the square root of weighted degrees, so
    a negative weight could make one zero or negative, and that node's row of Â would vanish
    without a word (`gcn_norm` zeroes it).
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
        negative = np.flatnonzero(weights < 0)
        if negative.size:
            raise DataError(f"{path} line {lines[negative[0]]}: weight {weights[negative[0]]:g} "
                            "is negative; edge weights must be >= 0 (GCN normalises by the "
                            "square root of weighted degrees)")
    return np.ascontiguousarray(ids.T), weights


def load_features(path: str | Path) -> sp.csr_matrix | np.ndarray:
    """(N, F) float32 features: CSR from a sparse ``.npz``, dense ndarray otherwise."""
    path = Path(path)
    _require_regular_file(path, "features")
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
    if x.shape[1] == 0:
        raise DataError(f"{path}: 0 feature columns ({x.shape[0]} x 0); give at least one "
                        "number per node, or no features file (one-hot node ids)")
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


# The first bytes numpy's writers put down: np.save's header, np.savez's zip (or an empty zip).
_MAGIC = {".npy": (b"\x93NUMPY",), ".npz": (b"PK\x03\x04", b"PK\x05\x06")}


def _require_numpy_magic(path: Path) -> None:
    """A DataError unless `path` starts as np.save / np.savez write it. np.load falls back to
    unpickling anything else, so a text file named .npz was refused as "pickled (object)
    data" - the wrong cause; the magic bytes name the right one."""
    magics = _MAGIC[path.suffix.lower()]
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return  # np.load reports it with its cause
    if not head.startswith(magics):
        writer = "np.save" if path.suffix.lower() == ".npy" else "np.savez (a zip archive)"
        start = f"first bytes {head!r}" if head else "it is empty"
        raise DataError(f"{path}: not a readable {path.suffix.lower()} file: it does not start "
                        f"as {writer} writes it ({start})")


def _load_npy(path: Path) -> np.ndarray:
    _require_regular_file(path, "a .npy array")
    _require_numpy_magic(path)
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
    _require_numpy_magic(path)
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
                    split: bool = True, **split_kwargs) -> Graph:
    """A `Graph` from the user's files, with a seeded random split of the labelled nodes.

    The node count is ``num_nodes``, else the feature rows, else the label count, else the
    largest edge id + 1. Missing features become the identity (one-hot node ids); missing
    labels leave every node unlabelled (-1) and every mask empty. Self loops are dropped
    and repeated edges merged (the first weight wins); ``undirected`` adds each reverse
    edge. ``split_kwargs`` are `random_split`'s sizes (defaults: `default_split_sizes`);
    ``split=False`` leaves the masks empty (the caller's node files give them).
    """
    x = load_features(features) if features is not None else None
    y, label_lines = _read_labels(Path(labels)) if labels is not None else (None, None)
    if num_nodes is None:
        num_nodes = _node_count(x, y, edges, features, labels)
    if x is not None and x.shape[0] != num_nodes:
        raise DataError(f"{features}: {x.shape[0]} feature rows for {num_nodes} nodes")
    if y is not None:
        _check_label_count(Path(labels), y, label_lines, num_nodes,
                           f"; {features} has {x.shape[0]} rows" if x is not None else "")
    edge_index, weights = load_edge_list(edges, num_nodes)
    if num_nodes is None:
        num_nodes = int(edge_index.max()) + 1 if edge_index.size else 0
    edge_index, weights = coalesce(edge_index, weights, num_nodes, undirected)
    if x is None:
        x = sp.identity(num_nodes, dtype=np.float32, format="csr")
    if y is None:
        y = np.full(num_nodes, -1, dtype=np.int64)
    masks = _split(y, labels, seed, split_kwargs, split)
    return Graph(x=x, y=y, edge_index=edge_index, num_nodes=num_nodes,
                 num_classes=int(y.max()) + 1 if y.size else 0, train_mask=masks[0],
                 val_mask=masks[1], test_mask=masks[2], name=name or Path(edges).stem,
                 edge_weight=weights)


def _node_count(x, y, edges, features, labels) -> int | None:
    """The feature rows, else the label count, else None (the edges will say).

    When there are fewer feature rows than labels and the edges use a node beyond the last
    row, the features are the file missing nodes; otherwise the labels are blamed (one too
    many, or the edges cannot tell) with the feature rows named beside them."""
    if x is not None and y is not None and x.shape[0] < y.size:
        used = load_edge_list(edges)[0]  # only on the way to an error: read twice
        last = int(used.max()) if used.size else -1
        if last >= x.shape[0]:
            raise DataError(f"{features}: {x.shape[0]} feature rows, but {labels} has "
                            f"{y.size} labels and {edges} uses node {last} (one row and one "
                            "label per node, node 0 first)")
    return x.shape[0] if x is not None else (y.size if y is not None else None)


def _check_label_count(path: Path, y: np.ndarray, lines: np.ndarray | None,
                       num_nodes: int | None, counted_by: str = "") -> None:
    """One label per node; `counted_by` ("; x.npy has 3 rows") says where the count is from."""
    if num_nodes is None or y.size == num_nodes:
        return
    if lines is None:
        raise DataError(f"{path}: {y.size} labels for {num_nodes} nodes{counted_by}")
    if y.size > num_nodes:
        raise DataError(f"{path} line {lines[num_nodes]}: label for node {num_nodes}, but "
                        f"the graph has {num_nodes} nodes ({y.size} labels{counted_by})")
    raise DataError(f"{path} line {lines[-1]}: last label is for node {y.size - 1}, but the "
                    f"graph has {num_nodes} nodes{counted_by}")


def _split(y: np.ndarray, labels: str | Path | None, seed: int, split_kwargs: dict,
           split: bool):
    """Seeded random masks of the labelled nodes (all empty without any, or unless `split`);
    a split that cannot be drawn names the labels file it was drawn from."""
    if not split or not (y >= 0).any():
        empty = np.zeros(y.size, dtype=bool)
        return empty, empty.copy(), empty.copy()
    try:
        return random_split(y, seed=seed, **{**default_split_sizes(y), **split_kwargs})
    except DataError as exc:
        raise DataError(f"{labels}: {exc}") from None
