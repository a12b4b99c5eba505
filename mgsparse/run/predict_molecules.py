"""`mgsparse predict RUN --molecules FILE`: a molecule run's model on molecules it has not seen.

The saved run's task is rebuilt (its training molecules give the featurisation:
`mgsparse.data.sources.unseen`), its best parameters restored, and the new molecules run
through the model in eval mode in batches of `EVAL_GRAPHS`, bonds and all (`molecule_batch`).
One row per molecule, in the file's order, named by its SDF name or title, or its SMILES line:

- regression: ``name,prediction``, the prediction in the target's own units (log S,
  kcal/mol): the standardised output times the training part's std, plus its mean;
- classes: ``name,pred,p0..p<C-1>``, the predicted class's name and the probabilities
  softmax(logits) in the order of the run's classes (sorted names, as `metrics.json` has).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mgsparse.data.moleculeset import MoleculeSet
from mgsparse.data.sources.unseen import read_unseen
from mgsparse.engine import no_grad
from mgsparse.errors import ConfigError, InputFileError
from mgsparse.nn.module import Module
from mgsparse.run.kinds import make_task
from mgsparse.run.predict import restore_saved, saved_run
from mgsparse.run.task import Progress
from mgsparse.run.tasks.regression import EVAL_GRAPHS, molecule_batch


@dataclass(frozen=True)
class MoleculePredictions:
    """One saved run's outputs on new molecules: names (K,), values (K,) in the target's
    units for regression, or probabilities (K, C) with the run's `classes`."""

    run: int
    seed: int
    names: tuple[str, ...]
    values: np.ndarray
    classes: tuple[str, ...] = ()
    unit: str = "molecule"
    embeddings: None = None

    @property
    def rows(self) -> int:
        return len(self.names)

    def csv(self) -> str:
        """name,prediction (shortest exact float) or name,pred,p0.. (8 significant digits)."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if not self.classes:
            writer.writerow(["name", "prediction"])
            writer.writerows(zip(self.names, map(repr, self.values.tolist())))
            return buffer.getvalue()
        writer.writerow(["name", "pred", *(f"p{c}" for c in range(len(self.classes)))])
        for name, p in zip(self.names, self.values):
            writer.writerow([name, self.classes[int(p.argmax())], *(f"{v:.8g}" for v in p)])
        return buffer.getvalue()


def _outputs(model: Module, mols: MoleculeSet, dtype: np.dtype) -> np.ndarray:
    """The model's raw outputs on every molecule, eval mode, no graph kept."""
    model.eval()
    ids = np.arange(mols.num_graphs)
    with no_grad():
        return np.concatenate([np.asarray(model(molecule_batch(mols, ids[s:s + EVAL_GRAPHS],
                                                               dtype)).data)
                               for s in range(0, len(ids), EVAL_GRAPHS)])


def predict_molecules(out_dir: str | Path, path: str | Path, run: int | None = None,
                      progress: Progress | None = None) -> MoleculePredictions:
    """The saved molecule run's predictions on the molecules of `path` (module docstring)."""
    config, entry, state = saved_run(out_dir, run)
    task = make_task(config, progress)
    trained = getattr(task, "mols", None)
    if not isinstance(trained, MoleculeSet):
        raise ConfigError(f"--molecules: the run in {out_dir} trained on "
                          f"{config.dataset.name!r}, not on molecules (solubility, freesolv, "
                          "molecules)")
    task.begin_run(entry["run"])
    model = restore_saved(task, state, Path(out_dir) / entry["params"])
    new = read_unseen(path, trained, config.dataset.smiles_column)
    if new.num_features != trained.num_features:  # featurised alike: a defect if not
        raise InputFileError(f"{path}: {new.num_features} atom features, the model reads "
                             f"{trained.num_features}")
    out = _outputs(model, new, task.dtype)
    if trained.is_regression:
        return MoleculePredictions(entry["run"], entry["seed"], new.names, model.in_units(out))
    z = np.exp(out - out.max(axis=1, keepdims=True))
    return MoleculePredictions(entry["run"], entry["seed"], new.names,
                               z / z.sum(axis=1, keepdims=True), trained.classes)
