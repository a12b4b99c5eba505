"""Datasets as plain numpy/scipy arrays: Planetoid (downloaded and verified), Zachary's karate
club (embedded), a stochastic block model (generated) and the user's own files.

`load_dataset(name, ...)` is the one entry point the trainer and the CLI use.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from mgsparse.data import ogb, planetoid, transforms
from mgsparse.data.download import fetch
from mgsparse.data.files import load_edge_list, load_features, load_labels, load_user_graph
from mgsparse.data.graph import Graph, dataset_info
from mgsparse.data.loader import DataLoader, TensorDataset
from mgsparse.data.planetoid import load as load_planetoid
from mgsparse.data.synthetic import karate_club, make_blobs, make_circles, make_moons, sbm
from mgsparse.data.transforms import full_split, normalize_features, public_split, random_split
from mgsparse.catalog import DATASETS, GRAPH_DATASETS
from mgsparse.errors import ConfigError

__all__ = [
    "KNOWN_DATASETS",
    "DataLoader",
    "Graph",
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
    "load_user_graph",
    "make_blobs",
    "make_circles",
    "make_moons",
    "normalize_features",
    "public_split",
    "random_split",
    "sbm",
]

KNOWN_DATASETS = GRAPH_DATASETS  # the graphs `load_dataset` builds (points: `make_moons`, ...)
_SBM_OPTIONS = set(inspect.signature(sbm).parameters)


def load_dataset(name: str, root: str | Path | None = None, split: str = "public",
                 url: str | None = None, normalize_features: bool = False,
                 progress=None, **kw) -> Graph:
    """Any known dataset as a `Graph`.

    ``split`` is 'public' (the dataset's own split), 'full' or 'random'. For Planetoid and
    karate ``kw`` holds the random split's sizes (``num_train_per_class``, ``num_val``,
    ``num_test``, ``seed``); for 'synthetic' it holds `sbm`'s arguments, whose own split is
    already random. ``root``, ``url`` and ``progress`` concern Planetoid downloads only.
    """
    key = str(name).lower()
    if split not in transforms.SPLITS:
        raise ConfigError(f"unknown split {split!r}; expected one of "
                          f"{', '.join(transforms.SPLITS)}")
    if key not in DATASETS or DATASETS[key].kind != "graph":
        raise ConfigError(f"unknown dataset {name!r}; known: {', '.join(KNOWN_DATASETS)}")
    source = DATASETS[key].source
    if source == "planetoid":
        return planetoid.load(key, root=root, split=split, url=url,
                              normalize_features=normalize_features, progress=progress, **kw)
    if source == "ogb":
        return ogb.load(key, root=root, split=split, url=url,
                        normalize_features=normalize_features, progress=progress, **kw)
    if source == "files":
        raise ConfigError(f"{key}: your own graph is read by mgsparse.data.user.load_csv_graph "
                          "from the files a config names (dataset.edges, ...)")
    if source == "builtin":  # Zachary's karate club
        graph = transforms.apply_split(karate_club(), split, **kw)
    else:  # generated: the stochastic block model
        unknown = sorted(set(kw) - _SBM_OPTIONS)
        if unknown:
            raise ConfigError(f"{key}: unknown option(s) {', '.join(unknown)}")
        graph = transforms.apply_split(sbm(**kw), "full" if split == "full" else "public")
    return transforms.apply_normalize(graph) if normalize_features else graph


def download_dataset(name: str, root: str | Path | None = None, url: str | None = None,
                     progress=None) -> str:
    """Fetch and verify a downloadable dataset into the cache; returns one line saying what
    was checked and where it is."""
    key = str(name).lower()
    if key not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    source = DATASETS[key].source
    if source == "planetoid":
        folder = planetoid.download(key, root=root, url=url, progress=progress)
        return f"{planetoid.NAMES[key]}: 8 files verified in {folder}"
    if source == "ogb":
        archive = ogb.download(key, root=root, url=url, progress=progress)
        sha = ogb.recorded_sha256(archive) or ""
        return f"{key}: {archive.name} checked (SHA-256 {sha[:16]}... recorded) in {archive.parent}"
    return f"{key} is {source} in mgsparse; nothing to download"


def list_datasets(root: str | Path | None = None) -> list[dict]:
    """One row per known dataset: name, description, whether it is on disk (None when it
    needs no download) and the bytes its cache folder takes."""
    rows = []
    for name in KNOWN_DATASETS:
        source = DATASETS[name].source
        row = {"name": name, "description": DATASETS[name].description, "cached": None,
               "size_bytes": 0, "path": None, "source": source}
        if source in ("planetoid", "ogb"):
            module = planetoid if source == "planetoid" else ogb
            row.update(module.cache_status(name, root))
        rows.append(row)
    return rows
