"""`mgsparse partition`: split a config's graph into one folder per MPI rank."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from mgsparse.cli.outputs import check_output
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import fail, out, partition_table, warn
from mgsparse.config import load_config
from mgsparse.data.partition import metis_available
from mgsparse.errors import ConfigError, MgsparseError
from mgsparse.run.tasks.partitioned import partition as partition_graph


class Method(str, Enum):
    metis = "metis"  # balanced parts, minimal edge cut (pymetis)
    contiguous = "contiguous"  # K blocks of consecutive node ids


METIS_HINT = "pip install pymetis (or pip install -e '.[distributed]' in the mgsparse checkout)"


def partition(
    config_path: Path = typer.Argument(..., metavar="CONFIG", help="YAML config, e.g. configs/cora.yaml"),
    parts: int = typer.Option(..., "--parts", min=1, help="Number of parts: the ranks of mpiexec -n"),
    out_dir: Path = typer.Option(..., "--out", help="Folder to write the parts and manifest.json in"),
    method: Method | None = typer.Option(
        None, "--method", help="metis (needs pymetis) or contiguous; by default metis, or "
        "contiguous blocks with a warning when pymetis is not installed"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a key: --set dataset.num_nodes=10000"),
) -> None:
    """Partition the graph for `mpiexec -n K mgsparse train CONFIG --partitions DIR`."""
    try:
        config = load_config(config_path, list(set_))
        check_output(out_dir, "--out", folder=True)  # the output rule, before any work
        if method is Method.metis and not metis_available():  # asked for: never a fallback
            raise ConfigError(f"--method metis needs pymetis, which is not installed: "
                              f"{METIS_HINT}")
        with download_bar() as progress:
            manifest = partition_graph(config, parts, out_dir, (method or Method.metis).value,
                                       progress)
    except MgsparseError as e:
        fail(e)
    if method is None and manifest["method"] == "contiguous":
        warn(f"pymetis is not installed, so the {parts} parts are contiguous blocks of node "
             f"ids, with a larger edge cut than METIS's: {METIS_HINT}; --method contiguous "
             f"chooses blocks (no warning), --method metis refuses to fall back")
    out.print(partition_table(manifest, out_dir))
