"""Reading one part of a partition (`partition.py` writes them), every number checked first.

A rank trusts nothing it reads: a part folder may be truncated, edited, or copied from another
partition run. So before any array is allocated or indexed with:

- ``manifest.json`` is an object whose every count is an integer within bounds
  (`MAX_PARTS`, `MAX_NODES`, `MAX_FEATURES`, `MAX_CLASSES`) and consistent with itself
  (the parts' node counts sum to the graph's);
- every array's header (dtype and shape) is read first and must be exactly the shape the
  manifest and ``part.json`` give, and the file must hold that many bytes: a number edited
  in a file can neither allocate more than the file holds nor disagree with another file;
- then the contents: node ids sorted and in range, the owned nodes inside the extended set,
  the CSR arrays (`checks.check_csr`), labels in [-1, classes), the exchange lists in range,
  per destination increasing, and the received positions exactly the halo positions.

Every failure is one `DataError` (exit 1: a damaged part is not the user's typing) naming
the file; `part_dir` and `MANIFEST` give the layout.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.data.checks import check_csr
from mgsparse.errors import DataError

MANIFEST = "manifest.json"
FORMAT = 2  # 2: the manifest says what it was made from, and every part's array sizes
MAX_PARTS = 1 << 16
MAX_NODES = 1 << 36
MAX_FEATURES = 1 << 24  # a first layer of 2^24 x 16 float32 weights is 1 GiB
MAX_CLASSES = 1 << 16
AGAIN = "run `mgsparse partition` again"
# what numpy's .npy reader and zipfile raise on a truncated or foreign file
READ_ERRORS = (OSError, ValueError, EOFError, SyntaxError, zipfile.BadZipFile, zlib.error)


def part_dir(root: str | Path, part: int) -> Path:
    return Path(root) / f"part-{part:03d}"


@dataclass
class LocalPart:
    """What one rank holds: its rows, their operands and its exchange lists."""

    part: int
    manifest: dict
    nodes: np.ndarray  # (n_p,) owned global ids
    ext: np.ndarray  # (e_p,) owned ∪ halo global ids, sorted
    x: sp.csr_matrix | np.ndarray  # (n_p, F)
    y: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    adj: sp.csr_matrix  # (n_p, e_p), columns in ext numbering
    send_idx: np.ndarray
    send_counts: np.ndarray  # (K,)
    recv_pos: np.ndarray
    recv_counts: np.ndarray  # (K,)

    @property
    def own_pos(self) -> np.ndarray:
        """Where the owned rows sit in the extended numbering."""
        return np.searchsorted(self.ext, self.nodes)

    def __repr__(self) -> str:
        return (f"LocalPart(part={self.part}/{self.manifest['num_parts']}, "
                f"nodes={self.nodes.size}, halo={self.ext.size - self.nodes.size}, "
                f"nnz={self.adj.nnz})")


# ---------------------------------------------------------------- JSON: the manifest, part.json


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: missing or unreadable ({e.__class__.__name__}); "
                        f"{AGAIN}") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: not a partition file (a JSON object expected, got "
                        f"{type(value).__name__}); {AGAIN}")
    return value


def _int(d: dict, key: str, path: Path, low: int, high: int) -> int:
    value = d.get(key)
    if type(value) is not int or not low <= value <= high:
        raise DataError(f"{path}: {key} must be an integer in [{low}, {high}], got "
                        f"{json.dumps(value)[:40]}; {AGAIN}")
    return value


def _ints(d: dict, key: str, path: Path, length: int, low: int, high: int) -> list[int]:
    values = d.get(key)
    if (not isinstance(values, list) or len(values) != length
            or any(type(v) is not int or not low <= v <= high for v in values)):
        raise DataError(f"{path}: {key} must be {length} integers in [{low}, {high}]; {AGAIN}")
    return values


def _check_manifest(m: dict, path: Path) -> None:
    """Every count the readers size arrays or the model by, bounded and self-consistent."""
    token = m.get("token")
    if not (isinstance(token, str) and len(token) == 16
            and set(token) <= set("0123456789abcdef")):
        raise DataError(f"{path}: token must be 16 hexadecimal digits; {AGAIN}")
    if not isinstance(m.get("dataset"), dict) or not isinstance(m.get("graph"), dict):
        raise DataError(f"{path}: dataset or graph missing; {AGAIN}")
    k = _int(m, "num_parts", path, 1, MAX_PARTS)
    n = _int(m, "num_nodes", path, 1, MAX_NODES)
    _int(m, "num_features", path, 1, MAX_FEATURES)
    _int(m, "num_classes", path, 1, MAX_CLASSES)
    for key in ("num_train", "num_val", "num_test"):
        _int(m, key, path, 0, n)
    if sum(_ints(m, "nodes_per_part", path, k, 0, n)) != n:
        raise DataError(f"{path}: nodes_per_part does not sum to num_nodes ({n}); {AGAIN}")
    _ints(m, "halo_per_part", path, k, 0, n)
    _ints(m, "nnz_per_part", path, k, 0, n * n)
    for key in ("num_nodes", "num_features", "num_classes"):
        if m["graph"].get(key) != m[key]:
            raise DataError(f"{path}: graph.{key} is not {key} ({m[key]}); {AGAIN}")


def read_manifest(root: str | Path) -> dict:
    """`root/manifest.json`, checked (module docstring); written last, so its absence means
    an unfinished partition."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise DataError(f"{path}: not a finished partition (no manifest); {AGAIN}")
    manifest = _read_json(path)
    if manifest.get("format") != FORMAT:
        raise DataError(f"{path}: partition format {json.dumps(manifest.get('format'))[:20]}, "
                        f"this mgsparse reads {FORMAT}; {AGAIN}")
    _check_manifest(manifest, path)
    return manifest


