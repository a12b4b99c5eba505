"""Split a graph into K parts for distributed full-graph training, one folder per part.

Partitioning is its own step (as PyG's `ClusterData` or DistDGL's `partition_graph`): run it
once, then each rank reads only its own folder, so no machine ever holds the whole graph.

Part p owns the nodes `membership == p` (kept in increasing global id). It needs, for the
rows of Â it owns, the columns it does not own: its *halo*. Its operand numbering is the
*extended* set E_p = owned ∪ halo sorted by global id, so a row's columns keep the global
order — the local product Â_p · H[E_p] sums in exactly the order of the single-process one.
Layout of `DIR/part-PPP/` (every file written atomically; the manifest last):

    nodes.npy        (n_p,) int64   global ids of the owned nodes (sorted)
    ext.npy          (e_p,) int64   global ids of E_p (sorted), owned ones included
    x.npz | x.npy    features of the owned rows (CSR arrays, or dense)
    y.npy, train.npy, val.npy, test.npy   labels and masks of the owned rows
    adj.npz          Â[nodes][:, ext] as CSR (n_p, e_p), float32
    send.npz         idx (local owned rows to send, grouped by destination), counts (K,)
    recv.npz         pos (positions in E_p the received rows fill, by source), counts (K,)

`part.json` holds the part's array sizes the manifest does not, and the run's token.
`manifest.json` holds the sizes, the edge cut, the halo size per part, the bytes one epoch will
exchange, and what the partition was made from: the config's dataset section (its name and
the options its source reads: `dataset_identity`, with a fingerprint) and the graph's
(`graph_fingerprint`: counts and a SHA-256 of edge_index, weights, features and labels), so a
run can refuse a partition of another graph. METIS (pymetis) balances nodes and minimises
the cut; without pymetis, the fallback cuts the id range into K contiguous blocks.
`parts.py` reads one part back, checking every file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.data.atomic import atomic_write
from mgsparse.data.graph import Graph
from mgsparse.data.parts import FORMAT, MANIFEST, LocalPart, load_part, part_dir, read_manifest
from mgsparse.errors import ConfigError, DataError

__all__ = ["FORMAT", "MANIFEST", "LocalPart", "dataset_identity", "graph_fingerprint",
           "load_part", "metis_available", "part_dir", "read_manifest", "write_partitions"]


# ---------------------------------------------------------------- what a partition is made of


def dataset_identity(section: Any) -> dict:
    """The dataset-section keys that decide the graph: its name and the options its source
    reads (`Source.options`), without ``root``/``url`` (where the bytes are, not which)."""
    from mgsparse.data.sources import source_for

    options = source_for(section.name).options(section)
    identity = {"name": section.name, **{k: list(v) if isinstance(v, tuple) else v
                                         for k, v in options.items() if k not in ("root", "url")}}
    text = json.dumps(identity, sort_keys=True).encode()
    return {"fingerprint": hashlib.sha256(text).hexdigest()[:16], "section": identity}


def graph_fingerprint(graph: Graph) -> dict:
    """Counts and a SHA-256 over the arrays that make the operands: edge_index, the edge
    weights, the features (CSR arrays or dense bytes) and the labels."""
    h = hashlib.sha256()
    x = graph.x
    arrays = ([x.indptr, x.indices, x.data] if sp.issparse(x) else [np.asarray(x)])
    weights = [] if graph.edge_weight is None else [graph.edge_weight]
    for a in [graph.edge_index, *weights, *arrays, graph.y]:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.data)
    return {"num_nodes": int(graph.num_nodes), "num_edges": graph.num_edges,
            "num_features": graph.num_features, "num_classes": int(graph.num_classes),
            "sha256": h.hexdigest()}


# ---------------------------------------------------------------- assigning nodes to parts


def contiguous_parts(num_nodes: int, parts: int) -> np.ndarray:
    """Node i goes to part floor(i·K / N): K blocks of consecutive ids, sizes within one."""
    return (np.arange(num_nodes, dtype=np.int64) * parts) // max(num_nodes, 1)


def metis_available() -> bool:
    """Whether pymetis can be imported (METIS parts), without which "metis" falls back to
    contiguous blocks: the CLI warns of that fallback, or refuses it when asked for METIS."""
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


def metis_parts(adj: sp.csr_matrix, parts: int, seed: int = 0) -> np.ndarray:
    """METIS k-way on the symmetric pattern of `adj` (self loops removed)."""
    import pymetis  # optional: the checkout's `[distributed]` extra

    a = sp.csr_matrix(adj, copy=True)
    a = ((a + a.T) != 0).astype(np.int8).tocsr()  # METIS needs both directions
    a.setdiag(0)
    a.eliminate_zeros()
    options = pymetis.Options(seed=seed)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025
        graph = pymetis.CSRAdjacency(adj_starts=a.indptr, adjacent=a.indices)
        _, membership = pymetis.part_graph(parts, graph, options=options)
    else:
        _, membership = pymetis.part_graph(parts, xadj=a.indptr, adjncy=a.indices,
                                           options=options)
    return np.asarray(membership, dtype=np.int64)


def assign_parts(adj: sp.csr_matrix, parts: int, method: str = "metis",
                 seed: int = 0) -> tuple[np.ndarray, str]:
    """(membership (N,), the method used): METIS when asked and installed, else contiguous."""
    n = adj.shape[0]
    if parts < 1 or parts > max(n, 1):  # the user's --parts: a usage error
        raise ConfigError(f"--parts must be in [1, {n}] (the graph has {n} nodes), got {parts}")
    if parts == 1:
        return np.zeros(n, dtype=np.int64), "single"
    if method == "metis":
        try:
            return metis_parts(adj, parts, seed), "metis"
        except ImportError:
            pass
    return contiguous_parts(n, parts), "contiguous"


# ---------------------------------------------------------------- halos and exchange lists


@dataclass
class PartPlan:
    """The index sets of one part, in global ids / local positions."""

    nodes: np.ndarray  # owned global ids, sorted
    ext: np.ndarray  # owned ∪ halo global ids, sorted
    adj: sp.csr_matrix  # (n_p, e_p)
    recv_pos: np.ndarray  # positions in ext, grouped by source part
    recv_counts: np.ndarray  # (K,)


def plan_part(adj: sp.csr_matrix, membership: np.ndarray, p: int) -> PartPlan:
    """Owned rows, extended columns, local Â and where each received row lands."""
    nodes = np.flatnonzero(membership == p)
    rows = adj[nodes]  # CSR row slice keeps each row's column order
    ext = np.union1d(nodes, rows.indices)
    local = sp.csr_matrix((rows.data, np.searchsorted(ext, rows.indices), rows.indptr),
                          shape=(nodes.size, ext.size))
    halo = np.setdiff1d(ext, nodes, assume_unique=True)
    owner = membership[halo]
    order = np.argsort(owner, kind="stable")  # by source part, then global id
    parts = int(membership.max()) + 1 if membership.size else 1
    return PartPlan(nodes, ext, local, np.searchsorted(ext, halo[order]),
                    np.bincount(owner, minlength=parts).astype(np.int64))


def send_lists(plans: list[PartPlan], membership: np.ndarray, p: int) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """(local row indices part p sends, grouped by destination; counts per destination).

    Part q receives from p the halo nodes p owns, in increasing global id — the order
    `plan_part` gave q's receive positions, so sender and receiver agree without a handshake.
    """
    own = plans[p].nodes
    idx, counts = [], []
    for q, plan in enumerate(plans):
        halo_ids = np.setdiff1d(plan.ext, plan.nodes, assume_unique=True)
        wanted = halo_ids[membership[halo_ids] == p] if q != p else halo_ids[:0]
        idx.append(np.searchsorted(own, wanted))
        counts.append(wanted.size)
    return np.concatenate(idx).astype(np.int64), np.asarray(counts, dtype=np.int64)


# ---------------------------------------------------------------- writing


def _save_npy(path: Path, array: np.ndarray) -> None:
    atomic_write(path, lambda f: np.save(f, np.ascontiguousarray(array), allow_pickle=False),
                 "wb")


def _save_npz(path: Path, **arrays: np.ndarray) -> None:
    atomic_write(path, lambda f: np.savez(f, **arrays), "wb")


def _save_json(path: Path, obj: dict) -> None:
    atomic_write(path, lambda f: f.write(json.dumps(obj, indent=2) + "\n"))


def _write_features(folder: Path, x: Any) -> dict:
    """Writes the part's feature rows; returns what part.json must say of them."""
    if sp.issparse(x):
        x = sp.csr_matrix(x)
        _save_npz(folder / "x.npz", data=x.data, indices=x.indices, indptr=x.indptr,
                  shape=np.array(x.shape))
        return {"x_nnz": int(x.nnz)}
    _save_npy(folder / "x.npy", np.asarray(x))
    return {}


