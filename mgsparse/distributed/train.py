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
from mgsparse.data.partition import (
    MANIFEST,
    LocalPart,
    dataset_identity,
    load_part,
    part_dir,
    read_manifest,
)
from mgsparse.distributed.comm import Comm
from mgsparse.distributed.halo import HaloAdjacency, HaloPlan
from mgsparse.engine import Tensor, no_grad
from mgsparse.errors import ConfigError, DataError
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


def load_problem(root: str | Path, comm: Comm, config: Config,
                 dtype: Any = np.float32) -> PartProblem:
    """Rank `comm.rank`'s part of the partition in `root` (it reads no other part's files),
    once the partition is one of `config`'s graph for this many ranks."""
    if not Path(root).is_dir():
        raise ConfigError(f"--partitions {root}: no such folder; write it with `mgsparse "
                          f"partition {config.source} --parts K --out {root}`")
    manifest = read_manifest(root)
    if manifest["num_parts"] != comm.size:
        raise ConfigError(f"{root} holds {manifest['num_parts']} parts but the job has "
                          f"{comm.size} ranks; run with mpiexec -n {manifest['num_parts']}")
    check_made_from(manifest, config, root)
    part = load_part(root, comm.rank)
    features = as_operand(part.x, config.sparse.sparsity_threshold, dtype=dtype)
    local = SparseTensor.from_scipy(part.adj, dtype=dtype)
    masks = {k: np.flatnonzero(getattr(part, f"{k}_mask")) for k in ("train", "val", "test")}
    totals = {k: int(part.manifest[f"num_{k}"]) for k in ("train", "val", "test")}
    part = dataclasses.replace(part, x=None, adj=None)  # the operands hold their own copies
    return PartProblem(part, features, HaloAdjacency(local, HaloPlan.of(part, comm)),
                       np.asarray(part.y, np.int64), masks, totals)


def _spell(section: dict, other: dict) -> str:
    """A dataset section by its name and the keys in which it differs from `other`."""
    keys = sorted(k for k in section.keys() | other.keys()
                  if k != "name" and section.get(k) != other.get(k))
    given = ", ".join(f"{k}={section.get(k)!r}" for k in keys[:3])
    return f"dataset {section.get('name')!r}" + (f" with {given}" if keys and
                                                 section.get("name") == other.get("name")
                                                 else "")


def check_made_from(manifest: dict, config: Config, root: str | Path) -> None:
    """The partition is of the graph `config` names: its dataset section (name and the
    options its source reads) has the fingerprint the manifest recorded. A rank cannot hash
    the graph itself (it reads only its part), so the section is what is compared."""
    ours, theirs = dataset_identity(config.dataset), manifest["dataset"]
    if theirs.get("fingerprint") == ours["fingerprint"]:
        return
    where = Path(root) / MANIFEST
    if not isinstance(theirs.get("section"), dict):
        raise ConfigError(f"{where} records no dataset section it was made from, so it "
                          f"cannot be checked against {config.source}; partition again")
    made, mine = theirs["section"], ours["section"]
    raise ConfigError(f"{where} is a partition of {_spell(made, mine)} (fingerprint "
                      f"{theirs['fingerprint']}), not of {config.source}'s "
                      f"{_spell(mine, made)} (fingerprint {ours['fingerprint']}): partition "
                      f"this config's graph with `mgsparse partition`")


def check_across_ranks(problem: PartProblem, root: str | Path) -> None:
    """What no rank can check alone: every rank read the same partition run, each part
    receives from each peer the rows that peer sends it, and the parts' labelled nodes add up
    to the manifest's counts. A collective: all three exchanges happen on every rank before
    any check may raise (an early exit would pair the ranks' collectives wrongly). A
    mismatch is a DataError naming the file."""
    p, comm = problem.part, problem.comm
    token = float(int(p.manifest["token"][:12], 16))  # 48 bits: exact in float64
    tokens = comm.allreduce(np.array([token, -token]), "max")
    sent = comm.exchange_counts(p.send_counts)  # sent[q]: rows part q sends to this one
    counts = comm.allreduce(np.array([problem.masks[k].size for k in ("train", "val", "test")]))
    if tokens[0] != -tokens[1]:
        raise DataError(f"{root}/{MANIFEST}: the ranks read different partitions (rank "
                        f"{comm.rank} another run's); give every rank the same folder")
    if not np.array_equal(sent, p.recv_counts):
        q = int(np.flatnonzero(sent != p.recv_counts)[0])
        raise DataError(f"{part_dir(root, p.part) / 'recv.npz'}: expects {p.recv_counts[q]} "
                        f"rows from part {q}, which sends {sent[q]} "
                        f"({part_dir(root, q) / 'send.npz'}); run `mgsparse partition` again")
    for k, count in zip(("train", "val", "test"), counts):
        if int(count) != problem.totals[k]:
            raise DataError(f"{root}/{MANIFEST}: num_{k} is {problem.totals[k]} but the parts "
                            f"hold {int(count)} {k} nodes; run `mgsparse partition` again")


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
    """`mgsparse partition`: Â exactly as single-process training builds it (with the edge
    weights the graph has), split into `parts` folders under `out`; returns the manifest
    (edge cut, halos, bytes per epoch, and what it was made from)."""
    from mgsparse.data.partition import write_partitions
    from mgsparse.nn.gcn import normalized_adjacency

    norm_adj = normalized_adjacency(graph.edge_index, graph.num_nodes,
                                    graph.edge_weight).to_scipy("csr")
    return write_partitions(graph, norm_adj, parts, out, method=method,
                            widths=exchange_widths(config, graph.num_classes),
                            seed=config.train.seed, made_from=dataset_identity(config.dataset))