# ---------------------------------------------------------------- arrays, header first


def _header(f: Any, where: Path) -> tuple[tuple[int, ...], np.dtype]:
    try:
        version = np.lib.format.read_magic(f)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(f)
    except READ_ERRORS as e:
        raise DataError(f"{where}: not a .npy array ({e.__class__.__name__}); {AGAIN}") from None
    if dtype.hasobject or fortran:
        raise DataError(f"{where}: holds {dtype} objects or Fortran order; {AGAIN}")
    return shape, dtype


def _read_array(opener: Any, where: Path, shape: tuple[int, ...], kinds: str,
                size: int) -> np.ndarray:
    """The array `opener()` yields, once its header says `shape` and a dtype of `kinds` and
    the file's `size` bytes hold it; only then is it allocated."""
    with opener() as f:
        got, dtype = _header(f, where)
        if got != shape or dtype.kind not in kinds:
            raise DataError(f"{where}: holds {dtype} {got}, expected {shape} of kind "
                            f"{kinds!r}; {AGAIN}")
        stored = size - f.tell()  # the bytes after the header
        if stored < dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise DataError(f"{where}: truncated ({stored} bytes for {dtype} {shape}); "
                            f"{AGAIN}")
        try:
            f.seek(0)  # read_array reads the header again
            return np.lib.format.read_array(f, allow_pickle=False)
        except READ_ERRORS as e:
            raise DataError(f"{where}: cannot read ({e.__class__.__name__}); {AGAIN}") from None


def _npy(path: Path, shape: tuple[int, ...], kinds: str) -> np.ndarray:
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise DataError(f"{path}: missing or unreadable ({e.__class__.__name__}); "
                        f"{AGAIN}") from None
    return _read_array(lambda: open(path, "rb"), path, shape, kinds, size)


Member = Callable[..., np.ndarray]  # (name, shape, kinds="iu") -> the checked array


@contextmanager
def _npz(path: Path) -> Iterator[Member]:
    """An `np.savez` archive, read member by member, each through `_read_array`."""
    try:
        archive = zipfile.ZipFile(path)
    except READ_ERRORS as e:
        raise DataError(f"{path}: not an .npz archive ({e.__class__.__name__}: {e}); "
                        f"{AGAIN}") from None

    def member(name: str, shape: tuple[int, ...], kinds: str = "iu") -> np.ndarray:
        try:
            info = archive.getinfo(f"{name}.npy")
        except KeyError:
            raise DataError(f"{path}: no array {name!r}; {AGAIN}") from None
        return _read_array(lambda: archive.open(info), Path(f"{path}[{name}]"), shape, kinds,
                           info.file_size)

    with archive:
        yield member


# ---------------------------------------------------------------- one part


