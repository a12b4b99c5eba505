"""Datasets as plain numpy/scipy arrays: Planetoid (downloaded and verified), OGB and the TU
graph-classification sets (downloaded, trusted on first use), Zachary's karate club
(embedded), a stochastic block model (generated) and the user's own files.

`load_section(section)` is the one entry point the trainer uses (a config's dataset section),
`load_dataset(name, ...)` the one for a name; both find the dataset's source in
`mgsparse.data.sources`, whose docstring says how to add one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mgsparse.catalog import DATASETS, GRAPH_DATASETS, GRAPHSET_DATASETS, TRIPLE_DATASETS
from mgsparse.data.download import Progress, fetch
from mgsparse.data.files import load_edge_list, load_features, load_labels, load_user_graph
from mgsparse.data.graph import Graph, dataset_info
from mgsparse.data.graphset import GraphSet
from mgsparse.data.loader import DataLoader, TensorDataset
from mgsparse.data.sources import SOURCES, check_split, source_for, unknown_dataset
from mgsparse.data.sources.planetoid import load as load_planetoid
from mgsparse.data.synthetic import karate_club, make_blobs, make_circles, make_moons, sbm
from mgsparse.data.transforms import full_split, normalize_features, public_split, random_split

__all__ = [
    "KNOWN_DATASETS",
    "DataLoader",
    "Graph",
    "GraphSet",
    "TensorDataset",
    "dataset_info",
    "download_dataset",
    "fetch",
    "full_split",
    "karate_club",
    "list_datasets",
    "load_dataset",
    "load_edge_list",
    "load_features",
    "load_labels",
    "load_planetoid",
    "load_section",
    "load_user_graph",
    "make_blobs",
    "make_circles",
    "make_moons",
    "normalize_features",
    "public_split",
    "random_split",
    "sbm",
]

# what `load_dataset` builds: graphs, sets of graphs, then knowledge graphs' triples (points:
# `make_moons`, ...; molecules: `load_graph` of a molecule set)
KNOWN_DATASETS = GRAPH_DATASETS + GRAPHSET_DATASETS + TRIPLE_DATASETS
_LOADABLE = ("graph", "graphs", "molecules", "triples")


def load_dataset(name: str, root: str | Path | None = None, split: str = "public",
                 url: str | None = None, normalize_features: bool = False,
                 progress: Progress | None = None, **kw) -> Graph | GraphSet:
    """Any known dataset: a `Graph`, or a `GraphSet` for a set of graphs (MUTAG, NCI1, ...,
    which take no split, normalisation or ``kw``).

    ``split`` is 'public' (the dataset's own split), 'full' or 'random'. For Planetoid, OGB
    and karate ``kw`` holds the random split's sizes (``num_train_per_class``, ``num_val``,
    ``num_test``, ``seed``) and, for OGB, ``directed``; for 'synthetic' it holds `sbm`'s
    arguments, whose own split is already random. ``root``, ``url`` and ``progress`` concern
    downloads only.
    """
    key = str(name).lower()
    check_split(split)
    if key not in DATASETS or DATASETS[key].kind not in _LOADABLE:
        raise unknown_dataset(name, KNOWN_DATASETS)
    return source_for(key).load(key, root=root, split=split, url=url,
                                normalize_features=normalize_features, progress=progress, **kw)


def load_section(section: Any, progress: Progress | None = None) -> Graph | GraphSet:
    """The graph (or set of graphs) a config's dataset section names.

    ``section`` is any object with the section's attributes (``name`` and those its source's
    `Source.reads` lists, plus the random split's when ``split`` is 'random'): this leaf reads
    attributes, it never imports the config. ``progress(done, total, filename)`` reports
    download bytes, and its ``phase`` method, if it has one, the slow steps between them
    (`mgsparse.data.progress`). What each source reads is in `mgsparse.data.sources`.
    """
    key = str(section.name).lower()
    if key not in DATASETS or DATASETS[key].kind not in _LOADABLE:
        raise unknown_dataset(section.name, KNOWN_DATASETS)
    source = source_for(key)
    return source.load(key, progress=progress, **source.options(section))


def download_dataset(name: str, root: str | Path | None = None, url: str | None = None,
                     progress: Progress | None = None) -> str:
    """Fetch and verify a downloadable dataset into the cache; returns one line saying what
    was checked and where it is."""
    key = str(name).lower()
    return source_for(key).download(key, root=root, url=url, progress=progress)


def list_datasets(root: str | Path | None = None) -> list[dict]:
    """One row per known dataset: name, description, whether it is on disk (None when it
    needs no download) and the bytes its cache folder takes."""
    rows = []
    for name in KNOWN_DATASETS:
        source = DATASETS[name].source
        row = {"name": name, "description": DATASETS[name].description, "cached": None,
               "size_bytes": 0, "path": None, "source": source}
        row.update(SOURCES[source].cache_status(name, root) or {})
        rows.append(row)
    return rows
