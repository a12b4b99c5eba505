"""Reading a TU archive (`tu`'s layout) into a `GraphSet`: safe members, numbers, checks.

Pure: the archive's bytes in, a GraphSet or a one-line `DataError` out ("MUTAG.zip:MUTAG/
MUTAG_A.txt line 12: ..."). The zip is read in memory and never extracted. Text becomes
numbers in one vectorised pass (``str.split`` then ``np.array(..., dtype)``); only when that
pass fails does a loop over the lines look for the first bad one, to name it.
"""

from __future__ import annotations

import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

from mgsparse.data.graph import undirected_edges_from
from mgsparse.data.graphset import GraphSet
from mgsparse.errors import DataError

MAX_MEMBERS = 64  # the real archives hold 6-8
# Bytes a member may hold per line it should have (plus SLACK_BYTES): generous for the real
# files (A: ~10 bytes per node, attributes: ~20 per value), tight enough that a zip bomb or a
# wrong file is stopped before it is inflated in memory.
BYTES_PER_ROW = {"A": 512, "graph_indicator": 16, "graph_labels": 16, "node_labels": 64,
                 "node_attributes": 1024, "edge_labels": 64, "edge_attributes": 1024}
MAX_EDGE_LABEL_SPAN = 1024  # one-hot columns an edge label column may need (TU's: 3 or 4)
SLACK_BYTES = 1 << 16
# Columns one node-label column may one-hot into (max - min + 1): DD, the widest real set,
# needs 89; 1,024 keeps a damaged label from asking for more than 4 KiB a node.
MAX_ONE_HOT = 1024
_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError)


# --- the archive -------------------------------------------------------------------------------

def open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except _READ_ERRORS as exc:
        raise DataError(f"{path.name}: not a readable zip archive ({exc})") from None


def check_members(archive: zipfile.ZipFile, zip_name: str) -> None:
    """Refuse an archive holding a member that could escape a folder if it were extracted
    (``..``, an absolute path, a drive), a symbolic link (Unix mode in the high 16 bits of
    ``external_attr``), or implausibly many members."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise DataError(f"{zip_name}: {len(infos)} members, more than the {MAX_MEMBERS} a TU "
                        "archive holds")
    for info in infos:
        parts = info.filename.replace("\\", "/").split("/")
        if info.filename.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise DataError(f"{zip_name}: member {info.filename!r} points outside the "
                            "archive's folder; refused")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise DataError(f"{zip_name}: member {info.filename!r} is a symbolic link; refused")


def member_name(title: str, part: str) -> str:
    return f"{title}/{title}_{part}.txt"


def read_member(archive: zipfile.ZipFile, zip_name: str, member: str, cap: int) -> bytes:
    """A member's bytes, at most ``cap`` of them, whatever its header claims."""
    where = f"{zip_name}:{member}"
    try:
        info = archive.getinfo(member)
        if info.file_size > cap:
            raise DataError(f"{where}: {info.file_size:,} bytes, more than the {cap:,} it "
                            "can hold; refused")
        with archive.open(info) as f:
            data = f.read(cap + 1)
    except KeyError:
        raise DataError(f"{zip_name}: {member} is missing (not a TU dataset archive?)") from None
    except _READ_ERRORS as exc:
        raise DataError(f"{where}: damaged ({exc})") from None
    if len(data) > cap:
        raise DataError(f"{where}: more than the {cap:,} bytes it can hold; refused")
    return data


# --- text to numbers ------------------------------------------------------------------------

