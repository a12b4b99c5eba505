"""Fixtures for the layer tests: the real Planetoid files behind the loopback server."""

from __future__ import annotations

import pytest


@pytest.fixture
def mirror_env(planetoid_mirror, monkeypatch, tmp_path_factory):
    """MGSPARSE_PLANETOID_URL pointing at the loopback mirror, and a fresh download cache."""
    url, _ = planetoid_mirror
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", url)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path_factory.mktemp("datasets")))
    return url
