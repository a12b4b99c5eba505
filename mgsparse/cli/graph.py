"""`mgsparse graph`: the computation graph of one training step's loss, as DOT, SVG or PNG."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from mgsparse.cli.outputs import check_output, make_parents, remove_empty
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import fail, out, warn
from mgsparse.config import load_config
from mgsparse.errors import MgsparseError
from mgsparse.run.draw import draw_step


class Format(str, Enum):
    svg = "svg"
    png = "png"
    dot = "dot"  # the DOT text only, no rendering


def graph(
    config_path: Path = typer.Argument(..., metavar="CONFIG", help="YAML config, e.g. configs/karate.yaml"),
    out_path: Path = typer.Option(Path("graph.dot"), "--out",
                                  help="Where to write the DOT text (its folders are created)"),
    fmt: Format = typer.Option(Format.svg, "--format",
                               help="Also render next to it with Graphviz (svg, png), or dot: DOT only"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a key: --set model.hidden=8 (repeatable)"),
    max_nodes: int = typer.Option(5000, "--max-nodes", min=1,
                                  help="Above this many values, write a summary of op counts instead"),
) -> None:
    """Draw the computation graph of one training step's loss (Graphviz DOT, SVG or PNG)."""
    made: list[Path] = []
    try:
        config = load_config(config_path, list(set_))
        check_output(out_path, "--out")  # the output rule (cli/outputs.py)
        made = make_parents(out_path)
        with download_bar() as progress:  # silent unless bytes actually move
            drawing = draw_step(config, out_path, fmt.value, max_nodes, progress)
    except MgsparseError as e:
        remove_empty(made)
        fail(e)
    for note in drawing.notes:
        warn(note)
    counts = drawing.op_counts
    listing = ", ".join(f"{op} {n}" for op, n in counts.items())
    out.print(f"wrote {out_path}: {sum(counts.values())} op applications ({listing})",
              markup=False, highlight=False, soft_wrap=True)
    if drawing.rendered is not None:
        out.print(f"rendered {drawing.rendered}", markup=False, highlight=False, soft_wrap=True)
