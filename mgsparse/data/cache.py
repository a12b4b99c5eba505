"""Where downloaded datasets live, and a processed `Graph` saved as one ``.npz`` and read back
only if it is the one we wrote.

The root: ``root`` (config key ``dataset.root``), else ``MGSPARSE_DATA``, else ``./datasets``;
each downloading source keeps one folder of its own under it (`resolve_root`, `folder_status`).

Dense or CSR features, optional edge weights, features and types. The file carries a ``key`` (what it was built
from: raw checksums, processing version, options) and a ``digest`` (SHA-256 over every
array): a cache built from other raw files, or edited after it was written, reads as None
and is rebuilt. Writes go through `atomic_write`, so a crash never leaves a half-written
cache. Loading never unpickles (``allow_pickle=False``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.data.atomic import atomic_write
from mgsparse.data.checks import check_csr, check_edge_index
from mgsparse.data.graph import Graph
from mgsparse.data.graphset import GraphSet
from mgsparse.errors import DataError

_MASKS = ("train_mask", "val_mask", "test_mask")
_EDGE_DATA = ("edge_weight", "edge_attr", "edge_type")  # optional, one row per edge
ROOT_ENV = "MGSPARSE_DATA"
DEFAULT_ROOT = "datasets"


def resolve_root(root: str | Path | None = None) -> Path:
    """Explicit argument > ``MGSPARSE_DATA`` > ``./datasets``; a DataError naming the setting
    when that path, or the nearest part of it that exists, is a file and not a folder."""
    chosen = Path(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
    setting = ("dataset.root (--root)" if root else
               ROOT_ENV if os.environ.get(ROOT_ENV) else "the default root")
    try:
        existing = next((p for p in (chosen, *chosen.parents) if p.exists()), None)
        is_folder = existing is None or existing.is_dir()
    except OSError as exc:  # e.g. a parent folder that may not be searched
        raise DataError(f"{setting}={chosen}: cannot access it ({exc.strerror or exc})") from None
    if not is_folder:
        what = "is a file" if existing == chosen else f"lies under the file {existing}"
        raise DataError(f"{setting}={chosen} {what}, not a folder; point it at a folder "
                        "(it is created if missing)")
    return chosen


def folder_status(folder: Path, cached: bool) -> dict:
    """`list_datasets`' row for a downloading source: whether its download is complete, the
    bytes its folder takes on disk (raw and processed), and where it is."""
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return {"cached": cached, "size_bytes": sum(p.stat().st_size for p in files),
            "path": str(folder)}


def graph_arrays(graph: Graph) -> dict[str, np.ndarray]:
    """Every array of ``graph`` by name; CSR features as their three arrays plus the shape."""
    arrays = {"y": graph.y, "edge_index": graph.edge_index,
              "num_classes": np.array(graph.num_classes)}
    arrays.update({name: getattr(graph, name) for name in _MASKS})
    if graph.is_sparse:
        arrays.update(x_data=graph.x.data, x_indices=graph.x.indices, x_indptr=graph.x.indptr,
                      x_shape=np.array(graph.x.shape))
    else:
        arrays["x"] = graph.x
    arrays.update({name: getattr(graph, name) for name in _EDGE_DATA
                   if getattr(graph, name) is not None})
    return arrays


def digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array's name, dtype, shape and bytes, in name order."""
    sha = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        sha.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        sha.update(memoryview(array).cast("B"))
    return sha.hexdigest()


def save_arrays(arrays: dict[str, np.ndarray], path: Path, key: str) -> None:
    """Write ``arrays`` with their ``key`` and digest to ``path`` atomically; OSError
    (read-only root, full disk) propagates."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: np.savez(f, key=key, digest=digest(arrays), **arrays), "wb")


def load_arrays(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """The arrays cached at ``path``, or None when stale (another key) or edited (digest)."""
    with np.load(path, allow_pickle=False) as z:
        if str(z["key"]) != key:
            return None
        arrays = {k: z[k] for k in z.files if k not in ("key", "digest")}
        recorded = str(z["digest"])
    return arrays if recorded == digest(arrays) else None


def cached(path: Path, key: str, build: Callable[[], Any],
           to_arrays: Callable[[Any], dict], from_arrays: Callable[[dict], Any]) -> Any:
    """What is cached at ``path`` under ``key``, else ``build()`` it and cache it. A damaged or
    stale cache is rebuilt (whatever reading it raises, rebuilding is the cure); a cache that
    cannot be written (read-only root, full disk) only costs the next run the time to build
    again."""
    if Path(path).is_file():
        try:
            arrays = load_arrays(path, key)
            if arrays is not None:
                return from_arrays(arrays)
        except Exception:  # noqa: BLE001, S110 -- a damaged cache is rebuilt below
            pass
    value = build()
    try:
        save_arrays(to_arrays(value), path, key)
    except OSError:
        pass
    return value


def _graph_from(arrays: dict, path: Path, name: str) -> Graph:
    if "x" in arrays:
        x = arrays["x"]
    else:
        x = check_csr(arrays["x_indptr"], arrays["x_indices"], arrays["x_data"],
                      arrays["x_shape"], path)
    edge_index = check_edge_index(arrays["edge_index"], x.shape[0], path)
    return Graph(x=x, y=arrays["y"], edge_index=edge_index, num_nodes=x.shape[0],
                 num_classes=int(arrays["num_classes"]), name=name,
                 **{name: arrays.get(name) for name in _EDGE_DATA},
                 **{mask: arrays[mask] for mask in _MASKS})


def cached_graph(path: Path, key: str, name: str, build: Callable[[], Graph]) -> Graph:
    """The graph cached at ``path`` under ``key``, else ``build()`` it and cache it."""
    return cached(path, key, build, graph_arrays, lambda a: _graph_from(a, path, name))


# --- a set of small graphs ----------------------------------------------------------------------

_GRAPHSET_ARRAYS = ("x", "edge_index", "node_ptr", "edge_ptr", "y")


def _graphset_arrays(graphs: GraphSet) -> dict[str, np.ndarray]:
    return {**{a: getattr(graphs, a) for a in _GRAPHSET_ARRAYS},
            **{a: getattr(graphs, a) for a in _EDGE_DATA[1:] if getattr(graphs, a) is not None},
            "num_classes": np.array(graphs.num_classes)}


def save_graphset(graphs: GraphSet, path: Path, key: str) -> None:
    save_arrays(_graphset_arrays(graphs), path, key)


def cached_graphset(path: Path, key: str, name: str, build: Callable[[], GraphSet]) -> GraphSet:
    """`cached_graph` for a `GraphSet` (its own checks run on what is read back)."""
    return cached(path, key, build, _graphset_arrays, lambda a: GraphSet(
        **{k: a[k] for k in _GRAPHSET_ARRAYS}, **{k: a.get(k) for k in _EDGE_DATA[1:]},
        num_classes=int(a["num_classes"]), name=name))
