"""The picture of one node's explanation: its computation subgraph in rings by hop distance,
nodes coloured by predicted class, edges drawn wider and darker by their mask score, the
explained node marked (matplotlib, imported only here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mgsparse.cli.plots import COLORS, require_matplotlib
from mgsparse.engine import no_grad
from mgsparse.run.explain.field import in_hops
from mgsparse.run.explain.saved import Explainer, Explanation


def _rings(nodes: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """(S, 2) positions: ring h holds the nodes h hops away, spread evenly, in id order."""
    pos = np.zeros((nodes.size, 2))
    for h in np.unique(dist):  # a loop over rings (at most L + 1), not nodes
        at = np.flatnonzero(dist == h)
        angle = 2 * np.pi * np.arange(at.size) / max(at.size, 1) + 0.3 * h
        pos[at] = h * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return pos


def draw_explanation(explainer: Explainer, e: Explanation, path: str | Path) -> Path:
    task = explainer.task
    with no_grad():
        pred = np.asarray(task.logits(explainer.model.eval()).data).argmax(axis=1)
    ends = np.unique(e.edge_index)
    rows = task.run_rows(ends)
    dist = in_hops(task.edge_index, task.num_nodes, int(task.run_rows(np.array([e.node]))[0]),
                   explainer.hops)[rows]
    pos = _rings(ends, dist)
    at = {int(n): i for i, n in enumerate(ends.tolist())}
    fig = require_matplotlib().Figure(figsize=(7, 7), layout="constrained")
    ax = fig.subplots()
    low, top = float(e.edge_score.min()), float(e.edge_score.max())
    for (s, t), v in sorted(zip(e.edge_index.T.tolist(), e.edge_score), key=lambda r: r[1]):
        a, b = pos[at[s]], pos[at[t]]
        shade = (v - low) / (top - low) if top > low else 1.0
        ax.plot([a[0], b[0]], [a[1], b[1]], color=(0.1, 0.1, 0.4, 0.1 + 0.9 * shade),
                linewidth=0.5 + 4 * shade, zorder=1)
    colors = [COLORS[int(c) % len(COLORS)] for c in pred[rows]]
    ax.scatter(pos[:, 0], pos[:, 1], c=colors, s=60, zorder=2, edgecolors="white")
    center = at[e.node]
    ax.scatter(*pos[center], s=400, marker="*", c=COLORS[e.prediction % len(COLORS)],
               edgecolors="black", zorder=3)
    ax.set_title(f"node {e.node} ({e.method}): predicted class {e.prediction}; edge width "
                 "and shade = score", fontsize=10)
    ax.set_aspect("equal")
    ax.axis("off")
    for c in np.unique(pred[rows]):
        ax.scatter([], [], c=COLORS[int(c) % len(COLORS)], label=f"class {int(c)}")
    ax.legend(loc="lower right", fontsize=8)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return Path(path)