def _write_part(folder: Path, graph: Graph, plan: PartPlan, send: tuple, token: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    nodes = plan.nodes
    _save_npy(folder / "nodes.npy", nodes)
    _save_npy(folder / "ext.npy", plan.ext)
    x_meta = _write_features(folder, graph.x[nodes])
    for name, arr in (("y", graph.y), ("train", graph.train_mask), ("val", graph.val_mask),
                      ("test", graph.test_mask)):
        _save_npy(folder / f"{name}.npy", np.asarray(arr)[nodes])
    a = plan.adj
    _save_npz(folder / "adj.npz", data=a.data, indices=a.indices, indptr=a.indptr,
              shape=np.array(a.shape))
    _save_npz(folder / "send.npz", idx=send[0], counts=send[1])
    _save_npz(folder / "recv.npz", pos=plan.recv_pos, counts=plan.recv_counts)
    _save_json(folder / "part.json", {"token": token, "nodes": int(nodes.size),
                                      "ext": int(plan.ext.size), "send": int(send[0].size),
                                      **x_meta})


def exchange_bytes(halo_rows: int, widths: list[int], itemsize: int = 4) -> int:
    """Bytes moved in one epoch: each layer's halo rows (width = its output width) go out in
    the training forward, their gradients come back in the backward, and go out again in the
    evaluation forward."""
    return int(halo_rows) * itemsize * 3 * int(sum(widths))


def write_partitions(graph: Graph, norm_adj: sp.spmatrix, parts: int, out: str | Path,
                     method: str = "metis", widths: list[int] | None = None,
                     seed: int = 0, made_from: dict | None = None) -> dict:
    """Partition `graph` (with its normalised adjacency Â, CSR) into `parts` folders under
    `out`; returns the manifest (also written, last, as `out/manifest.json`).

    `widths` are the widths each layer exchanges (a GCN's: hidden… then classes), for the
    bytes-per-epoch estimate; `made_from` is the config's `dataset_identity` (None when the
    graph came from no config: no run will then accept the partition).
    """
    adj = sp.csr_matrix(norm_adj, dtype=np.float32)
    adj.sort_indices()
    if adj.shape != (graph.num_nodes, graph.num_nodes):
        raise DataError(f"partition: Â has shape {adj.shape} for {graph.num_nodes} nodes")
    membership, used = assign_parts(adj, parts, method, seed)
    plans = [plan_part(adj, membership, p) for p in range(parts)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # a half-rewritten folder must not look valid
    token = os.urandom(8).hex()
    for p, plan in enumerate(plans):
        _write_part(part_dir(out, p), graph, plan, send_lists(plans, membership, p), token)
    manifest = _manifest(graph, adj, membership, plans, used, widths or [], token)
    manifest["dataset"] = made_from or {"fingerprint": None, "section": None}
    _save_json(out / MANIFEST, manifest)
    return manifest


def _manifest(graph: Graph, adj: sp.csr_matrix, membership: np.ndarray,
              plans: list[PartPlan], method: str, widths: list[int], token: str) -> dict:
    coo = adj.tocoo()
    cut = int(np.count_nonzero(membership[coo.row] != membership[coo.col]))
    halos = [int(p.ext.size - p.nodes.size) for p in plans]
    train, val, test = graph.split_sizes()
    return {
        "format": FORMAT, "token": token, "name": graph.name, "method": method,
        "num_parts": len(plans), "num_nodes": int(graph.num_nodes),
        "num_features": int(graph.num_features), "num_classes": int(graph.num_classes),
        "num_train": train, "num_val": val, "num_test": test,
        "nodes_per_part": [int(p.nodes.size) for p in plans],
        "halo_per_part": halos,
        "nnz_per_part": [int(p.adj.nnz) for p in plans],
        "cut_entries": cut,  # stored entries of Â joining two parts (both directions count)
        "widths": [int(w) for w in widths],
        "bytes_per_epoch": exchange_bytes(sum(halos), widths),
        "graph": graph_fingerprint(graph),
    }
