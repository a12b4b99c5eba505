"""`mgsparse predict RUN --head NAME --relation NAME`: a knowledge-graph run's best tails.

The model is rebuilt from the run folder as `mgsparse evaluate` rebuilds it, and the query
(head, relation, ?) scored against every entity in eval mode. Names are read from the names
the model saved with its parameters, so a prediction speaks of what the ids meant when it was
trained; a train file edited since (other names) is refused rather than silently renumbered.
`--relation NAME^-1` asks the inverse: the best heads of (?, NAME, head).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mgsparse.engine import no_grad
from mgsparse.errors import ConfigError, DataError, did_you_mean
from mgsparse.nn.kgmodel import decode_names
from mgsparse.run.kinds import make_task
from mgsparse.run.predict import restore_saved, saved_run
from mgsparse.run.ranking import query_keys
from mgsparse.run.task import Progress
from mgsparse.run.tasks.kg import KgTask

INVERSE = "^-1"


@dataclass(frozen=True)
class TopTails:
    """The `top` best-scored tails of one query: names, scores and whether each is a known
    triple (in train, valid or test), best first; `run` and `seed` of the saved run."""

    head: str
    relation: str
    names: tuple[str, ...]
    scores: np.ndarray
    known: np.ndarray
    run: int
    seed: int


def _index(name: str, names: tuple[str, ...], what: str) -> int:
    try:
        return names.index(name)
    except ValueError:
        hint = did_you_mean(name, names) or f" (the run knows {len(names)} {what}s)"
        raise ConfigError(f"unknown {what} {name!r}{hint}") from None


def top_tails(out_dir: str | Path, head: str, relation: str, top: int = 10,
              run: int | None = None, progress: Progress | None = None) -> TopTails:
    """The `top` best tails of (head, relation, ?) by a saved knowledge-graph run."""
    if top < 1:
        raise ConfigError(f"--top must be at least 1 (got {top})")
    config, entry, state = saved_run(out_dir, run)
    task = make_task(config, progress)
    if not isinstance(task, KgTask):
        raise ConfigError(f"--head and --relation ask a knowledge-graph run; this run trained "
                          f"on {config.dataset.name!r}")
    model = restore_saved(task, state, Path(out_dir) / entry["params"])
    entities, relations = decode_names(state["names"])
    if (entities, relations) != (task.triples.entities, task.triples.relations):
        raise DataError(f"{out_dir}: the run's entity and relation names differ from "
                        f"{config.dataset.name}'s files now; the data changed since training")
    inverse = relation.endswith(INVERSE)
    r = _index(relation.removesuffix(INVERSE), relations, "relation")
    r += task.num_relations * inverse
    h = _index(head, entities, "entity")
    model.eval()
    with no_grad():
        scores = np.asarray(task.scores(model, np.array([h]), np.array([r])).data[0],
                            np.float64)
    order = np.argsort(-scores, kind="stable")[:top]
    known = task.known[query_keys([h], [r], 2 * task.num_relations)].toarray()[0]
    return TopTails(head, relation, tuple(entities[i] for i in order), scores[order],
                    known[order], entry["run"], entry["seed"])
