"""The source protocol and its registry: `load_section` builds exactly the graph the run
layer's per-source keywords built, for every source; a new source needs only its module, a
registry entry and a catalog row."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse import catalog
from mgsparse.config import DatasetConfig, load_config
from mgsparse.data import (
    download_dataset,
    karate_club,
    load_dataset,
    load_section,
    sources,
    user,
)
from mgsparse.data.graph import Graph
from mgsparse.data.sources import SOURCES, Source, finish, source_for
from mgsparse.data.sources import ogb as ogb_source
from mgsparse.errors import ConfigError
from tests.conftest import REPO_ROOT, require_real_data
from tests.data.sources.test_ogb import (
    TINY,
    tiny,  # noqa: F401 -- a fixture used below
    tiny_members,
    zip_bytes,
)

PACKAGE = REPO_ROOT / "mgsparse"


def legacy_load_graph(ds, progress=None) -> Graph:
    """The run layer's `load_graph` before `load_section`, verbatim: the oracle."""
    source = catalog.DATASETS[ds.name].source
    if source == "files":
        return user.load_csv_graph(**user.config_kwargs(ds), name=Path(ds.edges).parent.name)
    kwargs = {"directed": ds.directed} if source == "ogb" else {}
    if source == "generated":
        kwargs = dict(num_nodes=ds.num_nodes, num_classes=ds.num_classes,  # noqa: C408
                      avg_degree=ds.avg_degree, homophily=ds.homophily,
                      num_features=ds.num_features, seed=ds.seed)
    if ds.split == "random":
        kwargs.update(num_train_per_class=ds.num_train_per_class, num_val=ds.num_val,
                      num_test=ds.num_test, seed=ds.seed)
    return load_dataset(ds.name, root=ds.root, split=ds.split, url=ds.url,
                        normalize_features=ds.normalize_features, progress=progress, **kwargs)


