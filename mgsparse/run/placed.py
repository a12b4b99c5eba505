"""The graph as a run holds it (`PlacedGraph`): loaded once, its operands placed once.

Placing decides how each matrix a step reads is stored: the features, and the whole graph's
operand the model reads (Â = D^-1/2 (A + I) D^-1/2 for a GCN, the raw edge list for GAT and
GraphSAGE, nothing for an MLP). A matrix is sparse while its density (stored entries /
(rows·cols)) is at most `sparse.sparsity_threshold`, dense above it, unless its dense array
alone would pass the whole memory budget (then it is never built: it stays sparse and the
placement says why). The placed graph also holds the receptive fields built on its features
(run/field.py), the reasons and densities the run's summary shows, and the dense -> sparse
switch the memory budget (run/budget.py) pulls: before training when the estimated step is
over 80% of the budget, during it when a traced epoch's peak is. Every kind of run holds one (full batch,
fields, sampled batches; a partition's rows or a point cloud held as given) instead of
inheriting another kind's operands.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.catalog import DATASETS
from mgsparse.config import DatasetConfig, load_config
from mgsparse.data import Graph, load_dataset, load_section, user
from mgsparse.data.sampler import NeighborSampler
from mgsparse.engine import Tensor
from mgsparse.kernels import freeze
from mgsparse.nn.cheb import scaled_laplacian
from mgsparse.nn.gcn import normalized_adjacency
from mgsparse.run.budget import mb
from mgsparse.run.field import Field, describe
from mgsparse.run.monitor import nnz_ratio
from mgsparse.run.task import Progress
from mgsparse.sparse import SparseTensor, as_operand

# ---------------------------------------------------------------- the graph a config names


def load_graph(ds: DatasetConfig, progress: Progress | None = None) -> Graph:
    """The graph a config's dataset section names, through its source (`mgsparse.data.sources`):
    Planetoid or OGB (downloaded), karate, a synthetic SBM, or the user's own files
    (`load_config` made their paths absolute)."""
    return load_section(ds, progress)


def graph_for(target: str, root: str | Path | None = None, url: str | None = None,
              progress: Progress | None = None) -> Graph:
    """The graph a name (cora, ogbn-arxiv, ...), a YAML config, a folder of CSV files or an
    edge-list file means: what `mgsparse datasets info` describes."""
    path = Path(target)
    if path.suffix in (".yaml", ".yml"):
        ds = load_config(path).dataset
        return load_graph(dataclasses.replace(ds, root=ds.root or root, url=ds.url or url),
                          progress)
    if target.lower() not in DATASETS and (path.exists() or path.is_symlink() or path.suffix
                                           or "/" in target):  # a path, even a broken one
        return user.load_csv_path(path)
    return load_dataset(target, root=root, url=url, progress=progress)


# ---------------------------------------------------------------- one matrix


def place(m: Any, threshold: float, dtype: Any,
          budget: int | None = None) -> tuple[SparseTensor | Tensor, str]:
    """A matrix as the operand it will be for the whole run: sparse while its density is at
    most `threshold`, dense above it unless the dense array alone would pass the memory
    `budget`; and the reason, for the run's summary. Such an array is never allocated: no
    placement could hold it. The budget's own 80% rule applies once, after placing, to the
    estimated step (`run.budget.fit_within_budget`)."""
    density = nnz_ratio(m)
    dense_bytes = m.shape[0] * m.shape[1] * np.dtype(dtype).itemsize
    if density > threshold and budget is not None and dense_bytes > budget:
        operand, _ = place(m, 1.0, dtype)  # sparse, whatever the density
        return operand, f"sparse (dense would need {mb(dense_bytes)} of a {mb(budget)} budget)"
    operand = as_operand(m, threshold)
    if isinstance(operand, SparseTensor):
        operand = operand if operand.dtype == dtype else operand.astype(dtype)
        return fixed(operand), f"sparse (density {percent(density)} <= threshold {percent(threshold)})"
    dense = Tensor(np.asarray(operand.data, dtype=dtype))
    return fixed(dense), f"dense (density {percent(density)} > threshold {percent(threshold)})"


def percent(fraction: float) -> str:
    """A density as every table prints it: a percentage with two decimals (0.14%, 7.33%)."""
    return f"{fraction:.2%}"


def fixed(operand: SparseTensor | Tensor) -> SparseTensor | Tensor:
    """`operand` with its array frozen (`engine.inplace.freeze`): a placed operand never
    changes in a run (dropout writes elsewhere), and a frozen pair of features and Â lets a
    layer keep their product (`nn.edges.FixedProduct`). A write to it fails at once."""
    freeze(operand.values.data if isinstance(operand, SparseTensor) else operand.data)
    return operand


UNBUILT = object()  # the whole-graph operand before anything has asked for it
Built = tuple[Any, str, float]  # (operand, placement reason, density)


def whole_graph_operand(edge_index: np.ndarray, num_nodes: int, reads: str | None,
                        threshold: float, dtype: Any, budget: int | None,
                        edge_weight: np.ndarray | None = None) -> Built:
    """What a model that `reads` "norm_adj", "cheb_lap", "edge_index" or nothing (None) is
    handed; Â with A[target, source] = the edge's weight (1 without `edge_weight`), L̃ the
    scaled Laplacian of ChebNet (unweighted: `check_edge_weights` refuses weights for it)."""
    edge_density = edge_index.shape[1] / max(num_nodes, 1) ** 2
    if reads in ("norm_adj", "cheb_lap"):
        matrix = (normalized_adjacency(edge_index, num_nodes, edge_weight, dtype=dtype)
                  if reads == "norm_adj" else scaled_laplacian(edge_index, num_nodes, dtype))
        operand, why = place(matrix, threshold, dtype, budget)
        return operand, why, nnz_ratio(matrix)
    if reads is None:
        return None, "not used (the model reads no graph)", edge_density
    return edge_index, f"edge list ({edge_index.shape[1]:,} edges)", edge_density


# ---------------------------------------------------------------- the placed graph


class PlacedGraph:
    """The features, the whole-graph operand (built on first use) and the receptive fields of
    one graph, as a run holds them; `placement` and `densities` say how and why, by name."""

    def __init__(self, features: Any, placement: dict[str, str], densities: dict[str, float],
                 edge_index: np.ndarray | None = None, operand: Any = None,
                 build: Callable[[], Built] | None = None, switch: bool = True):
        self.features, self.placement, self.densities = features, placement, densities
        self.edge_index = edge_index
        self._operand = operand
        self._build = build  # how to build the operand while it is UNBUILT
        self.switch = switch  # False: operands held as given (no dense -> sparse switch)
        self._fields: dict[str, Field] = {}  # kept for every epoch and run
        self.version = 0  # bumped when an operand changes: a recorded step reads the old one
        self._field_sampler: NeighborSampler | None = None
        self.edge_data: dict[str, np.ndarray] = {}  # edge_attr / edge_type, into every block

    @classmethod
    def from_graph(cls, graph: Graph, reads: str | None, threshold: float,
                   dtype: Any = np.float32, budget: int | None = None) -> PlacedGraph:
        """`graph`'s features placed now; the operand a model that `reads` it gets, placed
        when first asked for (`operand`): the task decides whether that is now."""
        x = graph.x if sp.issparse(graph.x) else np.asarray(graph.x)  # dense stays dense
        features, why = place(x, threshold, dtype, budget)
        edge_index = np.asarray(graph.edge_index, dtype=np.int64)
        num_nodes, weight = features.shape[0], graph.edge_weight
        placed = cls(features, {"features": why}, {"features": nnz_ratio(x)}, edge_index,
                     UNBUILT, lambda: whole_graph_operand(edge_index, num_nodes, reads,
                                                          threshold, dtype, budget, weight))
        placed.edge_data = {name: getattr(graph, name) for name in ("edge_attr", "edge_type")
                            if getattr(graph, name) is not None}
        return placed

    @classmethod
    def held(cls, features: Any, operand: Any, placement: dict[str, str],
             densities: dict[str, float]) -> PlacedGraph:
        """Operands placed elsewhere (a partition's rows, a point cloud), held as they are: a
        partitioned run switching one rank's placement alone would split the ranks."""
        return cls(features, placement, densities, operand=operand, switch=False)

    def __repr__(self) -> str:
        shape = "x".join(str(n) for n in self.features.shape)
        return f"PlacedGraph({shape} features, operands {sorted(self.operands())})"

    @property
    def num_nodes(self) -> int:
        return self.features.shape[0]

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    # ------------------------------------------------------------ the whole-graph operand

    @property
    def operand(self) -> Any:
        """The model's whole-graph operand (Â, the edge list or None), built on first use."""
        if self._operand is UNBUILT:
            self._operand, self.placement["adjacency"], self.densities["adjacency"] = (
                self._build())
        return self._operand

    def defer_operand(self, why: str, operand: Any = UNBUILT) -> None:
        """Not built now (`operand` UNBUILT: on demand; None: never), and why."""
        self._operand = operand
        self.placement["adjacency"] = why
        edges = 0 if self.edge_index is None else self.edge_index.shape[1]
        self.densities["adjacency"] = edges / max(self.num_nodes, 1) ** 2

    def operands(self) -> dict[str, Any]:
        """What the run holds: the features and, once built, the whole-graph operand."""
        built = self._operand is not UNBUILT and self._operand is not None
        return {"features": self.features, **({"adjacency": self._operand} if built else {})}

    # ------------------------------------------------------------ the dense -> sparse switch

    def dense_operands(self) -> list[str]:
        """Names of the operands stored dense that could be stored sparse, largest first."""
        if not self.switch:
            return []
        dense = [(op.data.nbytes, name) for name, op in self.operands().items()
                 if isinstance(op, Tensor) and op.ndim == 2]
        return [name for _, name in sorted(dense, reverse=True)]

    def make_sparse(self, name: str, reason: str) -> None:
        """Store operand `name` sparse from now on (same values); `reason` joins the placement."""
        sparse = fixed(SparseTensor.from_dense(self.operands()[name].data))
        if name == "features":
            self.features = sparse
        else:
            self._operand = sparse
        self.placement[name] = reason
        self._fields = {}  # their rows were gathered from the old operand
        self.version += 1

    def with_operands(self, features: Any, operand: Any) -> PlacedGraph:
        """The same graph on other copies of its operands (the dense-vs-sparse bench)."""
        other = copy.copy(self)
        other.features, other._operand, other._fields = features, operand, {}
        other.placement, other.densities = dict(self.placement), dict(self.densities)
        return other

    # ------------------------------------------------------------ receptive fields

    def field(self, name: str, rows: np.ndarray, layers: int) -> Field:
        """The `layers`-deep receptive field of `rows` (run/field.py), built once for every
        epoch and run, under `name` ("training", "scored"); the placement describes it. Its
        blocks carry the graph's edge features and types, sliced by their edge ids."""
        if name not in self._fields:
            if self._field_sampler is None:  # its in-CSR is O(E): kept only while needed
                self._field_sampler = NeighborSampler(self.edge_index, self.num_nodes,
                                                      [-1] * layers, **self.edge_data)
            blocks = self._field_sampler.sample(rows, None).blocks
            self._fields[name] = Field(blocks, self.features)
            self.placement[f"{name} rows"] = describe(self._fields[name], self.num_nodes)
        return self._fields[name]

    def release_sampler(self) -> None:
        """Drop the fields' sampler once they are built (rebuilt if a field must be again)."""
        self._field_sampler = None
