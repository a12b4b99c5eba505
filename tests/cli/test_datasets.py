"""`mgsparse datasets list | download | info` driven through CliRunner."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from mgsparse import catalog
from mgsparse.config import DatasetConfig
from mgsparse.data.sources import ogb, planetoid
from tests.conftest import REPO_ROOT, one_line_error
from tests.data.sources.test_ogb import TINY, tiny_members, zip_bytes


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """A cache in tmp_path and a mirror URL that refuses every connection."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", f"http://127.0.0.1:{port}/")
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path))
    return tmp_path


@pytest.fixture
def mirrored(monkeypatch, tmp_path, planetoid_mirror):
    base, log = planetoid_mirror
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", base)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path))
    return tmp_path, log


def test_info_cora_prints_the_table(cli, mirrored):
    result = cli("datasets", "info", "cora")
    assert result.exit_code == 0, result.output
    for fragment in ("2,708", "10,556", "1,433", "140/500/1,000", "label counts", "3:818",
                     "adjacency density", "0.14%", "1.27%"):
        assert fragment in result.stdout


def test_info_karate_and_synthetic_work_offline(cli, offline):
    result = cli("datasets", "info", "karate")
    assert result.exit_code == 0, result.output
    assert "34" in result.stdout and "2/6/26" in result.stdout and "0:17  1:17" in result.stdout
    result = cli("datasets", "info", "synthetic")
    assert result.exit_code == 0, result.output
    assert "2,000" in result.stdout


def test_unknown_name_is_a_one_line_usage_error(cli, offline):
    result = cli("datasets", "info", "nope")
    one_line_error(result, 2, "unknown dataset 'nope'", "cora")
    result = cli("datasets", "download", "nope")
    one_line_error(result, 2, "unknown dataset 'nope'", "cora")


def test_download_then_list_shows_the_cache(cli, mirrored):
    root, log = mirrored
    result = cli("datasets", "download", "citeseer")
    assert result.exit_code == 0, result.output
    assert "CiteSeer: 8 files verified" in result.stdout
    assert len(log) == 8 and len(list((root / "CiteSeer" / "raw").iterdir())) == 8
    result = cli("datasets", "list")
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.stdout.splitlines()
            if line.startswith("│ ") and line.split()[1] in ("cora", "citeseer", "karate")}
    assert " no " in rows["cora"] and " yes " in rows["citeseer"] and "KB" in rows["citeseer"]
    assert "built in" in rows["karate"]


def test_download_with_root_and_url_options(cli, planetoid_mirror, tmp_path, monkeypatch):
    monkeypatch.delenv("MGSPARSE_PLANETOID_URL", raising=False)
    base, _ = planetoid_mirror
    result = cli("datasets", "download", "cora", "--root", str(tmp_path / "r"),
                                 "--url", base)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "Cora" / "raw" / "ind.cora.allx").is_file()


def test_download_embedded_dataset_needs_nothing(cli, offline):
    result = cli("datasets", "download", "karate")
    assert result.exit_code == 0 and "nothing to download" in result.stdout


def test_pubmed_missing_allx_is_one_red_line(cli, mirrored):
    result = cli("datasets", "download", "pubmed")
    one_line_error(result, 1, "ind.pubmed.allx", "HTTP 404")


def test_unreachable_mirror_is_one_line_with_the_hint(cli, offline, monkeypatch):
    monkeypatch.setattr(planetoid, "FETCH_OPTIONS",
                        {"timeout": (1.0, 0.3), "retries": 0, "backoff": 0.0})
    result = cli("datasets", "info", "cora")
    one_line_error(result, 1, "unreachable", "the host is MGSPARSE_PLANETOID_URL's, set to "
                   "http://127.0.0.1:", "check it, or unset it")


# --- damaged caches, wrong paths, malformed URLs: one line, or a rebuild ------------------------

@pytest.mark.parametrize("damage", ["truncate", "empty"])
def test_damaged_processed_cache_is_rebuilt_and_info_succeeds(cli, damage, mirrored):
    root, log = mirrored
    assert cli("datasets", "info", "cora").exit_code == 0
    (cached,) = (root / "Cora" / "processed").glob("cora-*.npz")
    data = cached.read_bytes()
    cached.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"")
    result = cli("datasets", "info", "cora")
    assert result.exit_code == 0, result.output
    assert "10,556" in result.stdout and "Traceback" not in result.output
    assert len(log) == 8  # rebuilt from the verified raw files: nothing downloaded again
    with np.load(cached) as z:  # the cache was rewritten whole
        assert z["edge_index"].shape == (2, 10556)
    assert cli("datasets", "info", "cora").exit_code == 0