def _ids(path: Path, size: int, bound: int) -> np.ndarray:
    """Sorted, distinct global node ids in [0, bound)."""
    ids = _npy(path, (size,), "iu").astype(np.int64, copy=False)
    if ids.size and (ids[0] < 0 or ids[-1] >= bound or (np.diff(ids) <= 0).any()):
        raise DataError(f"{path}: node ids must be increasing in [0, {bound}); {AGAIN}")
    return ids


def _csr(path: Path, rows: int, cols: int, nnz: int, kinds: str = "f") -> sp.csr_matrix:
    with _npz(path) as z:
        shape = z("shape", (2,))
        if shape.tolist() != [rows, cols]:
            raise DataError(f"{path}: shape {shape.tolist()}, expected [{rows}, {cols}]; "
                            f"{AGAIN}")
        return check_csr(z("indptr", (rows + 1,)), z("indices", (nnz,)),
                         z("data", (nnz,), kinds), shape, path)


def _lists(path: Path, key: str, size: int, parts: int, part: int, bound: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """An exchange list (indices grouped by peer, each group increasing, in [0, bound)) and
    its counts per peer (none to itself)."""
    with _npz(path) as z:
        idx = z(key, (size,)).astype(np.int64, copy=False)
        counts = z("counts", (parts,)).astype(np.int64, copy=False)
    starts = np.cumsum(counts) - counts
    if (counts < 0).any() or counts.sum() != size or counts[part] != 0:
        raise DataError(f"{path}: counts must be {parts} non-negative numbers summing to "
                        f"{size}, none for part {part} itself; {AGAIN}")
    rising = np.diff(idx) > 0
    rising[starts[(starts > 0) & (starts < size)] - 1] = True  # a new peer may start lower
    if idx.size and (idx.min() < 0 or idx.max() >= bound or not rising.all()):
        raise DataError(f"{path}: {key} must increase within each peer and lie in "
                        f"[0, {bound}); {AGAIN}")
    return idx, counts


def load_part(root: str | Path, part: int) -> LocalPart:
    """Part `part` of the partition in `root`, reading only `manifest.json` and its folder,
    each file checked against the manifest and `part.json` (module docstring)."""
    m = read_manifest(root)
    if not 0 <= part < m["num_parts"]:
        raise DataError(f"{root}: no part {part} (the partition has {m['num_parts']})")
    folder = part_dir(root, part)
    meta = _read_json(folder / "part.json")
    if meta.get("token") != m["token"]:
        raise DataError(f"{folder}: written by another partition run than {root}/{MANIFEST}")
    n, big_n, f, k = m["nodes_per_part"][part], m["num_nodes"], m["num_features"], m["num_parts"]
    e = n + m["halo_per_part"][part]
    nodes, ext = _ids(folder / "nodes.npy", n, big_n), _ids(folder / "ext.npy", e, big_n)
    own = np.searchsorted(ext, nodes)
    if n and (own[-1] >= e or (ext[own] != nodes).any()):
        raise DataError(f"{folder / 'ext.npy'}: does not hold every owned node; {AGAIN}")
    x_path = folder / "x.npz"
    x = (_csr(x_path, n, f, _int(meta, "x_nnz", folder / "part.json", 0, n * f), "biuf")
         if x_path.is_file() else _npy(folder / "x.npy", (n, f), "biuf"))
    if isinstance(x, np.ndarray) and not np.isfinite(x).all():
        raise DataError(f"{folder / 'x.npy'}: holds a non-finite feature; {AGAIN}")
    y = _npy(folder / "y.npy", (n,), "i")
    if y.size and (y.min() < -1 or y.max() >= m["num_classes"]):
        raise DataError(f"{folder / 'y.npy'}: labels outside [-1, {m['num_classes']}); {AGAIN}")
    masks = [_npy(folder / f"{s}.npy", (n,), "b") for s in ("train", "val", "test")]
    adj = _csr(folder / "adj.npz", n, e, m["nnz_per_part"][part])
    send = _lists(folder / "send.npz", "idx", _int(meta, "send", folder / "part.json", 0,
                                                    n * k), k, part, n)
    recv = _lists(folder / "recv.npz", "pos", e - n, k, part, e)
    if np.bincount(np.concatenate([own, recv[0]]), minlength=e).max(initial=1) != 1:
        raise DataError(f"{folder / 'recv.npz'}: pos must be the halo positions of ext, "
                        f"each once; {AGAIN}")
    return LocalPart(part, m, nodes, ext, x, y, *masks, adj, *send, *recv)