def read_table(data: bytes, where: str, dtype, width: int | None = None) -> np.ndarray:
    """Comma-separated numbers, one row a line, as a (rows, width) array; ``width`` None
    takes the first line's. Any line with another count of values, or a value that is not a
    number of ``dtype``, is a DataError naming that line."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise DataError(f"{where} line {line}: not ASCII text") from None
    lines = text.replace("\r\n", "\n").rstrip().split("\n") if text.strip() else []
    if not lines:
        return np.empty((0, width or 1), dtype=dtype)
    commas = np.char.count(np.array(lines), ",")
    width = width or int(commas[0]) + 1
    tokens = text.replace(",", " ").split()
    if not np.any(commas != width - 1) and len(tokens) == len(lines) * width:
        try:
            return np.array(tokens, dtype=dtype).reshape(len(lines), width)
        except (ValueError, OverflowError):
            pass
    raise DataError(f"{where} {_first_bad_line(lines, width, dtype)}")


def _first_bad_line(lines: list[str], width: int, dtype) -> str:
    """Where the vectorised parse failed (the error path only: a loop is fine here)."""
    integer = np.issubdtype(dtype, np.integer)
    convert, what = (int, "an integer") if integer else (float, "a number")
    for k, line in enumerate(lines, 1):
        values = line.split(",")
        if not line.strip():
            return f"line {k}: empty"
        if len(values) != width:
            return f"line {k}: {len(values)} values, expected {width}"
        for value in values:
            try:
                convert(value)
            except ValueError:
                return f"line {k}: {value.strip()!r} is not {what}"
    return "could not be read as numbers"


# --- checks and assembly -----------------------------------------------------------------------

def _count(table: np.ndarray, documented: int, where: str, what: str, title: str) -> None:
    if table.shape[0] != documented:
        raise DataError(f"{where}: {table.shape[0]:,} lines, but {title} has {documented:,} "
                        f"{what}")


def node_pointers(indicator: np.ndarray, num_graphs: int, where: str, labels_where: str):
    """(G+1,) offsets from the 1-based graph id of every node; ids must not decrease (a
    graph's nodes are consecutive lines) and must name graphs that have a label."""
    bad = np.flatnonzero((indicator < 1) | (indicator > num_graphs))
    if bad.size:
        raise DataError(f"{where} line {bad[0] + 1}: graph id {indicator[bad[0]]}, but "
                        f"{labels_where} labels graphs 1..{num_graphs}")
    back = np.flatnonzero(np.diff(indicator) < 0)
    if back.size:
        k = back[0] + 1
        raise DataError(f"{where} line {k + 1}: graph id {indicator[k]} after "
                        f"{indicator[k - 1]}; a graph's nodes must be consecutive lines")
    if indicator.size and indicator[-1] != num_graphs:
        raise DataError(f"{where}: the last graph id is {indicator[-1]}, but {labels_where} "
                        f"has {num_graphs:,} labels")
    counts = np.bincount(indicator - 1, minlength=num_graphs)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def check_edges(pairs: np.ndarray, indicator: np.ndarray, where: str) -> None:
    """1-based node ids in range, and both ends in the same graph."""
    n = indicator.shape[0]
    bad = np.flatnonzero(((pairs < 1) | (pairs > n)).any(axis=1))
    if bad.size:
        raise DataError(f"{where} line {bad[0] + 1}: node id out of range in "
                        f"{pairs[bad[0]].tolist()} (the graphs have nodes 1..{n:,})")
    graph = indicator[pairs - 1]
    across = np.flatnonzero(graph[:, 0] != graph[:, 1])
    if across.size:
        k = across[0]
        raise DataError(f"{where} line {k + 1}: edge {pairs[k, 0]}, {pairs[k, 1]} joins graph "
                        f"{graph[k, 0]} to graph {graph[k, 1]}")


def graph_labels(labels: np.ndarray, num_classes: int, where: str, title: str) -> np.ndarray:
    """Labels as 0..C-1 in sorted order of the values (MUTAG's -1/1 -> 0/1)."""
    values, y = np.unique(labels, return_inverse=True)
    if values.size != num_classes:
        raise DataError(f"{where}: {values.size} distinct labels ({', '.join(map(str, values))})"
                        f", but {title} has {num_classes} classes")
    return y.astype(np.int64).ravel()


def one_hot(labels: np.ndarray, where: str = "node labels") -> np.ndarray:
    """(N, k) integer node labels -> (N, sum of widths) float32, column by column, each
    ``label - min`` in a block ``max - min + 1`` wide (PyTorch Geometric's encoding). A block
    wider than `MAX_ONE_HOT` is refused naming the line of the outlying label: the widest
    real one is DD's 89, and one label of 10^12 would ask for terabytes."""
    blocks = []
    for column in labels.T:  # a few columns at most, never a loop over nodes
        shifted = column - column.min() if column.size else column
        width = int(shifted.max()) + 1 if column.size else 0
        if width > MAX_ONE_HOT:
            raise DataError(_too_wide(column, width, where))
        block = np.zeros((column.size, width), dtype=np.float32)
        block[np.arange(column.size), shifted] = 1.0
        blocks.append(block)
    return np.concatenate(blocks, axis=1)


def _too_wide(column: np.ndarray, width: int, where: str) -> str:
    """The line of whichever extreme label lies farther from the median (the outlier)."""
    median = float(np.median(column))
    high, low = int(np.argmax(column)), int(np.argmin(column))
    k = high if column[high] - median >= median - column[low] else low
    return (f"{where} line {k + 1}: node label {column[k]} makes the one-hot encoding "
            f"{width:,} columns wide (labels {column.min()}..{column.max()}); at most "
            f"{MAX_ONE_HOT:,} are accepted")


# --- the whole archive ------------------------------------------------------------------------

def read_archive(path: Path, spec) -> GraphSet:
    """Parse a TU archive (``spec``: a `tu.TuSpec`) into a checked GraphSet."""
    with open_zip(path) as archive:
        check_members(archive, path.name)
        present = set(archive.namelist())

        def table(part, rows, dtype, width=None, optional=False):
            member = member_name(spec.title, part)
            if optional and member not in present:
                return None, member
            cap = BYTES_PER_ROW[part] * rows + SLACK_BYTES
            data = read_member(archive, path.name, member, cap)
            return read_table(data, f"{path.name}:{member}", dtype, width), member

        indicator, ind_member = table("graph_indicator", spec.num_nodes, np.int64, 1)
        labels, lab_member = table("graph_labels", spec.num_graphs, np.int64, 1)
        pairs, a_member = table("A", spec.num_nodes, np.int64, 2)
        node_labels, nl_member = table("node_labels", spec.num_nodes, np.int64, optional=True)
        attributes, at_member = table("node_attributes", spec.num_nodes, np.float32,
                                      optional=True)
        edge_files = [table(part, max(len(pairs), 1), dtype, optional=True)
                      for part, dtype in (("edge_labels", np.int64),
                                          ("edge_attributes", np.float32))]
    name = path.name
    _count(indicator, spec.num_nodes, f"{name}:{ind_member}", "nodes", spec.title)
    _count(labels, spec.num_graphs, f"{name}:{lab_member}", "graphs", spec.title)
    node_ptr = node_pointers(indicator[:, 0], spec.num_graphs, f"{name}:{ind_member}",
                             lab_member)
    check_edges(pairs, indicator[:, 0], f"{name}:{a_member}")
    if spec.num_edge_lines is not None:  # after the line-by-line checks, which say more
        _count(pairs, spec.num_edge_lines, f"{name}:{a_member}", "edge lines", spec.title)
    x = features(node_labels, attributes, spec, f"{name}:{nl_member}", f"{name}:{at_member}")
    edge_attr, edge_type = edge_data(edge_files, len(pairs), name, a_member)
    edge_index, origin = undirected_edges_from(pairs[:, 0] - 1, pairs[:, 1] - 1, spec.num_nodes)
    edge_ptr = np.searchsorted(edge_index[0], node_ptr).astype(np.int64)
    y = graph_labels(labels[:, 0], spec.num_classes, f"{name}:{lab_member}", spec.title)
    return GraphSet(x=x, edge_index=edge_index, node_ptr=node_ptr, edge_ptr=edge_ptr, y=y,
                    num_classes=spec.num_classes, name=spec.name,
                    edge_attr=None if edge_attr is None else edge_attr[origin],
                    edge_type=None if edge_type is None else edge_type[origin])


def edge_data(files, num_lines: int, zip_name: str, a_member: str):
    """(edge_attr (lines, F_e) float32 | None, edge_type (lines,) int64 | None), one row per
    line of NAME_A.txt: edge labels one-hot (as node labels), the edge attributes appended;
    the first label column, from 0, is also the edge's type (a bond's order)."""
    (labels, labels_member), (attributes, attr_member) = files
    parts, edge_type = [], None
    for table, member in ((labels, labels_member), (attributes, attr_member)):
        if table is None:
            continue
        where = f"{zip_name}:{member}"
        if table.shape[0] != num_lines:
            raise DataError(f"{where}: {table.shape[0]:,} lines, but {a_member} lists "
                            f"{num_lines:,} edges (one line each)")
        bad = np.flatnonzero(~np.isfinite(table).all(axis=1))
        if bad.size:
            raise DataError(f"{where} line {bad[0] + 1}: not a finite number")
        if table is labels:
            span = table.max(axis=0) - table.min(axis=0) if num_lines else np.zeros(1)
            if int(span.max()) >= MAX_EDGE_LABEL_SPAN:
                col = int(span.argmax())
                k = int(np.argmax(np.abs(table[:, col] - np.median(table[:, col]))))
                raise DataError(f"{where} line {k + 1}: label {table[k, col]} spreads the "
                                f"labels over {int(span.max()) + 1:,} values; edge labels "
                                f"are a few small ids (at most {MAX_EDGE_LABEL_SPAN})")
            edge_type = (table[:, 0] - (table[:, 0].min() if num_lines else 0)).astype(np.int64)
            parts.append(one_hot(table))
        else:
            parts.append(table.astype(np.float32))
    if not parts:
        return None, None
    return np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.float32), edge_type


def features(node_labels, attributes, spec, labels_where: str, attr_where: str) -> np.ndarray:
    """One-hot node labels, then the attributes; one constant column when there are neither."""
    parts = []
    if node_labels is not None:
        _count(node_labels, spec.num_nodes, labels_where, "nodes", spec.title)
        parts.append(one_hot(node_labels, labels_where))
    if attributes is not None:
        _count(attributes, spec.num_nodes, attr_where, "nodes", spec.title)
        bad = np.flatnonzero(~np.isfinite(attributes).all(axis=1))
        if bad.size:
            raise DataError(f"{attr_where} line {bad[0] + 1}: not a finite number")
        parts.append(attributes.astype(np.float32))
    if not parts:
        return np.ones((spec.num_nodes, 1), dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.float32)
