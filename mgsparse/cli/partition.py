"""`mgsparse partition`: split a config's graph into one folder per MPI rank."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from mgsparse.cli.outputs import check_output
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import fail, out, partition_table
from mgsparse.config import load_config
from mgsparse.errors import MgsparseError
from mgsparse.run.tasks.partitioned import partition as partition_graph


class Method(str, Enum):
    metis = "metis"  # balanced parts, minimal edge cut (pymetis; contiguous without it)
    contiguous = "contiguous"  # K blocks of consecutive node ids


def partition(
    config_path: Path = typer.Argument(..., metavar="CONFIG", help="YAML config, e.g. configs/cora.yaml"),
    parts: int = typer.Option(..., "--parts", min=1, help="Number of parts: the ranks of mpiexec -n"),
    out_dir: Path = typer.Option(..., "--out", help="Folder to write the parts and manifest.json in"),
    method: Method = typer.Option(Method.metis, "--method", help="metis or contiguous"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a key: --set dataset.num_nodes=10000"),
) -> None:
    """Partition the graph for `mpiexec -n K mgsparse train CONFIG --partitions DIR`."""
    try:
        config = load_config(config_path, list(set_))
        check_output(out_dir, "--out", folder=True)  # the output rule, before any work
        with download_bar() as progress:
            manifest = partition_graph(config, parts, out_dir, method.value, progress)
    except MgsparseError as e:
        fail(e)
    out.print(partition_table(manifest, out_dir))
