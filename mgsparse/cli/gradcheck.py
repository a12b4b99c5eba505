"""`mgsparse gradcheck`: every op's and layer's gradient against its oracles, as a table;
with --fast-paths, the sweep through the kernels' fast paths (`checks.fast_paths`).

Exit codes: 0 when every check passes, 1 when any fails, 2 for a bad argument (an unknown
op, which the message answers with the known ones; an unknown size; a --json path the output
rule refuses: cli/outputs.py).
"""

from __future__ import annotations

from pathlib import Path

import typer

from mgsparse import checks
from mgsparse.cli.outputs import check_output, write_json
from mgsparse.cli.render import fail, out, pipe_width
from mgsparse.cli.render_checks import (
    DelayedBar,
    fast_paths_lines,
    gradcheck_lines,
    gradcheck_table,
)
from mgsparse.errors import MgsparseError

SIZE_NAMES = "|".join(checks.SIZES)
SCALAR_SIZES = ", ".join(name for name, size in checks.SIZES.items() if size.scalar)


def gradcheck_command(
    op: list[str] = typer.Option(
        [], "--op", metavar="NAME",
        help="Check only this op (repeatable): a full name (sparse.spmm), a bare name (spmm; "
             "relu checks engine.relu and sparse.relu) or a group (engine, sparse, nn)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the random inputs and weightings."),
    size: str = typer.Option(checks.DEFAULT_SIZE, "--size", metavar=SIZE_NAMES,
                             help=f"Input size; the scalar oracle runs at {SCALAR_SIZES}."),
    json_path: Path | None = typer.Option(None, "--json", metavar="PATH",
                                          help="Also write the results as JSON here (its "
                                               "folders are created)."),
    fast_paths: bool = typer.Option(
        False, "--fast-paths",
        help="Run every case through the kernels' fast paths instead (kernels.tiny(), at 1 "
             "and 2 threads): against finite differences, 1 thread against 2 bitwise, and "
             "against the plain kernels (kernels.reference()); fails if a path goes untaken."),
) -> None:
    """Check every op's gradient in float64 against finite differences, its dense
    equivalent and the scalar Value engine; exit 1 if any check fails."""
    try:
        check_output(json_path, "--json")  # the output rule (cli/outputs.py), before any case
        run = checks.sweep if fast_paths else checks.check_ops
        with DelayedBar() as bar:
            report = run(op, seed=seed, size=size, progress=bar)
        if json_path is not None:
            write_json(json_path, report.to_dict())
    except MgsparseError as err:
        fail(err)
    with pipe_width():
        out.print(gradcheck_table(report))
        for line in (fast_paths_lines if fast_paths else gradcheck_lines)(report):
            out.print(line, highlight=False)
    raise typer.Exit(0 if report.passed else 1)
