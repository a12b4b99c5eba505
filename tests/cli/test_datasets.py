"""`mgsparse datasets list | download | info` driven through CliRunner."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

import mgsparse.cli.datasets  # noqa: F401  (registers the `datasets` commands)
from mgsparse.cli import app

runner = CliRunner()


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


def assert_one_line_error(result, code, *fragments):
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_info_cora_prints_the_table(mirrored):
    result = runner.invoke(app, ["datasets", "info", "cora"])
    assert result.exit_code == 0, result.output
    for fragment in ("2708", "10556", "1433", "140/500/1000", "label counts", "3: 818"):
        assert fragment in result.stdout


def test_info_karate_and_synthetic_work_offline(offline):
    result = runner.invoke(app, ["datasets", "info", "karate"])
    assert result.exit_code == 0, result.output
    assert "34" in result.stdout and "2/6/26" in result.stdout and "0: 17  1: 17" in result.stdout
    result = runner.invoke(app, ["datasets", "info", "synthetic"])
    assert result.exit_code == 0, result.output
    assert "2000" in result.stdout


def test_unknown_name_is_a_one_line_usage_error(offline):
    result = runner.invoke(app, ["datasets", "info", "nope"])
    assert_one_line_error(result, 2, "unknown dataset 'nope'", "cora")
    result = runner.invoke(app, ["datasets", "download", "nope"])
    assert_one_line_error(result, 2, "unknown Planetoid dataset 'nope'")


def test_download_then_list_shows_the_cache(mirrored):
    root, log = mirrored
    result = runner.invoke(app, ["datasets", "download", "citeseer"])
    assert result.exit_code == 0, result.output
    assert "CiteSeer: 8 files verified" in result.stdout
    assert len(log) == 8 and len(list((root / "CiteSeer" / "raw").iterdir())) == 8
    result = runner.invoke(app, ["datasets", "list"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.stdout.splitlines()
            if line.startswith("│ ") and line.split()[1] in ("cora", "citeseer", "karate")}
    assert " no " in rows["cora"] and " yes " in rows["citeseer"] and "KB" in rows["citeseer"]
    assert "built in" in rows["karate"]


def test_download_with_root_and_url_options(planetoid_mirror, tmp_path, monkeypatch):
    monkeypatch.delenv("MGSPARSE_PLANETOID_URL", raising=False)
    base, _ = planetoid_mirror
    result = runner.invoke(app, ["datasets", "download", "cora", "--root", str(tmp_path / "r"),
                                 "--url", base])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "Cora" / "raw" / "ind.cora.allx").is_file()


def test_download_embedded_dataset_needs_nothing(offline):
    result = runner.invoke(app, ["datasets", "download", "karate"])
    assert result.exit_code == 0 and "nothing to download" in result.stdout


def test_pubmed_missing_allx_is_one_red_line(mirrored):
    result = runner.invoke(app, ["datasets", "download", "pubmed"])
    assert_one_line_error(result, 1, "ind.pubmed.allx", "HTTP 404")


def test_unreachable_mirror_is_one_line_with_the_hint(offline, monkeypatch):
    from mgsparse.data import planetoid

    monkeypatch.setattr(planetoid, "FETCH_OPTIONS",
                        {"timeout": (1.0, 0.3), "retries": 0, "backoff": 0.0})
    result = runner.invoke(app, ["datasets", "info", "cora"])
    assert_one_line_error(result, 1, "unreachable", "MGSPARSE_PLANETOID_URL")
