"""Full-graph GCN training on one part per MPI rank, equal to single-process training.

Every rank runs the single-process `GCN` on its own rows: the features are its part's, the
adjacency a `HaloAdjacency` (halo exchange, then the local product), the dropout keyed by
global node id (so the masks are those of one process). After backward the parameter
gradients are summed over ranks, so every rank takes the same optimizer step and holds the
same parameters. The loss is the global masked mean:

    L = Σ_r Σ_{i ∈ train_r} ℓ_i / n_train,   each rank differentiating its own share,

and the metrics are sums of per-rank counts. `mgsparse.run.tasks.partitioned` runs these in
the one training loop; `logits`, `allreduce_grads` and `evaluate` are collectives: every rank
calls them, in the same order, once per epoch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mgsparse.config import Config
from mgsparse.data.partition import LocalPart, load_part
from mgsparse.distributed.comm import Comm
from mgsparse.distributed.halo import HaloAdjacency, HaloPlan
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError
from mgsparse.nn import functional as F
from mgsparse.nn.module import Module
from mgsparse.sparse import SparseTensor, as_operand


@dataclass
class PartProblem:
    """One rank's operands: its feature rows, its Â rows (with the halo plan), its labels."""

    part: LocalPart
    features: SparseTensor | Tensor  # (n_p, F)
    norm_adj: HaloAdjacency  # (n_p, e_p) applied to owned rows
    y: np.ndarray
    masks: dict[str, np.ndarray]  # train/val/test -> local row indices
    totals: dict[str, int]  # train/val/test -> global counts

    @property
    def comm(self) -> Comm:
        return self.norm_adj.plan.comm

    @property
    def num_features(self) -> int:
        return int(self.part.manifest["num_features"])

    @property
    def num_classes(self) -> int:
        return int(self.part.manifest["num_classes"])


def load_problem(root: str | Path, comm: Comm, sparsity_threshold: float = 0.1,
                 dtype: Any = np.float32) -> PartProblem:
    """Rank `comm.rank`'s part of the partition in `root` (it reads no other part's files)."""
    part = load_part(root, comm.rank)
    if part.manifest["num_parts"] != comm.size:
        raise ConfigError(f"{root} holds {part.manifest['num_parts']} parts but the job has "
                          f"{comm.size} ranks; run with mpiexec -n {part.manifest['num_parts']}")
    features = as_operand(part.x, sparsity_threshold, dtype=dtype)
    local = SparseTensor.from_scipy(part.adj, dtype=dtype)
    masks = {k: np.flatnonzero(getattr(part, f"{k}_mask")) for k in ("train", "val", "test")}
    totals = {k: int(part.manifest[f"num_{k}"]) for k in ("train", "val", "test")}
    part = dataclasses.replace(part, x=None, adj=None)  # the operands hold their own copies
    return PartProblem(part, features, HaloAdjacency(local, HaloPlan.of(part, comm)),
                       np.asarray(part.y, np.int64), masks, totals)


def masked_loss_sum(logits: Tensor, y: np.ndarray, rows: np.ndarray, total: int) -> Tensor:
    """This rank's share Σ_{i ∈ rows} ℓ_i / total of the global mean loss. A rank without
    such rows still returns a loss joined to `logits` (times 0), so its backward runs the
    same halo exchanges as every other rank's."""
    if rows.size == 0:
        return (logits * 0.0).sum()
    return F.cross_entropy(logits, y, rows) * (rows.size / max(total, 1))


def logits(problem: PartProblem, model: Module) -> Tensor:
    """(n_p, classes): the model on this rank's rows (a collective: it exchanges halos)."""
    model.node_ids = problem.part.nodes  # keyed dropout: masks by global node id
    return model(problem.features, problem.norm_adj)


def allreduce_grads(comm: Comm, params: list, loss: float) -> float:
    """Sum every gradient and the loss over ranks in one Allreduce (one float64 buffer);
    returns the summed loss. Every rank then holds the same gradients."""
    grads = [p.grad if p.grad is not None else np.zeros_like(p.data) for p in params]
    flat = np.concatenate([g.ravel() for g in grads] + [np.array([loss])])
    summed = comm.allreduce(flat)
    start = 0
    for p, g in zip(params, grads):
        p.grad = summed[start:start + g.size].reshape(g.shape).astype(p.data.dtype)
        start += g.size
    return float(summed[-1])


def evaluate(problem: PartProblem, model: Module) -> dict[str, float]:
    """val_loss and train/val/test accuracy over the whole graph (sums over ranks)."""
    p = problem
    model.eval()
    with no_grad():
        out = logits(p, model)
    pred = out.data.argmax(axis=1)
    val = p.masks["val"]
    val_sum = (float(F.cross_entropy(out, p.y, val).data) * val.size) if val.size else 0.0
    local = [val_sum] + [float(np.sum(pred[p.masks[k]] == p.y[p.masks[k]]))
                         for k in ("train", "val", "test")]
    s = p.comm.allreduce(np.array(local))
    n = {k: max(v, 1) for k, v in p.totals.items()}
    return {"val_loss": s[0] / n["val"], "train_acc": s[1] / n["train"],
            "val_acc": s[2] / n["val"], "test_acc": s[3] / n["test"]}


def exchange_widths(config: Config, num_classes: int) -> list[int]:
    """The width of the rows each GCN layer exchanges: its output width (x·W is computed
    before the product with Â, so the exchange is hidden or classes wide, never F)."""
    return [config.model.hidden] * (config.model.layers - 1) + [int(num_classes)]


def partition_graph(config: Config, graph: Any, parts: int, out: str | Path,
                    method: str = "metis") -> dict:
    """`mgsparse partition`: Â exactly as single-process training builds it, split into
    `parts` folders under `out`; returns the manifest (edge cut, halos, bytes per epoch)."""
    from mgsparse.data.partition import write_partitions
    from mgsparse.nn.gcn import normalized_adjacency

    norm_adj = normalized_adjacency(graph.edge_index, graph.num_nodes,
                                    graph.edge_weight).to_scipy("csr")
    return write_partitions(graph, norm_adj, parts, out, method=method,
                            widths=exchange_widths(config, graph.num_classes),
                            seed=config.train.seed)
