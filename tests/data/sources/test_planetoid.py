"""planetoid.load(): real downloads over loopback, the numbers everyone quotes, the cache, and
every failure leaving the cache clean."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import socket

import numpy as np
import pytest

from mgsparse.data.cache import load_arrays
from mgsparse.data.sources import planetoid
from mgsparse.errors import ChecksumError, ConfigError, DataError, DownloadError
from tests.data.conftest import tiny_planetoid_files

EXPECTED = {  # nodes, directed edges, features, classes, train/val/test, unlabeled
    "cora": (2708, 10556, 1433, 7, (140, 500, 1000), 0),
    "citeseer": (3327, 9104, 3703, 6, (120, 500, 1000), 15),
}


def real_checksums(name):
    return {f: planetoid.CHECKSUMS[f] for f in planetoid.file_names(name)}


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_download_and_load_real_dataset(name, planetoid_mirror, tmp_path, only_verified):
    base, log = planetoid_mirror
    g = planetoid.load(name, root=tmp_path, url=base)
    nodes, edges, features, classes, split, unlabeled = EXPECTED[name]
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (
        nodes, edges, features, classes)
    assert g.split_sizes() == split
    assert int((g.y == -1).sum()) == unlabeled
    masks = g.train_mask | g.val_mask | g.test_mask
    assert not masks[g.y == -1].any()
    assert not (g.train_mask & g.val_mask).any() and not (g.val_mask & g.test_mask).any()
    src, dst = g.edge_index
    assert (src != dst).all()
    keys = src * nodes + dst
    assert np.unique(keys).size == edges  # no duplicates
    assert set(keys.tolist()) == set((dst * nodes + src).tolist())  # symmetric
    assert len(log) == 8
    only_verified(tmp_path / planetoid.NAMES[name] / "raw", real_checksums(name))


def test_second_load_reads_the_processed_cache_without_network(planetoid_mirror, tmp_path):
    base, log = planetoid_mirror
    first = planetoid.load("cora", root=tmp_path, url=base)
    cached = list((tmp_path / "Cora" / "processed").glob("cora-*.npz"))
    assert len(cached) == 1
    again = planetoid.load("cora", root=tmp_path, url=base)
    assert len(log) == 8  # nothing fetched the second time
    assert (again.x != first.x).nnz == 0
    np.testing.assert_array_equal(again.edge_index, first.edge_index)
    np.testing.assert_array_equal(again.test_mask, first.test_mask)


def test_corrupt_processed_cache_is_rebuilt(planetoid_mirror, tmp_path):
    base, _ = planetoid_mirror
    planetoid.load("cora", root=tmp_path, url=base)
    (cached,) = (tmp_path / "Cora" / "processed").glob("cora-*.npz")
    cached.write_bytes(b"not an npz")
    assert planetoid.load("cora", root=tmp_path, url=base).num_edges == 10556


def test_random_and_full_splits_and_normalisation(planetoid_mirror, tmp_path):
    base, _ = planetoid_mirror
    g = planetoid.load("cora", root=tmp_path, url=base, split="random", seed=3,
                       normalize_features=True)
    assert g.split_sizes() == (140, 500, 1000)
    assert (np.bincount(g.y[g.train_mask]) == 20).all()
    again = planetoid.load("cora", root=tmp_path, url=base, split="random", seed=3)
    np.testing.assert_array_equal(g.train_mask, again.train_mask)
    np.testing.assert_allclose(np.asarray(g.x.sum(axis=1)).ravel(), 1.0, rtol=1e-5)
    full = planetoid.load("citeseer", root=tmp_path, url=base, split="full")
    assert full.split_sizes() == (3327 - 500 - 1000 - 15, 500, 1000)


def test_pubmed_without_allx_on_the_mirror_names_it_and_keeps_only_verified_files(
        planetoid_mirror, tmp_path, only_verified):
    """../shared/planetoid lacks ind.pubmed.allx: the files before it arrive verified, then
    the download stops on one line naming the missing file, leaving nothing partial."""
    base, log = planetoid_mirror
    with pytest.raises(DownloadError) as info:
        planetoid.load("pubmed", root=tmp_path, url=base)
    message = str(info.value)
    assert "ind.pubmed.allx" in message and "HTTP 404" in message and "\n" not in message
    assert log == ["/ind.pubmed.x", "/ind.pubmed.tx", "/ind.pubmed.allx"]
    raw = tmp_path / "PubMed" / "raw"
    only_verified(raw, real_checksums("pubmed"))
    assert sorted(p.name for p in raw.iterdir()) == ["ind.pubmed.tx", "ind.pubmed.x"]


def test_pubmed_allx_checksum_is_embedded():
    """Issue #12: PubMed was refused for want of this checksum (file of 7,578,385 bytes)."""
    assert planetoid.CHECKSUMS["ind.pubmed.allx"] == (
        "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e")