def test_damaged_raw_file_is_fetched_again_and_info_succeeds(cli, mirrored):
    root, log = mirrored
    assert cli("datasets", "info", "cora").exit_code == 0
    raw = root / "Cora" / "raw" / "ind.cora.tx"
    raw.write_bytes(raw.read_bytes()[:100])
    result = cli("datasets", "info", "cora")
    assert result.exit_code == 0, result.output
    assert log.count("/ind.cora.tx") == 2 and len(log) == 9


def test_data_root_that_is_a_file_is_one_line(cli, offline, monkeypatch):
    afile = offline / "datasets.txt"
    afile.write_text("")
    monkeypatch.setenv("MGSPARSE_DATA", str(afile))
    for command in (["datasets", "info", "cora"], ["datasets", "download", "cora"],
                    ["datasets", "list"]):
        result = cli(*command)
        one_line_error(result, 1, f"MGSPARSE_DATA={afile} is a file", "point it at a folder")
    result = cli("datasets", "info", "cora", "--root", str(afile / "x"))
    one_line_error(result, 1, "dataset.root", f"lies under the file {afile}")
    assert afile.read_text() == ""


def test_malformed_mirror_url_is_a_one_line_usage_error(cli, offline, monkeypatch):
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", "http://[::1/")
    result = cli("datasets", "info", "cora")
    one_line_error(result, 2, "MGSPARSE_PLANETOID_URL: malformed URL 'http://[::1/'")
    result = cli("datasets", "download", "cora", "--url", "http://[::1/")
    one_line_error(result, 2, "dataset.url (--url): malformed URL")
    assert list(offline.iterdir()) == []


# --- your own CSV files, OGB archives, configs ---------------------------------------------------

EXAMPLE = REPO_ROOT / "configs" / "examples" / "two-communities"


def test_info_on_a_csv_folder_and_an_edge_file(cli, offline):
    result = cli("datasets", "info", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    for fragment in ("two-communities", "60", "290", "8/12/40", "0:30  1:30"):
        assert fragment in result.stdout
    result = cli("datasets", "info", str(EXAMPLE / "edges.csv"))
    assert result.exit_code == 0, result.output
    assert "290" in result.stdout and "0/0/0" in result.stdout


def test_info_on_a_bad_csv_line_is_exit_2_naming_file_and_line(cli, offline, tmp_path):
    (tmp_path / "edges.csv").write_text("0,1\n1,2\n2;x\n")
    result = cli("datasets", "info", str(tmp_path))
    one_line_error(result, 2, "edges.csv line 3: node id 'x' is not an integer")


def test_info_on_a_config_file(cli, offline):
    result = cli("datasets", "info", str(REPO_ROOT / "configs" / "karate.yaml"))
    assert result.exit_code == 0, result.output
    assert "34" in result.stdout and "2/6/26" in result.stdout


@pytest.mark.skipif(not hasattr(DatasetConfig, "edges"),
                    reason="DatasetConfig has no csv keys yet (the lead adds them)")
def test_info_on_the_csv_example_config(cli, offline):
    result = cli("datasets", "info",
                                 str(REPO_ROOT / "configs" / "csv-example.yaml"))
    assert result.exit_code == 0, result.output
    assert "60" in result.stdout and "8/12/40" in result.stdout


def test_download_and_info_of_an_ogb_archive(cli, offline, tmp_path, monkeypatch):
    monkeypatch.setitem(ogb.DATASETS, "ogbn-tiny", TINY)
    monkeypatch.setitem(catalog.DATASETS, "ogbn-tiny",
                        catalog.DatasetFacts("ogbn-tiny", "graph", "ogb", "a tiny OGB archive"))
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.zip").write_bytes(zip_bytes(tiny_members()))
    result = cli("datasets", "download", "ogbn-tiny", "--url", str(mirror))
    assert result.exit_code == 0, result.output
    assert "ogbn-tiny: tiny.zip checked (SHA-256" in result.stdout
    result = cli("datasets", "info", "ogbn-tiny", "--url", str(mirror))
    assert result.exit_code == 0, result.output
    assert "12" in result.stdout and "2/2/2" in result.stdout
    (mirror / "tiny.zip").write_bytes(b"PK not really")
    result = cli("datasets", "download", "ogbn-tiny", "--url", str(mirror),
                                 "--root", str(tmp_path / "fresh"))
    one_line_error(result, 2, "tiny.zip: not a readable zip archive")  # their own folder


def test_info_prints_numbers_and_densities_in_one_form_at_80_columns(cli, mirrored):
    """Counts with thousands separators as every other table, both densities as the
    percentages the live table and the summary print, and no class count split from its
    class across lines."""
    result = cli("datasets", "info", "cora")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "2,708" in text and "2708" not in text and "1.439e-03" not in text
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.splitlines() if line.count("│") == 3}
    assert rows["adjacency density"] == "0.14%" and rows["feature density"] == "1.27%"
    assert rows["label counts"].split() == [f"{c}:{n}" for c, n in
                                            enumerate((351, 217, 418, 818, 426, 298, 180))]
