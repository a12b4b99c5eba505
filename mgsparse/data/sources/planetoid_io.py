"""Parse the eight raw Planetoid files into a `Graph`: no network, no cache, no trust.

The raw files are Python 2 pickles. A plain ``pickle.load`` runs whatever callable a
tampered file names, so `RestrictedUnpickler` admits exactly the globals the genuine files
reference -- ``scipy.sparse.csr.csr_matrix``, ``numpy.ndarray``, ``numpy.dtype``,
``numpy.core.multiarray._reconstruct``, ``collections.defaultdict`` and ``__builtin__.list``
-- plus a few inert builtin containers, and refuses every other global with a DataError
naming it. Checksums are verified before this module ever sees a file; this is the second
line of defence.

Semantics follow PyG's ``read_planetoid_data`` and Kipf's ``gcn/utils.py``:
``x = [allx; tx]`` with the test rows reordered by ``test.index``; CiteSeer's test index has
gaps (15 isolated nodes), which are padded with zero features and label -1; edges from the
adjacency dict are made undirected, without self loops or duplicates; the public split is
the first ``len(y)`` nodes for training, the next 500 for validation and ``test.index`` for
testing.
"""

from __future__ import annotations

import collections
import itertools
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mgsparse.data.graph import Graph, undirected_edges
from mgsparse.data.transforms import public_split
from mgsparse.errors import DataError

FILE_KEYS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
NUM_VAL = 500

try:  # numpy >= 2 moved the module; old pickles still name numpy.core.multiarray
    from numpy._core.multiarray import _reconstruct
except ImportError:  # pragma: no cover - numpy < 2
    from numpy.core.multiarray import _reconstruct

ALLOWED_GLOBALS = {
    ("scipy.sparse.csr", "csr_matrix"): sp.csr_matrix,
    ("scipy.sparse._csr", "csr_matrix"): sp.csr_matrix,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("collections", "defaultdict"): collections.defaultdict,
    **{(module, kind.__name__): kind
       for module in ("__builtin__", "builtins")
       for kind in (list, dict, tuple, set, frozenset)},
}


