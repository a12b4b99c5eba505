"""`mgsparse datasets list | download NAME | info NAME_OR_PATH`: options plus a library call."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from mgsparse.catalog import DATASETS
from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import fail, out
from mgsparse.config import load_config
from mgsparse.data import (
    KNOWN_DATASETS,
    dataset_info,
    list_datasets,
    load_dataset,
    ogb,
    planetoid,
    user,
)
from mgsparse.data.graph import Graph
from mgsparse.errors import MgsparseError

datasets_app = typer.Typer(help="List, download and inspect datasets.", no_args_is_help=True)

ROOT_OPTION = typer.Option(None, "--root", help="Cache folder (default: $MGSPARSE_DATA or "
                           "./datasets).")
URL_OPTION = typer.Option(None, "--url", help="Base URL or mirror folder (default: "
                          "$MGSPARSE_PLANETOID_URL / $MGSPARSE_OGB_URL or the dataset's server).")


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
    """Fetch a Planetoid or OGB dataset and verify its files' SHA-256."""
    if name.lower() in ogb.DATASETS:
        _download_ogb(name, root, url)
        return
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


def _download_ogb(name: str, root: Path | None, url: str | None) -> None:
    try:
        with download_bar() as report:
            archive = ogb.download(name, root=root, url=url, progress=report)
    except MgsparseError as err:
        fail(err)
    sha = ogb.recorded_sha256(archive) or ""
    out.print(f"{name.lower()}: {archive.name} checked (SHA-256 {sha[:16]}... recorded) in "
              f"{archive.parent}")


@datasets_app.command("info")
def info_command(target: str = typer.Argument(..., metavar="NAME_OR_PATH", help=(
        "A dataset name, a config file (.yaml), a folder holding edges.csv (and optionally "
        "features.*, labels.csv, train/val/test.csv), or an edge-list file.")),
        root: Path = ROOT_OPTION, url: str = URL_OPTION) -> None:
    """Nodes, edges, features, classes, sparsity, split sizes and label counts of a dataset."""
    try:
        with download_bar() as report:
            graph = _load_target(target, root, url, report)
    except MgsparseError as err:
        fail(err)
    out.print(info_table(dataset_info(graph)))


def _load_target(target: str, root: Path | None, url: str | None, report) -> Graph:
    """The graph a name, a config file or a path of CSV files means.
    (Dispatch to move into the library's dataset loader once it knows `csv` and OGB.)"""
    path = Path(target)
    if path.suffix in (".yaml", ".yml"):
        section = load_config(path).dataset
        if section.name == "csv":
            return user.load_csv_graph(**user.config_kwargs(section), base_dir=path.parent,
                                       name=path.stem)
        target, root, url = section.name, section.root or root, section.url or url
    elif target.lower() not in (*KNOWN_DATASETS, *ogb.DATASETS) and path.exists():
        return user.load_csv_path(path)
    if target.lower() in ogb.DATASETS:
        return ogb.load(target, root=root, url=url, progress=report)
    return load_dataset(target, root=root, url=url, progress=report)


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
