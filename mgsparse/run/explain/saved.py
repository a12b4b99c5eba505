"""`mgsparse explain`: a saved run's node predictions explained, one node or many, with the
figures that say how good the explanations are.

The model is restored as `mgsparse predict` restores it (`run.predict.saved_run`), in eval
mode. Each node is explained on its own computation subgraph (`field`), by one of `METHODS`
(`methods`), and scored (`scores`): fidelity± always, the AUC where the dataset plants an
answer (`data.motifs`: the same graph again from the run's ``dataset.seed``). Node ids are
the dataset's own, as `predict`'s. Explaining many reports each node to a callback as it is
done, so a caller can write it at once and keep it when stopped.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mgsparse.catalog import DATASETS, MODELS
from mgsparse.data.motifs import MAKERS, Planted, planted
from mgsparse.data.user import load_node_ids
from mgsparse.errors import ConfigError, DataError, InputFileError
from mgsparse.run.explain import field as fields
from mgsparse.run.explain import scores as sc
from mgsparse.run.explain.methods import METHODS, Options, predict, scores
from mgsparse.run.kinds import make_task
from mgsparse.run.predict import restore_saved, saved_run
from mgsparse.run.tasks.nodes import NodeTask

EXPLAINED_KINDS = tuple(k for k, m in MODELS.items() if m.operand == "norm_adj")


@dataclass(frozen=True)
class Explanation:
    """One node's explanation: its `prediction`, the computation edges as (source, target)
    pairs of the dataset's ids (2, E_c) with their scores, each feature column's score, and
    its figures (`auc` None where undefined or without a planted answer)."""

    node: int
    method: str
    prediction: int
    edge_index: np.ndarray
    edge_score: np.ndarray
    feature_score: np.ndarray
    fidelity_plus: float
    fidelity_minus: float
    sparsity: float
    auc: float | None
    truth: np.ndarray | None
    seconds: float

    def csv_rows(self) -> list[list]:
        truth = [None] * self.edge_score.size if self.truth is None else self.truth.tolist()
        return [[self.node, s, t, f"{v:.6g}", "" if g is None else int(g)]
                for (s, t), v, g in zip(self.edge_index.T.tolist(), self.edge_score, truth)]


CSV_HEADER = ["node", "source", "target", "score", "truth"]


@dataclass
class Summary:
    """The figures of many explanations (means over the nodes; AUC over those where it is
    defined, and pooled over all their edges)."""

    method: str
    items: list[Explanation] = field(default_factory=list)
    interrupted: bool = False

    def as_dict(self) -> dict:
        aucs = [e.auc for e in self.items if e.auc is not None]
        have_truth = [e for e in self.items if e.truth is not None]
        pooled = None
        if have_truth:
            pooled = sc.auc(np.concatenate([e.truth for e in have_truth]),
                            np.concatenate([e.edge_score for e in have_truth]))
        n = len(self.items)
        mean = (lambda name: float(np.mean([getattr(e, name) for e in self.items]))
                if n else None)
        return {"method": self.method, "nodes": n, "interrupted": self.interrupted,
                "auc_mean": float(np.mean(aucs)) if aucs else None, "auc_nodes": len(aucs),
                "auc_pooled": pooled, "fidelity_plus": mean("fidelity_plus"),
                "fidelity_minus": mean("fidelity_minus"), "sparsity": mean("sparsity"),
                "seconds_per_item": mean("seconds")}


class Explainer:
    """A saved run ready to explain its node predictions."""

    def __init__(self, out_dir: str | Path, run: int | None = None):
        config, entry, state = saved_run(out_dir, run)
        kind = config.model.kind
        if config.task == "link" or DATASETS[config.dataset.name].kind != "graph":
            raise ConfigError(f"explain explains node predictions; this run "
                              f"({config.dataset.name!r}, task {config.task}) predicts "
                              "graphs or links")
        if kind not in EXPLAINED_KINDS or config.model.learn_edge_weight:
            raise ConfigError(f"explain masks the entries of Â, and a {kind} run "
                              f"{'learns its own' if kind == 'gcn' else 'reads another operand'}"
                              f"; explain a run of {', '.join(EXPLAINED_KINDS)}")
        self.config, self.entry = config, entry
        self.task: NodeTask = make_task(config)
        self.model = restore_saved(self.task, state, Path(out_dir) / entry["params"])
        self.hops = fields.hops_of(self.model, kind)
        self.truth = self._truth()

    def _truth(self) -> dict | None:
        """The planted answer as a set of user-id keys source·N + target, or None."""
        name = self.config.dataset.name
        if name not in MAKERS:
            return None
        made = planted(name, self.config.dataset.seed)
        if not isinstance(made, Planted):
            return None
        n = made.graph.num_nodes
        src, dst = made.graph.edge_index[:, made.edge_mask]
        return {"keys": np.sort(src * n + dst), "motif": made.motif, "n": n}

    @property
    def num_nodes(self) -> int:
        return self.task.num_nodes

    def nodes(self, spec: str | int) -> np.ndarray:
        """Node ids (the dataset's) from an id, 'motif' (every node of a planted motif) or a
        file of ids, one a line."""
        if isinstance(spec, (int, np.integer)):
            return self._check_ids(np.array([int(spec)]))
        if spec == "motif":
            if self.truth is None:
                raise ConfigError(f"--nodes motif: {self.config.dataset.name!r} has no planted "
                                  f"answer (one of {', '.join(MAKERS)} has)")
            return np.flatnonzero(self.truth["motif"] >= 0)
        if not Path(spec).is_file():
            raise ConfigError(f"--nodes {spec!r} is neither 'motif' nor a file of node ids")
        try:
            return load_node_ids(spec, self.num_nodes)[0]
        except DataError as e:  # the user's own file
            raise InputFileError(str(e)) from None

    def _check_ids(self, ids: np.ndarray) -> np.ndarray:
        bad = ids[(ids < 0) | (ids >= self.num_nodes)]
        if bad.size:
            raise ConfigError(f"--node {bad[0]} is outside {self.config.dataset.name!r} "
                              f"(nodes 0..{self.num_nodes - 1})")
        return ids

    def explain(self, node: int, method: str, options: Options, k: int = 12) -> Explanation:
        """Node `node` (the dataset's id) explained by `method`, with its figures."""
        start = time.perf_counter()
        row = int(self.task.run_rows(np.array([node]))[0])
        comp = fields.computation(self.task.edge_index, self.task.operand, self.task.features,
                                  row, self.hops, self.task.dtype)
        cls = predict(self.model, comp)
        edge, feat = scores(method, self.model, comp, cls, options, self.num_nodes)
        plus, minus = sc.fidelity(self.model, comp, edge, cls, k)
        ids = self.task.user_ids(self.task.edge_index[:, comp.edges])
        truth = None
        if self.truth is not None:
            keys = ids[0] * self.truth["n"] + ids[1]
            where = np.searchsorted(self.truth["keys"], keys)
            where = np.minimum(where, max(self.truth["keys"].size - 1, 0))
            truth = self.truth["keys"][where] == keys
        return Explanation(node, method, cls, ids, edge, feat, plus, minus, sc.sparsity(edge),
                           None if truth is None else sc.auc(truth, edge), truth,
                           time.perf_counter() - start)


def explain_many(explainer: Explainer, nodes: Iterable[int], method: str, options: Options,
                 k: int = 12, on_item: Callable[[Explanation, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> Summary:
    """Every node of `nodes` explained in turn; `on_item(explanation, done)` after each (to
    write it, to show progress); `should_stop()` ends the series early, keeping what is
    done (`Summary.interrupted`)."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    summary = Summary(method)
    for node in nodes:
        if should_stop is not None and should_stop():
            summary.interrupted = True
            break
        summary.items.append(explainer.explain(int(node), method, options, k))
        if on_item is not None:
            on_item(summary.items[-1], len(summary.items))
    return summary


def csv_text(rows: list[list], header: bool = False) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(CSV_HEADER)
    writer.writerows(rows)
    return buffer.getvalue()
