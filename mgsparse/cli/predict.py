"""`mgsparse predict`: a finished run's classes, probabilities, pair scores and embeddings, as
files."""

from __future__ import annotations

from pathlib import Path

import typer

from mgsparse.cli.kgpredict import predict_tails
from mgsparse.cli.outputs import check_output
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import err_console, fail
from mgsparse.config import load_config
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.run.predict import predict_saved, write_predictions
from mgsparse.run.predict_molecules import predict_molecules


def predict(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The --out folder of `mgsparse train`"),
    out: Path | None = typer.Option(
        None, "--out", help="Write node (or graph), pred, p0..p<C-1> here (CSV); a link run: "
        "src, dst, label, score"),
    split: str | None = typer.Option(
        None, "--split", help="test (default), val, train, all, or a file of node (graph) ids, "
        "one a line; a link run: test or val, its held-out pairs"),
    pairs: Path | None = typer.Option(
        None, "--pairs", metavar="FILE", help="A link run: score these node pairs instead "
        "(\"src dst\" or \"src,dst\" a line); writes src, dst, score"),
    graph: Path | None = typer.Option(
        None, "--graph", metavar="CONFIG", help="Score the nodes (graphs) of this config's "
        "dataset instead (same features; its dataset section only)"),
    embeddings: Path | None = typer.Option(
        None, "--embeddings", help="Also save as .npy the last hidden layer (K, hidden); "
        "graphs: every level's readout the heads read; a link run: Z (N, latent)"),
    molecules: Path | None = typer.Option(
        None, "--molecules", metavar="FILE", help="A molecule run: predict these molecules "
        "(.sdf, or .smi / .csv of SMILES with the chem extra); writes name, prediction (in "
        "the target's units) or name, pred, p0..p<C-1>"),
    run: int | None = typer.Option(
        None, "--run", help="Which saved run, a fold's number after --folds (default: the "
        "first that kept parameters)"),
    head: str | None = typer.Option(
        None, "--head", metavar="NAME", help="A knowledge-graph run: the head entity of the "
        "query (head, relation, ?); prints the best tails"),
    relation: str | None = typer.Option(
        None, "--relation", metavar="NAME", help="With --head: the relation (NAME^-1 asks "
        "for heads)"),
    top: int = typer.Option(10, "--top", help="With --head: how many tails to list"),
) -> None:
    """Predict with a trained run: each node's or graph's class and class probabilities, or
    a link run's edge probabilities; a knowledge-graph run's best tails of a query."""
    if head is not None or relation is not None:
        return predict_tails(run_dir, head, relation, top, run)
    try:
        if out is None:
            raise ConfigError("missing option --out FILE (where the predictions go)")
        other = load_config(graph) if graph is not None else None
        taken: dict = {}
        check_output(out, "--out", taken=taken)
        check_output(embeddings, "--embeddings", suffixes=(".npy",), taken=taken)
        if molecules is not None:
            _molecules_alone(split, pairs, graph, embeddings)
        with download_bar() as progress:
            predictions = (predict_molecules(run_dir, molecules, run, progress)
                           if molecules is not None else
                           predict_saved(run_dir, split, other, run, embeddings is not None,
                                         progress, pairs))
        write_predictions(predictions, out, embeddings)
    except MgsparseError as e:
        fail(e)
    saved = f" and {embeddings}" if embeddings is not None else ""
    fold = getattr(predictions, "fold", None)  # k-fold: run i is fold i
    which = f"run {predictions.run}" if fold is None else f"fold {fold}"
    err_console.print(f"{predictions.rows} {predictions.unit}s of {which} "
                      f"(seed {predictions.seed}): {out}{saved}", markup=False)


def _molecules_alone(split, pairs, graph, embeddings) -> None:
    """--molecules names the rows itself: the options that choose other rows are refused."""
    given = [name for name, value in (("--split", split), ("--pairs", pairs),
                                      ("--graph", graph), ("--embeddings", embeddings))
             if value is not None]
    if given:
        raise ConfigError(f"--molecules and {given[0]}: --molecules predicts the molecules "
                          "of its file; give one of them")