# What a truncated or corrupt pickle raises (before or after the restricted find_class).
CORRUPT_PICKLE = (pickle.UnpicklingError, EOFError, AttributeError, IndexError, KeyError,
                  TypeError, ValueError, OverflowError, MemoryError, RecursionError)


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler whose only reachable callables are those in ``ALLOWED_GLOBALS``."""

    def find_class(self, module: str, name: str):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise DataError(f"refused to unpickle global {module}.{name}: the Planetoid "
                            "format never needs it (tampered or foreign file?)") from None


def load_pickle(path: Path):
    """Unpickle one raw file with the restricted unpickler (latin1: Python 2 byte strings)."""
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, encoding="latin1").load()
    except FileNotFoundError:
        raise DataError(f"{path.name}: file not found in {path.parent}") from None
    except DataError as exc:
        raise DataError(f"{path.name}: {exc}") from None
    except CORRUPT_PICKLE as exc:
        raise DataError(f"{path.name}: not a readable Planetoid pickle "
                        f"({type(exc).__name__}: {exc})") from None


def read_planetoid(folder: str | Path, name: str) -> Graph:
    """Read ``ind.<name>.*`` from ``folder``: Cora gives 2,708 nodes, 10,556 directed edges,
    1,433 features, 7 classes and the 140/500/1000 public split."""
    folder = Path(folder)
    paths = {key: folder / f"ind.{name}.{key}" for key in FILE_KEYS}
    x, tx, allx = (_as_csr(load_pickle(paths[k]), paths[k]) for k in ("x", "tx", "allx"))
    y, ty, ally = (_as_onehot(load_pickle(paths[k]), paths[k]) for k in ("y", "ty", "ally"))
    test_index = _read_index(paths["test.index"])
    _check_consistent(name, x, y, tx, ty, allx, ally)
    features, labels = _stack_nodes(allx, tx, ally, ty, test_index)
    num_nodes = features.shape[0]
    edge_index = _edges_from_dict(load_pickle(paths["graph"]), num_nodes, paths["graph"])
    # Validation nodes follow the training nodes inside allx (500 on the real datasets).
    num_val = min(NUM_VAL, allx.shape[0] - y.shape[0])
    train, val, test = public_split(num_nodes, y.shape[0], test_index, num_val)
    return Graph(x=features, y=labels, edge_index=edge_index, num_nodes=num_nodes,
                 num_classes=int(ally.shape[1]), train_mask=train, val_mask=val,
                 test_mask=test, name=name)


# --- validation of what came out of the pickles -----------------------------------------------

def _as_csr(obj, path: Path) -> sp.csr_matrix:
    """Rebuild through the constructor, which re-validates indptr/indices of the old pickle."""
    if not isinstance(obj, sp.csr_matrix):
        raise DataError(f"{path.name}: expected a csr_matrix, found {type(obj).__name__}")
    try:
        matrix = sp.csr_matrix((np.asarray(obj.data), np.asarray(obj.indices),
                                np.asarray(obj.indptr)), shape=obj.shape)
        matrix.check_format(full_check=True)
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise DataError(f"{path.name}: malformed sparse matrix ({exc})") from None
    return matrix.astype(np.float32)


def _as_onehot(obj, path: Path) -> np.ndarray:
    if not isinstance(obj, np.ndarray) or obj.ndim != 2 or obj.dtype.kind not in "iub":
        described = getattr(obj, "dtype", type(obj).__name__)
        raise DataError(f"{path.name}: expected a 2-D integer one-hot array, found {described}")
    return obj


def _read_index(path: Path) -> np.ndarray:
    try:
        lines = path.read_text(encoding="ascii").split()
        return np.array(lines, dtype=np.int64)
    except FileNotFoundError:
        raise DataError(f"{path.name}: file not found in {path.parent}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path.name}: expected one integer per line ({exc})") from None


def _check_consistent(name, x, y, tx, ty, allx, ally) -> None:
    pairs = {"x/y": (x, y), "tx/ty": (tx, ty), "allx/ally": (allx, ally)}
    for label, (features, labels) in pairs.items():
        if features.shape[0] != labels.shape[0]:
            raise DataError(f"{name}: {label} row counts differ "
                            f"({features.shape[0]} vs {labels.shape[0]})")
    if not (x.shape[1] == tx.shape[1] == allx.shape[1]):
        raise DataError(f"{name}: x, tx, allx have different feature counts")
    if not (y.shape[1] == ty.shape[1] == ally.shape[1]):
        raise DataError(f"{name}: y, ty, ally have different class counts")


# --- processing ---------------------------------------------------------------------------------

def _stack_nodes(allx, tx, ally, ty, test_index):
    """Features (N, F) CSR float32 and labels (N,) int64 in node order.

    The test block arrives in sorted-index order; node ``test_index[i]`` owns row
    ``sorted_test_index[i]``, so a permutation puts each test row where its node lives.
    Test indices with gaps (CiteSeer) get zero rows and label -1 in the gaps.
    """
    test_index = np.asarray(test_index)
    sorted_index = np.sort(test_index)
    first = int(sorted_index[0]) if sorted_index.size else allx.shape[0]
    span = int(sorted_index[-1]) - first + 1 if sorted_index.size else 0
    if sorted_index.size != tx.shape[0] or first != allx.shape[0]:
        raise DataError(f"test.index lists {sorted_index.size} nodes starting at {first}, "
                        f"but tx has {tx.shape[0]} rows after {allx.shape[0]} allx rows")
    if np.unique(sorted_index).size != sorted_index.size:
        raise DataError("test.index lists a node twice")
    slots = sorted_index - first
    tx_full = _scatter_rows(tx, slots, span)
    ty_full = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
    ty_full[slots] = ty
    features = sp.vstack([allx, tx_full], format="csr", dtype=np.float32)
    onehot = np.vstack([ally, ty_full])
    labels = np.where(onehot.any(axis=1), onehot.argmax(axis=1), -1).astype(np.int64)
    order = np.arange(features.shape[0])
    order[test_index] = sorted_index
    return features[order], labels[order]


def _scatter_rows(rows: sp.csr_matrix, slots: np.ndarray, span: int) -> sp.csr_matrix:
    """A (span, F) matrix whose row ``slots[i]`` is ``rows[i]`` and whose other rows are 0."""
    scatter = sp.csr_matrix((np.ones(slots.size, dtype=np.float32),
                             (slots, np.arange(slots.size))), shape=(span, rows.shape[0]))
    return (scatter @ rows).tocsr()


def _edges_from_dict(adjacency, num_nodes: int, path: Path) -> np.ndarray:
    """(2, E) int64 edges, both directions, sorted, no duplicates, no self loops."""
    if not isinstance(adjacency, dict):
        raise DataError(f"{path.name}: expected an adjacency dict, found "
                        f"{type(adjacency).__name__}")
    try:
        sources = np.fromiter(adjacency.keys(), dtype=np.int64, count=len(adjacency))
        degrees = np.fromiter(map(len, adjacency.values()), dtype=np.int64,
                              count=len(adjacency))
        targets = np.fromiter(itertools.chain.from_iterable(adjacency.values()),
                              dtype=np.int64, count=int(degrees.sum()))
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path.name}: adjacency keys and neighbours must be integers "
                        f"({exc})") from None
    row = np.repeat(sources, degrees)
    for ids in (row, targets):
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            raise DataError(f"{path.name}: node id {int(ids.max())} out of range for "
                            f"{num_nodes} nodes")
    return undirected_edges(row, targets, num_nodes)

