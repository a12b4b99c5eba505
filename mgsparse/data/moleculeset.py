"""`MoleculeSet`: molecules as one set of flat arrays, with bond features and graph targets.

The layout is `GraphSet`'s (node and edge offsets per graph, global node ids), plus what a
molecule brings that a TU graph does not:

- ``x``: (N, F) float32 atom features, molecule after molecule;
- ``edge_index``: (2, E) int64 global atom ids, each bond in both directions, sorted by
  (source, target) (so by molecule too);
- ``edge_attr``: (E, F_e) float32 bond features, row k for edge k (both directions of a bond
  carry the same row);
- ``node_ptr``, ``edge_ptr``: (G+1,) int64 offsets, as in `GraphSet`;
- ``y``: (G,) the target: float64 in the target's own units (regression), or int64 class ids
  into ``classes`` (a class target, such as the solubility set's ``SOL_classification``);
- ``test_mask``: (G,) bool, the source's own test part (the solubility set's test file), or
  None when the task draws its split;
- ``elements``: the element vocabulary of an SDF's atom one-hot (`sdf_io.atom_features`),
  or () for SMILES, whose features are OGB's fixed vocabulary: how to featurise molecules
  the model has not seen (`mgsparse predict --molecules`).

It is not a `GraphSet` (whose labels are class ids) but turns into one for a class target
(`graphset`), so graph classification trains on it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgsparse.data.graphset import GraphSet, ranges
from mgsparse.errors import DataError


@dataclass
class MoleculeSet:
    """G molecules in flat arrays (see the module docstring for the layout)."""

    x: np.ndarray
    edge_index: np.ndarray
    edge_attr: np.ndarray
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    y: np.ndarray
    name: str
    target: str  # the property or column the targets came from (SOL, expt)
    unit: str = ""  # the target's unit, for reports (log S, kcal/mol)
    classes: tuple[str, ...] = ()  # a class target's class names; () for a numeric one
    names: tuple[str, ...] = ()  # each molecule's name (SDF title or NAME, CSV row)
    test_mask: np.ndarray | None = None
    elements: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        g = self.y.shape[0] if self.y.ndim == 1 else -1
        if self.x.ndim != 2 or self.edge_index.shape[:1] != (2,) or self.edge_attr.ndim != 2:
            raise DataError(f"{self.name}: x {self.x.shape}, edge_index "
                            f"{self.edge_index.shape}, edge_attr {self.edge_attr.shape}: "
                            "expected (N, F), (2, E), (E, F_e)")
        if self.edge_attr.shape[0] != self.edge_index.shape[1]:
            raise DataError(f"{self.name}: {self.edge_attr.shape[0]} edge_attr rows for "
                            f"{self.edge_index.shape[1]} edges")
        for ptr, total in (("node_ptr", self.num_nodes), ("edge_ptr", self.num_edges)):
            p = getattr(self, ptr)
            if p.shape != (g + 1,) or p[0] != 0 or p[-1] != total or np.any(np.diff(p) < 0):
                raise DataError(f"{self.name}: {ptr} must have {g + 1} entries rising from 0 "
                                f"to {total}")
        owner = np.repeat(np.arange(self.num_graphs), self.edges_per_graph)
        lo, hi = self.node_ptr[owner], self.node_ptr[owner + 1]
        if ((self.edge_index < lo) | (self.edge_index >= hi)).any():
            raise DataError(f"{self.name}: an edge leaves the molecule that owns it")
        if self.test_mask is not None and self.test_mask.shape != (g,):
            raise DataError(f"{self.name}: test_mask has shape {self.test_mask.shape}, "
                            f"expected ({g},)")

    # --- sizes -------------------------------------------------------------------------------

    @property
    def num_graphs(self) -> int:
        return int(self.y.shape[0])

    def __len__(self) -> int:
        return self.num_graphs

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Directed edges: each bond counts twice."""
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def num_edge_features(self) -> int:
        return int(self.edge_attr.shape[1])

    @property
    def nodes_per_graph(self) -> np.ndarray:
        return np.diff(self.node_ptr)

    @property
    def edges_per_graph(self) -> np.ndarray:
        return np.diff(self.edge_ptr)

    @property
    def is_regression(self) -> bool:
        """A numeric target (float y), not class ids."""
        return not self.classes

    # --- selection ---------------------------------------------------------------------------

    def parts(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(nodes, edges, node_ptr, edge_ptr) of the molecules `idx` (int ids, in that order):
        the kept rows of x and of edge_attr, and the new offsets. Vectorised (`ranges`)."""
        idx = np.asarray(idx, dtype=np.int64).ravel()
        n_counts, e_counts = self.nodes_per_graph[idx], self.edges_per_graph[idx]
        node_ptr = np.concatenate([[0], np.cumsum(n_counts)]).astype(np.int64)
        edge_ptr = np.concatenate([[0], np.cumsum(e_counts)]).astype(np.int64)
        return (ranges(self.node_ptr[idx], n_counts), ranges(self.edge_ptr[idx], e_counts),
                node_ptr, edge_ptr)

    def subset(self, idx) -> MoleculeSet:
        """The molecules `idx` (int ids in any order, or a (G,) bool mask) as a new set, node
        ids renumbered from 0; each edge moves by its molecule's shift."""
        idx = np.asarray(idx)
        idx = np.flatnonzero(idx) if idx.dtype == np.bool_ else idx.astype(np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_graphs):
            raise IndexError(f"{self.name}: molecule index out of range for "
                             f"{self.num_graphs} molecules")
        nodes, edges, node_ptr, edge_ptr = self.parts(idx)
        shift = np.repeat(node_ptr[:-1] - self.node_ptr[idx], self.edges_per_graph[idx])
        names = tuple(self.names[i] for i in idx) if self.names else ()
        test = None if self.test_mask is None else self.test_mask[idx]
        return MoleculeSet(self.x[nodes], self.edge_index[:, edges] + shift,
                           self.edge_attr[edges], node_ptr, edge_ptr, self.y[idx], self.name,
                           self.target, self.unit, self.classes, names, test, self.elements)

    def graphset(self) -> GraphSet:
        """The molecules as a `GraphSet` (atoms, bonds and the bonds' features) for a class
        target: graph classification's own data, so a GINE layer reads the bonds there too."""
        if self.is_regression:
            raise DataError(f"{self.name}: target {self.target} is numeric, not classes")
        return GraphSet(self.x, self.edge_index, self.node_ptr, self.edge_ptr,
                        self.y.astype(np.int64), len(self.classes), self.name,
                        edge_attr=self.edge_attr)

    # --- description -------------------------------------------------------------------------

    def info(self) -> dict:
        """Counts and the target's spread, for `datasets info` and the run's summary."""
        y = self.y.astype(np.float64)
        target = ({"mean": float(y.mean()), "std": float(y.std()), "min": float(y.min()),
                   "max": float(y.max())} if self.is_regression and y.size else
                  {"classes": list(self.classes)})
        return {"name": self.name, "graphs": self.num_graphs, "nodes": self.num_nodes,
                "edges": self.num_edges, "features": self.num_features,
                "edge_features": self.num_edge_features, "target": self.target,
                "unit": self.unit, "target_stats": target,
                "fixed_test": None if self.test_mask is None else int(self.test_mask.sum())}

    def __repr__(self) -> str:
        kind = f"classes={len(self.classes)}" if self.classes else f"unit={self.unit!r}"
        return (f"MoleculeSet(name={self.name!r}, num_graphs={self.num_graphs}, "
                f"num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"num_features={self.num_features}, "
                f"num_edge_features={self.num_edge_features}, target={self.target!r}, {kind})")


def from_bonds(name: str, x: np.ndarray, atoms: np.ndarray, bonds: np.ndarray,
               bond_attr: np.ndarray, bond_counts: np.ndarray, y: np.ndarray,
               **facts) -> MoleculeSet:
    """A `MoleculeSet` from every molecule's atoms and bonds stacked: x (N, F) the atom
    features; `atoms` (G,) atoms per molecule; `bonds` (B, 2) atom ids local to their molecule
    (from 0), `bond_attr` (B, F_e), `bond_counts` (G,) bonds per molecule. Each bond becomes
    two directed edges carrying its row of `bond_attr`, sorted by (source, target). `facts`
    are MoleculeSet's other fields (target, unit, classes, names, test_mask)."""
    node_ptr = np.concatenate([[0], np.cumsum(atoms)]).astype(np.int64)
    offset = np.repeat(node_ptr[:-1], bond_counts)  # each bond's first global atom id
    src = np.concatenate([bonds[:, 0], bonds[:, 1]]) + np.concatenate([offset, offset])
    dst = np.concatenate([bonds[:, 1], bonds[:, 0]]) + np.concatenate([offset, offset])
    order = np.lexsort((dst, src))  # global ids rise with the molecule: sorted by it too
    edge_index = np.stack([src[order], dst[order]]).astype(np.int64)
    edge_attr = np.concatenate([bond_attr, bond_attr])[order].astype(np.float32)
    edge_ptr = np.concatenate([[0], np.cumsum(2 * np.asarray(bond_counts))]).astype(np.int64)
    return MoleculeSet(x.astype(np.float32), edge_index.reshape(2, -1),
                       edge_attr.reshape(-1, bond_attr.shape[1]), node_ptr, edge_ptr, y, name,
                       **facts)


def targets_from_text(values: list[str | None], places: list[str], target: str,
                      known: list[str] | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """(y, classes) from each molecule's `target` as written (None: the molecule has none),
    `places[i]` naming molecule i in messages ("file: molecule 3 (line 40)").

    The first molecule's value decides the kind: a number makes a numeric target (float64;
    a later value that is no finite number is refused by name), any other text a class
    target (class ids in the sorted order of the class names). A molecule without the
    target is refused, naming what it does have (`known`)."""
    missing = next((i for i, v in enumerate(values) if v is None or not v.strip()), None)
    if missing is not None:
        has = f" (it has: {', '.join(known)})" if known else ""
        raise DataError(f"{places[missing]}: no value of the target {target!r}{has}")
    if not values:
        raise DataError(f"no molecules to read the target {target!r} of")
    if _number(values[0]) is None:
        classes = tuple(sorted({v.strip() for v in values}))
        index = {c: k for k, c in enumerate(classes)}
        return np.array([index[v.strip()] for v in values], dtype=np.int64), classes
    y = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        number = _number(v)
        if number is None:
            raise DataError(f"{places[i]}: target {target!r} is {v.strip()!r}, not a finite "
                            "number (as the first molecule's is)")
        y[i] = number
    return y, ()


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None
