"""`mgsparse datasets list | download NAME | info NAME_OR_PATH`: options plus a library call."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from mgsparse.cli.progress import download_bar
from mgsparse.cli.render import datasets_table, fail, info_table, out
from mgsparse.data import GraphSet, dataset_info, download_dataset, list_datasets
from mgsparse.data.moleculeset import MoleculeSet
from mgsparse.errors import MgsparseError
from mgsparse.run.placed import graph_for

datasets_app = typer.Typer(help="List, download and inspect datasets.", no_args_is_help=True)

ROOT_OPTION = typer.Option(None, "--root", help="Cache folder (default: $MGSPARSE_DATA or "
                           "./datasets).")
URL_OPTION = typer.Option(None, "--url", help="Base URL or mirror folder (default: "
                          "$MGSPARSE_PLANETOID_URL / $MGSPARSE_OGB_URL / $MGSPARSE_TU_URL or the "
                          "dataset's server).")


@datasets_app.command("list")
def list_command(root: Path = ROOT_OPTION) -> None:
    """Known datasets, whether they are cached, and their size on disk."""
    try:
        rows = list_datasets(root)
    except MgsparseError as err:
        fail(err)
    out.print(datasets_table(rows))


@datasets_app.command("download")
def download_command(name: str, root: Path = ROOT_OPTION, url: str = URL_OPTION) -> None:
    """Fetch a Planetoid, OGB or TU dataset and verify its files."""
    try:
        with download_bar() as report:
            done = download_dataset(name, root=root, url=url, progress=report)
    except MgsparseError as err:
        fail(err)
    out.print(done, markup=False, highlight=False)


@datasets_app.command("info")
def info_command(target: str = typer.Argument(..., metavar="NAME_OR_PATH", help=(
        "A dataset name, a config file (.yaml), a folder holding edges.csv (and optionally "
        "features.*, labels.csv, train/val/test.csv), or an edge-list file.")),
        root: Path = ROOT_OPTION, url: str = URL_OPTION) -> None:
    """Nodes, edges, features, classes, sparsity, split sizes and label counts of a dataset;
    for a set of graphs: graphs, nodes and edges per graph, classes and class balance."""
    try:
        with download_bar() as report:
            graph = graph_for(target, root, url, report)
    except MgsparseError as err:
        fail(err)
    if isinstance(graph, GraphSet):
        out.print(graphset_table(graph.info()))
    elif isinstance(graph, MoleculeSet):
        out.print(molecules_table(graph.info()))
    else:
        out.print(info_table(dataset_info(graph)))


def molecules_table(info: dict) -> Table:
    """`MoleculeSet.info`: counts, feature widths and the target's spread or classes."""
    table = Table(title=f"{info['name']}", show_header=False)
    table.add_column("property", style="bold")
    table.add_column("value", justify="right")
    stats = info["target_stats"]
    target = (", ".join(stats["classes"]) if "classes" in stats else
              f"mean {stats['mean']:.3f}, std {stats['std']:.3f}, "
              f"range {stats['min']:.2f} .. {stats['max']:.2f} {info['unit']}".rstrip())
    fixed = "none (split by seed)" if info["fixed_test"] is None else f"{info['fixed_test']:,}"
    for key, value in (("molecules", f"{info['graphs']:,}"), ("atoms", f"{info['nodes']:,}"),
                       ("edges (directed)", f"{info['edges']:,}"),
                       ("atom features", f"{info['features']}"),
                       ("bond features", f"{info['edge_features']}"),
                       (f"target {info['target']}", target), ("fixed test part", fixed)):
        table.add_row(key, value)
    return table


def graphset_table(info: dict) -> Table:
    """`GraphSet.info` as `info_table` shows one graph."""
    table = Table(title=f"{info['name']}", show_header=False)
    table.add_column("property", style="bold")
    table.add_column("value", justify="right")
    nodes, edges = info["nodes_per_graph"], info["edges_per_graph"]
    balance = "  ".join(f"{c}: {n:,} ({share:.1%})" for c, (n, share) in
                        enumerate(zip(info["class_counts"], info["class_balance"], strict=True)))
    for key, value in (
            ("graphs", f"{info['graphs']:,}"),
            ("nodes", f"{info['nodes']:,}"),
            ("edges (directed)", f"{info['edges']:,}"),
            ("nodes per graph (mean/min/max)",
             f"{nodes['mean']:.1f} / {nodes['min']} / {nodes['max']}"),
            ("edges per graph (mean/min/max)",
             f"{edges['mean']:.1f} / {edges['min']} / {edges['max']}"),
            ("features", f"{info['features']}"),
            ("edge features", f"{info['edge_features']}"),
            ("classes", f"{info['classes']}"),
            ("class balance", balance)):
        table.add_row(key, value)
    return table
