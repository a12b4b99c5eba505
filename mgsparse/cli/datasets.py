"""`mgsparse datasets list | download NAME | info NAME`: options plus one library call each."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from mgsparse.catalog import DATASETS
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import fail, out
from mgsparse.data import dataset_info, list_datasets, load_dataset, planetoid
from mgsparse.errors import MgsparseError

datasets_app = typer.Typer(help="List, download and inspect datasets.", no_args_is_help=True)

ROOT_OPTION = typer.Option(None, "--root", help="Cache folder (default: $MGSPARSE_DATA or "
                           "./datasets).")
URL_OPTION = typer.Option(None, "--url", help="Planetoid base URL or mirror folder "
                          "(default: $MGSPARSE_PLANETOID_URL or the Planetoid repository).")


def _size(num_bytes: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if num_bytes < 1024 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    return ""


@datasets_app.command("list")
def list_command(root: Path = ROOT_OPTION) -> None:
    """Known datasets, whether they are cached, and their size on disk."""
    table = Table(title="datasets")
    for column in ("name", "description", "cached", "size"):
        table.add_column(column)
    try:
        rows = list_datasets(root)
    except MgsparseError as err:
        fail(err)
    for row in rows:
        cached = {True: "yes", False: "no", None: "built in"}[row["cached"]]
        size = _size(row["size_bytes"]) if row["cached"] is not None else "-"
        table.add_row(row["name"], row["description"], cached, size)
    out.print(table)


@datasets_app.command("download")
def download_command(name: str, root: Path = ROOT_OPTION, url: str = URL_OPTION) -> None:
    """Fetch a Planetoid dataset and verify every file's SHA-256."""
    facts = DATASETS.get(name.lower())
    if facts is not None and facts.source != "planetoid":
        out.print(f"{name} is {facts.source} in mgsparse; nothing to download")
        return
    try:
        with download_bar() as report:
            folder = planetoid.download(name, root=root, url=url, progress=report)
    except MgsparseError as err:
        fail(err)
    out.print(f"{planetoid.NAMES[name.lower()]}: 8 files verified in {folder}")


@datasets_app.command("info")
def info_command(name: str, root: Path = ROOT_OPTION, url: str = URL_OPTION) -> None:
    """Nodes, edges, features, classes, sparsity, split sizes and label counts of a dataset."""
    try:
        with download_bar() as report:
            graph = load_dataset(name, root=root, url=url, progress=report)
    except MgsparseError as err:
        fail(err)
    out.print(info_table(dataset_info(graph)))


def info_table(info: dict) -> Table:
    table = Table(title=f"{info['name']}", show_header=False)
    table.add_column("property", style="bold")
    table.add_column("value", justify="right")
    labels = "  ".join(f"{c}: {n}" for c, n in enumerate(info["label_counts"]))
    rows = [
        ("nodes", f"{info['nodes']}"),
        ("edges (directed)", f"{info['edges']}"),
        ("features", f"{info['features']}"),
        ("feature storage", info["feature_storage"]),
        ("classes", f"{info['classes']}"),
        ("adjacency nnz ratio", f"{info['adjacency_nnz_ratio']:.3e}"),
        ("feature nnz ratio", f"{info['feature_nnz_ratio']:.3e}"),
        ("split train/val/test", f"{info['train']}/{info['val']}/{info['test']}"),
        ("unlabeled nodes", f"{info['unlabeled']}"),
        ("label counts", labels),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table
