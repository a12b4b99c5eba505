"""Everything a run needs that never changes between epochs, built once from config + graph.

The normalised adjacency Â and the feature matrix are placed here (sparse or dense, by the
config's `sparsity_threshold`) and cached for the whole run: rebuilding them per epoch is
the classic way to lose the speed of sparse training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.config import Config, DatasetConfig, ModelConfig, OptimConfig
from mgsparse.data import Graph, load_dataset
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError
from mgsparse.monitor import nnz_ratio
from mgsparse.nn.conv import normalized_adjacency
from mgsparse.nn.gat import GAT
from mgsparse.nn.models import GCN, MLP
from mgsparse.nn.module import Module
from mgsparse.nn.sage import GraphSAGE
from mgsparse.optim import SGD, Adam, AdamW, Optimizer
from mgsparse.sparse import SparseTensor, as_operand


@dataclass
class Problem:
    """A graph made ready for training: operands, labels and split indices."""

    name: str
    features: SparseTensor | Tensor  # (N, F)
    norm_adj: SparseTensor | Tensor  # (N, N), Â = D^-1/2 (A + I) D^-1/2
    y: np.ndarray  # (N,) int64, -1 = no label
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int
    placement: dict[str, str]  # operand -> "sparse (density … <= threshold …)" or "dense (…)"
    feature_density: float
    adjacency_density: float
    edge_index: np.ndarray | None = None  # (2, E) raw edges: GAT, SAGE and learned edge weights

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    @property
    def num_nodes(self) -> int:
        return self.features.shape[0]


def load_graph(ds: DatasetConfig, progress: Any = None) -> Graph:
    """The dataset a config names: Planetoid (downloaded), karate, or a synthetic SBM."""
    kwargs: dict[str, Any] = {}
    if ds.name == "synthetic":
        kwargs = dict(num_nodes=ds.num_nodes, num_classes=ds.num_classes,
                      avg_degree=ds.avg_degree, homophily=ds.homophily,
                      num_features=ds.num_features, seed=ds.seed)
    if ds.split == "random":
        kwargs.update(num_train_per_class=ds.num_train_per_class, num_val=ds.num_val,
                      num_test=ds.num_test, seed=ds.seed)
    return load_dataset(ds.name, root=ds.root, split=ds.split, url=ds.url,
                        normalize_features=ds.normalize_features, progress=progress, **kwargs)


def _place(m: Any, threshold: float, dtype: Any) -> tuple[SparseTensor | Tensor, float, str]:
    density = nnz_ratio(m)
    operand = as_operand(m, threshold)
    if isinstance(operand, SparseTensor):
        operand = operand if operand.dtype == dtype else operand.astype(dtype)
        why = f"sparse (density {density:.3g} <= threshold {threshold:g})"
    else:
        operand = Tensor(np.asarray(operand.data, dtype=dtype))
        why = f"dense (density {density:.3g} > threshold {threshold:g})"
    return operand, density, why


def prepare(config: Config, graph: Graph, dtype: Any = np.float32) -> Problem:
    """Place features and Â once, and turn the masks into index arrays."""
    threshold = config.sparse.sparsity_threshold
    x = graph.x if sp.issparse(graph.x) else np.asarray(graph.x)
    features, f_density, f_why = _place(sp.csr_matrix(x) if not sp.issparse(x) else x,
                                        threshold, dtype)
    adjacency = normalized_adjacency(graph.edge_index, graph.num_nodes, dtype=dtype)
    norm_adj, a_density, a_why = _place(adjacency, threshold, dtype)
    return Problem(
        name=graph.name, features=features, norm_adj=norm_adj, y=np.asarray(graph.y, np.int64),
        train_idx=np.flatnonzero(graph.train_mask), val_idx=np.flatnonzero(graph.val_mask),
        test_idx=np.flatnonzero(graph.test_mask), num_classes=int(graph.num_classes),
        placement={"adjacency": a_why, "features": f_why},
        feature_density=f_density, adjacency_density=a_density,
        edge_index=np.asarray(graph.edge_index, dtype=np.int64),
    )


def build_model(m: ModelConfig, problem: Problem, rng: np.random.Generator) -> Module:
    args = dict(layers=m.layers, dropout=m.dropout, activation=m.activation, rng=rng)
    if m.kind == "gcn":
        learned = {"edge_index": problem.edge_index, "learn_edge_weight": True}
        return GCN(problem.num_features, m.hidden, problem.num_classes, **args,
                   **(learned if m.learn_edge_weight else {}))
    if m.kind == "gat":  # bound to the raw edges: the trainer's Â is not what attention needs
        return GAT(problem.num_features, m.hidden, problem.num_classes, heads=m.heads,
                   output_heads=m.output_heads, attn_dropout=m.attn_dropout,
                   edge_index=problem.edge_index, **args)
    if m.kind == "sage":
        return GraphSAGE(problem.num_features, m.hidden, problem.num_classes,
                         normalize=m.normalize, edge_index=problem.edge_index, **args)
    if m.kind == "mlp":
        return MLP(problem.num_features, m.hidden, problem.num_classes, **args)
    raise ConfigError(f"model.kind {m.kind!r} is not available yet for graph training")


def first_layer_parameters(model: Module) -> list:
    """The parameters of the first layer: the GCN recipe decays these only."""
    first = next(iter(model.children()))  # convs / linears
    return [p for name, p in first.named_parameters() if name.startswith("0.")]


def build_optimizer(o: OptimConfig, model: Module) -> Optimizer:
    params = model.parameters()
    if o.weight_decay_first_layer_only and o.weight_decay > 0:
        first = {id(p) for p in first_layer_parameters(model)}
        groups = [{"params": [p for p in params if id(p) in first], "weight_decay": o.weight_decay},
                  {"params": [p for p in params if id(p) not in first], "weight_decay": 0.0}]
        groups = [g for g in groups if g["params"]]
    else:
        groups = [{"params": params, "weight_decay": o.weight_decay}]
    if o.name == "sgd":
        return SGD(groups, lr=o.lr, momentum=o.momentum, nesterov=o.nesterov)
    if o.name == "adam":
        return Adam(groups, lr=o.lr, betas=tuple(o.betas))
    return AdamW(groups, lr=o.lr, betas=tuple(o.betas))