def test_pubmed_downloads_and_loads_like_cora(serve_folder, tmp_path, monkeypatch,
                                             only_verified):
    """The PubMed path end to end on a small synthetic file set (the real allx is not in the
    shared mirror): its checksums, supplied here, stand in for the embedded ones."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    sums = {}
    for name, data in tiny_planetoid_files().items():
        name = name.replace("ind.tiny.", "ind.pubmed.")
        (mirror / name).write_bytes(data)
        sums[name] = hashlib.sha256(data).hexdigest()
    for name, digest in sums.items():
        monkeypatch.setitem(planetoid.CHECKSUMS, name, digest)
    base, log = serve_folder(mirror)
    g = planetoid.load("pubmed", root=tmp_path / "cache", url=base)
    assert (g.num_nodes, g.num_edges, g.num_features, g.split_sizes()) == (8, 8, 3, (2, 2, 3))
    assert sorted(log) == sorted(f"/{name}" for name in sums)
    only_verified(tmp_path / "cache" / "PubMed" / "raw", sums)
    (mirror / "ind.pubmed.allx").write_bytes(b"a different allx")  # the cache is verified:
    assert planetoid.load("pubmed", root=tmp_path / "cache", url=base).num_nodes == 8
    assert len(log) == 8  # nothing fetched again


# --- where files come from and go -------------------------------------------------------------

def test_url_override_order(monkeypatch):
    monkeypatch.delenv(planetoid.URL_ENV, raising=False)
    assert planetoid.resolve_url() == planetoid.DEFAULT_URL
    assert planetoid.DEFAULT_URL == "https://github.com/kimiyoung/planetoid/raw/master/data/"
    monkeypatch.setenv(planetoid.URL_ENV, "http://mirror.example/")
    assert planetoid.resolve_url() == "http://mirror.example/"
    assert planetoid.resolve_url("/srv/planetoid") == "/srv/planetoid"


def test_root_override_order_and_layout(monkeypatch, tmp_path):
    monkeypatch.delenv(planetoid.ROOT_ENV, raising=False)
    assert planetoid.resolve_root() == planetoid.Path("datasets")
    monkeypatch.setenv(planetoid.ROOT_ENV, str(tmp_path / "env"))
    assert planetoid.raw_dir("citeseer") == tmp_path / "env" / "CiteSeer" / "raw"
    assert planetoid.raw_dir("PubMed", tmp_path / "arg") == tmp_path / "arg" / "PubMed" / "raw"


def test_environment_mirror_is_used(planetoid_mirror, tmp_path, monkeypatch):
    base, log = planetoid_mirror
    monkeypatch.setenv(planetoid.URL_ENV, base)
    monkeypatch.setenv(planetoid.ROOT_ENV, str(tmp_path))
    assert planetoid.load("cora").num_nodes == 2708
    assert len(log) == 8 and (tmp_path / "Cora" / "raw" / "ind.cora.graph").is_file()


def test_every_file_has_a_checksum():
    assert len(planetoid.CHECKSUMS) == 24
    assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in planetoid.CHECKSUMS.values())


def test_bad_name_and_bad_split_fail_before_any_download(tmp_path):
    with pytest.raises(ConfigError, match="unknown Planetoid dataset 'corra'"):
        planetoid.load("corra", root=tmp_path)
    with pytest.raises(ConfigError, match="unknown split 'publik'"):
        planetoid.load("cora", root=tmp_path, split="publik", url=str(tmp_path / "none"))
    assert not (tmp_path / "Cora").exists()


# --- hermetic failures with the tiny dataset -----------------------------------------------------

def tiny_routes(mirror, **overrides):
    routes = {p.name: [("ok", p.read_bytes())] for p in mirror.iterdir()}
    routes.update(overrides)
    return routes


def test_tiny_dataset_through_the_whole_pipeline(tiny_dataset, scripted_server, tmp_path):
    mirror, checksums = tiny_dataset
    base, log = scripted_server(tiny_routes(mirror))
    g = planetoid.load("tiny", root=tmp_path, url=base)
    assert (g.num_nodes, g.num_edges, g.split_sizes()) == (8, 8, (2, 2, 3))
    assert sorted(log) == sorted(checksums)


def test_file_missing_on_mirror_is_named(tiny_dataset, scripted_server, tmp_path, fast_fetch,
                                         only_verified):
    mirror, checksums = tiny_dataset
    routes = tiny_routes(mirror)
    del routes["ind.tiny.graph"]
    base, _ = scripted_server(routes)
    with pytest.raises(DownloadError, match=r"ind\.tiny\.graph.*HTTP 404") as info:
        planetoid.load("tiny", root=tmp_path, url=base)
    assert "\n" not in str(info.value)
    only_verified(tmp_path / "Tiny" / "raw", checksums)


def test_tampered_file_on_mirror_is_discarded(tiny_dataset, scripted_server, tmp_path,
                                              fast_fetch, only_verified):
    mirror, checksums = tiny_dataset
    evil = pickle.dumps([1, 2, 3], protocol=2)
    base, _ = scripted_server(tiny_routes(mirror, **{"ind.tiny.allx": [("ok", evil)]}))
    with pytest.raises(ChecksumError, match=r"ind\.tiny\.allx"):
        planetoid.load("tiny", root=tmp_path, url=base)
    only_verified(tmp_path / "Tiny" / "raw", checksums)


def test_code_carrying_file_is_refused_even_when_its_checksum_matches(
        tiny_dataset, tmp_path, monkeypatch):
    """Second line of defence: a recipe whose checksum itself was tampered with."""
    mirror, _ = tiny_dataset
    marker = tmp_path / "payload-ran"
    payload = pickle.dumps(_Payload(f"touch {marker}"), protocol=2)
    (mirror / "ind.tiny.x").write_bytes(payload)
    monkeypatch.setitem(planetoid.CHECKSUMS, "ind.tiny.x", hashlib.sha256(payload).hexdigest())
    with pytest.raises(DataError, match="refused to unpickle global"):
        planetoid.load("tiny", root=tmp_path / "cache", url=str(mirror))
    assert not marker.exists()
    assert not (tmp_path / "cache" / "Tiny" / "processed").exists()


class _Payload:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_unreachable_network_says_how_to_use_a_mirror(tiny_dataset, tmp_path, fast_fetch,
                                                      only_verified, monkeypatch):
    """The canonical server unreachable: how to use a mirror. A mirror the user set that is
    unreachable: that it is set, to what, and to check or unset it (not to set it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = f"http://127.0.0.1:{port}/"
    monkeypatch.delenv(planetoid.URL_ENV, raising=False)
    monkeypatch.setattr(planetoid, "DEFAULT_URL", dead)
    with pytest.raises(DownloadError) as info:
        planetoid.load("tiny", root=tmp_path)
    message = str(info.value)
    assert "unreachable" in message and message.endswith(planetoid.MIRROR_HINT)
    assert planetoid.URL_ENV in message and "dataset.url" in message and "\n" not in message
    with pytest.raises(DownloadError) as info:
        planetoid.load("tiny", root=tmp_path, url=dead)
    assert str(info.value).endswith(f"; the host is dataset.url's (--url), set to {dead}: check "
                                    "it, or remove it to download from the dataset's own server")
    monkeypatch.setenv(planetoid.URL_ENV, dead)
    with pytest.raises(DownloadError) as info:
        planetoid.load("tiny", root=tmp_path)
    assert str(info.value).endswith(f"; the host is {planetoid.URL_ENV}'s, set to {dead}: check "
                                    "it, or unset it to download from the dataset's own server")
    only_verified(tmp_path / "Tiny" / "raw", {})


# --- damaged caches are rebuilt, damaged raw files fetched again ----------------------------------

def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(path):
    path.write_bytes(b"")


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _edit_an_array(path):
    """Re-saved by hand: a valid .npz whose labels no longer match the saved digest."""
    with np.load(path) as z:
        arrays = dict(z)
    arrays["y"] = np.zeros_like(arrays["y"])
    np.savez(path, **arrays)


@pytest.mark.parametrize("damage", [_truncate, _empty, _flip_a_byte, _edit_an_array])
def test_damaged_processed_cache_is_rebuilt(damage, tiny_dataset, tmp_path):
    mirror, _ = tiny_dataset
    first = planetoid.load("tiny", root=tmp_path, url=str(mirror))
    (cached,) = (tmp_path / "Tiny" / "processed").glob("tiny-*.npz")
    damage(cached)
    again = planetoid.load("tiny", root=tmp_path, url=str(mirror))
    np.testing.assert_array_equal(again.y, first.y)
    np.testing.assert_array_equal(again.edge_index, first.edge_index)
    key = planetoid._cache_key("tiny")
    assert load_arrays(cached, key) is not None  # rewritten, readable again
    assert [p.name for p in cached.parent.iterdir()] == [cached.name]  # no temp file left


def test_damaged_raw_file_is_fetched_again(tiny_dataset, scripted_server, tmp_path):
    mirror, checksums = tiny_dataset
    base, log = scripted_server(tiny_routes(mirror))
    planetoid.load("tiny", root=tmp_path, url=base)
    raw = tmp_path / "Tiny" / "raw" / "ind.tiny.graph"
    raw.write_bytes(raw.read_bytes() + b"appended")
    assert planetoid.load("tiny", root=tmp_path, url=base).num_edges == 8
    assert log.count("ind.tiny.graph") == 2 and len(log) == 9
    assert hashlib.sha256(raw.read_bytes()).hexdigest() == checksums["ind.tiny.graph"]


# --- paths that are not what they seem ----------------------------------------------------------

@pytest.mark.parametrize("via", ["argument", "environment"])
def test_root_that_is_a_file_is_one_line_naming_it(via, tiny_dataset, tmp_path, monkeypatch):
    mirror, _ = tiny_dataset
    afile = tmp_path / "notes.txt"
    afile.write_text("not a folder")
    for root, what in ((afile, "is a file"), (afile / "sub", f"lies under the file {afile}")):
        monkeypatch.setenv(planetoid.ROOT_ENV, str(root))
        with pytest.raises(DataError) as info:
            planetoid.load("tiny", root=root if via == "argument" else None, url=str(mirror))
        message = str(info.value)
        setting = "dataset.root" if via == "argument" else planetoid.ROOT_ENV
        assert message.startswith(f"{setting}") and f"{root} {what}" in message
        assert "point it at a folder" in message and "\n" not in message
    assert afile.read_text() == "not a folder"


def test_root_that_cannot_be_searched_is_one_line(tmp_path, monkeypatch):
    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(planetoid.Path, "exists", denied)  # as for a folder without +x
    with pytest.raises(DataError, match=r"^dataset\.root \(--root\)=.*locked: cannot access "
                                        r"it \(Permission denied\)$"):
        planetoid.resolve_root(tmp_path / "locked")


def test_malformed_url_names_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv(planetoid.URL_ENV, "http://[::1/")
    with pytest.raises(ConfigError, match=rf"^{planetoid.URL_ENV}: malformed URL"):
        planetoid.load("cora", root=tmp_path)
    with pytest.raises(ConfigError, match=r"^dataset\.url \(--url\): malformed URL"):
        planetoid.load("cora", root=tmp_path, url="http://[::1/")
    assert list(tmp_path.iterdir()) == []


def test_hostile_mirror_cannot_fill_the_disk(tiny_dataset, scripted_server, tmp_path,
                                            fast_fetch, only_verified):
    mirror, checksums = tiny_dataset
    base, _ = scripted_server(tiny_routes(mirror, **{"ind.tiny.allx": [("endless", None)]}))
    cap = planetoid.max_download_bytes("ind.tiny.allx")
    assert cap < 100_000  # the tiny file's size plus the margin, not the 64 MiB fallback
    written = []
    with pytest.raises(DownloadError, match=rf"ind\.tiny\.allx .*larger than the {cap:,} bytes"):
        planetoid.load("tiny", root=tmp_path, url=base,
                       progress=lambda done, total, name: written.append((name, done)))
    assert max(done for name, done in written if name == "ind.tiny.allx") <= cap
    only_verified(tmp_path / "Tiny" / "raw", checksums)


def test_every_real_file_has_its_size_and_fits_its_cap(real_planetoid):
    real = sorted(p.name for p in real_planetoid.glob("ind.*"))
    # Cora and CiteSeer whole; PubMed whole or without its large allx (as ../shared has it)
    assert len(real) in (23, 24) and set(real) <= set(planetoid.CHECKSUMS)
    for name in real:
        size = (real_planetoid / name).stat().st_size
        assert planetoid.SIZES[name] == size
        assert size < planetoid.max_download_bytes(name) < 2 * size + 70_000


# --- permissions: the cache honours the umask, as open() would ----------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_cache_files_honour_the_umask(umask, tiny_dataset, tmp_path):
    mirror, _ = tiny_dataset
    previous = os.umask(umask)
    try:
        planetoid.load("tiny", root=tmp_path, url=str(mirror))
    finally:
        os.umask(previous)
    files = [p for p in (tmp_path / "Tiny").rglob("*") if p.is_file()]
    assert len(files) == 9  # 8 raw + 1 processed
    assert {p.stat().st_mode & 0o777 for p in files} == {0o666 & ~umask}
