"""`mgsparse predict RUN --head NAME --relation NAME --top K`: a knowledge-graph run's best
tails, as a table on stdout (rank, tail, score, whether the triple is known)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import fail, out
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.run.kgpredict import top_tails


def predict_tails(run_dir: Path, head: str | None, relation: str | None, top: int,
                  run: int | None) -> None:
    try:
        if head is None or relation is None:
            raise ConfigError("--head and --relation go together: the query (head, relation, ?)")
        with download_bar() as progress:
            result = top_tails(run_dir, head, relation, top, run, progress)
    except MgsparseError as e:
        fail(e)
    table = Table(title=f"({result.head}, {result.relation}, ?): the best {len(result.names)} "
                        f"tails of run {result.run} (seed {result.seed})")
    for column in ("rank", "tail", "score", "known"):
        table.add_column(column, justify="right" if column in ("rank", "score") else "left")
    for i, (name, score, known) in enumerate(zip(result.names, result.scores, result.known)):
        table.add_row(str(i + 1), name, f"{score:.4f}", "yes" if known else "")
    out.print(table)