def assert_same_graph(a: Graph, b: Graph) -> None:
    dense = [g.x.toarray() if sp.issparse(g.x) else np.asarray(g.x) for g in (a, b)]
    np.testing.assert_array_equal(*dense)
    assert sp.issparse(a.x) == sp.issparse(b.x) and a.x.dtype == b.x.dtype
    for field in ("y", "edge_index", "train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert (a.num_nodes, a.num_classes, a.name) == (b.num_nodes, b.num_classes, b.name)
    assert (a.edge_weight is None) == (b.edge_weight is None)


def both(section) -> Graph:
    """The graph `load_section` builds, after checking it equals the oracle's."""
    graph = load_section(section)
    assert_same_graph(graph, legacy_load_graph(section))
    return graph


SPLITS = [{"split": "public"}, {"split": "full", "normalize_features": False},
          {"split": "random", "num_train_per_class": 3, "num_val": 5, "num_test": 7, "seed": 4}]


# --- load_section equals today's per-source keywords ----------------------------------------

@pytest.mark.parametrize("change", SPLITS)
def test_karate(change):
    graph = both(DatasetConfig(name="karate", **change))
    expected = {"public": (2, 6, 26), "full": (2, 6, 26), "random": (6, 5, 7)}
    assert graph.split_sizes() == expected[change["split"]]
    assert np.allclose(graph.x.sum(axis=1), 1.0)


@pytest.mark.parametrize("change", SPLITS)
def test_synthetic(change):
    section = DatasetConfig(name="synthetic", num_nodes=300, num_classes=3, avg_degree=4.0,
                            num_features=16, **change)
    graph = both(section)
    assert (graph.num_nodes, graph.num_classes, graph.x.shape[1]) == (300, 3, 16)
    if change["split"] == "random":
        assert graph.split_sizes() == (9, 5, 7)


@pytest.mark.parametrize("split", ["public", "full", "random"])
def test_csv(split):
    section = dataclasses.replace(load_config(REPO_ROOT / "configs/csv-example.yaml").dataset,
                                  split=split)
    graph = both(section)
    assert graph.name == "two-communities" and graph.num_nodes == 60
    expected = {"public": (8, 12, 40), "full": (8, 12, 40), "random": (8, 12, 40)}
    assert graph.split_sizes() == expected[split]


def test_csv_by_name_alone_is_a_usage_error():
    with pytest.raises(ConfigError, match=r"^csv: your own graph is read by .*load_csv_graph"):
        load_dataset("csv")


def test_planetoid_tiny_from_a_mirror_folder(tiny_dataset, tmp_path, monkeypatch):
    mirror, _ = tiny_dataset
    monkeypatch.setitem(catalog.DATASETS, "tiny",
                        catalog.DatasetFacts("tiny", "graph", "planetoid", "8 nodes"))
    for change in SPLITS[:2]:
        section = DatasetConfig(name="tiny", root=str(tmp_path / "data"), url=str(mirror),
                                **change)
        graph = both(section)
        assert graph.num_nodes == 8 and graph.edge_index.shape == (2, 8)
    assert (tmp_path / "data" / "Tiny" / "raw" / "ind.tiny.graph").is_file()


@pytest.mark.parametrize("change", SPLITS)
def test_planetoid_cora(planetoid_mirror, tmp_path, change):
    base, _ = planetoid_mirror
    graph = both(DatasetConfig(name="cora", root=str(tmp_path), url=base, **change))
    assert (graph.num_nodes, graph.edge_index.shape[1]) == (2708, 10556)
    if change["split"] == "public":
        assert graph.split_sizes() == (140, 500, 1000)


def test_planetoid_cora_reports_progress(tmp_path):
    seen = []
    load_section(DatasetConfig(name="cora", root=str(tmp_path), url=str(require_real_data())),
                 progress=lambda done, total, name: seen.append(name))
    assert sorted(set(seen)) == sorted(f"ind.cora.{k}" for k in
                                       ("x", "tx", "allx", "y", "ty", "ally", "graph",
                                        "test.index"))


@pytest.mark.parametrize("directed", [False, True])
def test_ogb_tiny(tiny, tmp_path, monkeypatch, directed):  # noqa: F811
    monkeypatch.setitem(catalog.DATASETS, "ogbn-tiny",
                        catalog.DatasetFacts("ogbn-tiny", "graph", "ogb", "a tiny archive"))
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.zip").write_bytes(zip_bytes(tiny_members()))
    sizes = {"public": (2, 2, 2), "full": (2, 2, 2), "random": (2, 1, 1)}
    for change in SPLITS:
        if change["split"] == "random":
            change = {**change, "num_train_per_class": 1, "num_val": 1, "num_test": 1}
        section = DatasetConfig(name="ogbn-tiny", url=str(mirror), directed=directed, **change)
        graph = both(section)
        assert graph.edge_index.shape[1] == (8 if directed else 12)
        assert graph.split_sizes() == sizes[change["split"]]
    monkeypatch.setitem(ogb_source.DATASETS, "ogbn-tiny", dataclasses.replace(TINY, directed=False))
    with pytest.raises(ConfigError, match="^ogbn-tiny is an undirected graph"):
        load_section(DatasetConfig(name="ogbn-tiny", url=str(mirror), directed=True))


def test_unknown_names_are_usage_errors():
    with pytest.raises(ConfigError, match=r"^unknown dataset 'moons'; known: cora"):
        load_section(DatasetConfig(name="moons"))  # points: not a graph
    with pytest.raises(ConfigError, match=r"^unknown dataset 'nope'; known: cora"):
        download_dataset("nope")


# --- the registry ---------------------------------------------------------------------------

def test_every_catalog_source_is_registered_once():
    assert set(SOURCES) == {facts.source for facts in catalog.DATASETS.values()}
    assert all(SOURCES[key].name == key for key in SOURCES)
    assert source_for("Cora") is SOURCES["planetoid"] and source_for("moons").name == "generated"


def test_downloads_say_what_they_checked(tiny_dataset, tmp_path, monkeypatch):
    assert download_dataset("karate") == "karate is builtin in mgsparse; nothing to download"
    assert download_dataset("moons") == "moons is generated in mgsparse; nothing to download"
    mirror, _ = tiny_dataset
    monkeypatch.setitem(catalog.DATASETS, "tiny",
                        catalog.DatasetFacts("tiny", "graph", "planetoid", "8 nodes"))
    line = download_dataset("tiny", root=tmp_path, url=str(mirror))
    assert line == f"Tiny: 8 files verified in {tmp_path / 'Tiny' / 'raw'}"


def test_no_source_dispatch_by_comparison_in_data():
    """Sources are found through the registry; widen to the whole package once the run
    layer calls `load_section`."""
    pattern = re.compile(r"\bif\s+\w*\.?source\s*==|\belif\s+\w*\.?source\s*==")
    hits = [f"{path.relative_to(PACKAGE)}:{n}" for path in (PACKAGE / "data").rglob("*.py")
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


class Toy(Source):
    """A source written from the protocol's docstring alone: a path graph of ``length``."""

    name = "toy"
    reads = ("split", "normalize_features", "num_nodes")

    def load(self, dataset, *, split="public", normalize_features=False, root=None, url=None,
             progress=None, num_nodes=5, **split_options):
        graph = karate_club()
        n = int(num_nodes)
        src = np.arange(n - 1)
        edges = np.concatenate([np.stack([src, src + 1]), np.stack([src + 1, src])], axis=1)
        graph = dataclasses.replace(
            graph, x=np.eye(n, dtype=np.float32), y=np.arange(n) % 2, num_nodes=n,
            edge_index=edges[:, np.lexsort((edges[1], edges[0]))], name=dataset,
            train_mask=np.arange(n) < 2, val_mask=np.arange(n) == 2, test_mask=np.arange(n) > 2)
        return finish(graph, split, normalize_features, **split_options)


def test_a_new_source_is_a_module_a_registry_entry_and_a_catalog_row(monkeypatch):
    monkeypatch.setitem(sources.SOURCES, "toy", Toy())
    monkeypatch.setitem(catalog.DATASETS, "path",
                        catalog.DatasetFacts("path", "graph", "toy", "a path graph"))
    graph = load_section(DatasetConfig(name="path", num_nodes=7))
    assert graph.num_nodes == 7 and graph.edge_index.shape == (2, 12)
    assert graph.split_sizes() == (2, 1, 4)
    assert load_dataset("path", num_nodes=4).num_nodes == 4
    assert download_dataset("path") == "path is toy in mgsparse; nothing to download"
