"""mgsparse.data's front door: load_dataset dispatch and the dataset listing."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.catalog import GRAPH_DATASETS, GRAPHSET_DATASETS, POINT_DATASETS, TRIPLE_DATASETS
from mgsparse.data import KNOWN_DATASETS, list_datasets, load_dataset
from mgsparse.errors import ConfigError


def test_known_datasets_are_the_catalogs_graphs():
    assert KNOWN_DATASETS == GRAPH_DATASETS + GRAPHSET_DATASETS + TRIPLE_DATASETS
    assert {"cora", "citeseer", "pubmed", "karate", "synthetic", "csv"} <= set(KNOWN_DATASETS)
    assert not set(POINT_DATASETS) & set(KNOWN_DATASETS)
    assert [row["name"] for row in list_datasets()] == list(KNOWN_DATASETS)


def test_user_files_are_named_by_a_config_not_by_name():
    with pytest.raises(ConfigError, match="load_csv_graph"):
        load_dataset("csv")


def test_karate_and_synthetic_need_no_network(monkeypatch, tmp_path):
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", "http://127.0.0.1:1/")  # would fail if used
    karate = load_dataset("karate", root=tmp_path, normalize_features=True)
    assert karate.num_nodes == 34 and karate.split_sizes() == (2, 6, 26)
    synthetic = load_dataset("synthetic", num_nodes=600, num_classes=3, seed=2)
    assert synthetic.num_nodes == 600 and synthetic.num_classes == 3
    full = load_dataset("synthetic", split="full", num_nodes=600, num_classes=3, seed=2)
    assert full.split_sizes()[0] == 600 - sum(synthetic.split_sizes()[1:])
    np.testing.assert_array_equal(full.test_mask, synthetic.test_mask)
    assert list(tmp_path.iterdir()) == []


def test_planetoid_goes_through_the_recipe(planetoid_mirror, tmp_path):
    base, _ = planetoid_mirror
    g = load_dataset("Cora", root=tmp_path, url=base, split="random", seed=0)
    assert (g.num_nodes, g.split_sizes()) == (2708, (140, 500, 1000))


def test_bad_names_and_options_are_usage_errors():
    with pytest.raises(ConfigError, match="unknown dataset 'imagenet'; known: cora"):
        load_dataset("imagenet")
    with pytest.raises(ConfigError, match="synthetic: unknown option"):
        load_dataset("synthetic", num_nodez=10)
    with pytest.raises(ConfigError, match="unknown split 'most'"):
        load_dataset("karate", split="most")


def test_list_datasets_reports_cache_state(planetoid_mirror, tmp_path):
    base, _ = planetoid_mirror
    before = {row["name"]: row for row in list_datasets(tmp_path)}
    assert before["cora"]["cached"] is False and before["cora"]["size_bytes"] == 0
    assert before["karate"]["cached"] is None
    load_dataset("cora", root=tmp_path, url=base)
    after = {row["name"]: row for row in list_datasets(tmp_path)}
    raw_bytes = sum(p.stat().st_size for p in (tmp_path / "Cora" / "raw").iterdir())
    assert after["cora"]["cached"] is True and after["cora"]["size_bytes"] > raw_bytes
