"""How good an explanation is: fidelity+ and fidelity− (PyG's definitions), the mask's
sparsity, and its ROC-AUC against a planted answer.

For one explained node v with prediction ŷ and the top-k computation edges T of its mask:

- fidelity+ = 1[ŷ(G without T) ≠ ŷ]: removing the explanation changes the prediction (a
  necessary explanation scores 1);
- fidelity− = 1[ŷ(T alone) ≠ ŷ]: the explanation alone does not keep it (a sufficient one
  scores 0);

each averaged over the explained nodes (PyG's ``fidelity`` for a "model" explanation, with a
top-k hard mask). "Without" and "alone" weight the computation edges 0 or 1 in the same place
the methods' masks do (each message, after the normalisation; self loops kept).

- sparsity = the share of the computation edges scoring under half the top score (0: a flat
  mask, near 1: a few edges hold it);
- AUC = ROC-AUC of the edge scores against the planted edge mask over the computation edges
  (`run.metrics.roc_auc`: ties share their average rank); undefined, and skipped, where the
  edges are all motif or all not.
"""

from __future__ import annotations

import numpy as np

from mgsparse.errors import MgsparseError
from mgsparse.run.explain.field import Computation
from mgsparse.run.explain.methods import predict
from mgsparse.run.metrics import roc_auc


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """The positions of the k highest scores (ties: the lower position first)."""
    order = np.argsort(-scores, kind="stable")
    return order[:min(k, scores.size)]


def fidelity(model, comp: Computation, scores: np.ndarray, prediction: int,
             k: int) -> tuple[float, float]:
    """(fidelity+, fidelity−) of one node (0 or 1 each; see the module)."""
    chosen = np.zeros(comp.num_edges, bool)
    chosen[top_k(scores, k)] = True
    without = predict(model, comp, (~chosen).astype(np.float64))
    alone = predict(model, comp, chosen.astype(np.float64))
    return float(without != prediction), float(alone != prediction)


def sparsity(scores: np.ndarray) -> float:
    top = float(scores.max()) if scores.size else 0.0
    if top <= 0:
        return 1.0
    return float(np.mean(scores < 0.5 * top))


def auc(truth: np.ndarray, scores: np.ndarray) -> float | None:
    """ROC-AUC against the planted answer, None where it is undefined (one class only)."""
    try:
        return roc_auc(truth.astype(np.int64), scores)
    except MgsparseError:
        return None
