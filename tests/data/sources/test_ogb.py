"""OGB node-property archives: a tiny archive in the documented layout, served over loopback,
loaded end to end; damaged archives refused with one line; the first checksum kept."""

from __future__ import annotations

import gzip
import io
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

from mgsparse.data.download import record_sha256
from mgsparse.data.sources import ogb
from mgsparse.errors import ChecksumError, ConfigError, DataError, DownloadError
from tests.data.conftest import sha256

# 6 nodes in two triangles, listed as directed edges with a reverse duplicate (1->0) and a
# self loop (2->2); features 3-wide, 2 classes, split train {0,3} / valid {1,4} / test {2,5}.
EDGES = [(0, 1), (1, 0), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (2, 2)]
X = np.arange(18, dtype=np.float32).reshape(6, 3) / 4
Y = [0, 0, 0, 1, 1, 1]
SPLIT = {"train": [0, 3], "valid": [1, 4], "test": [2, 5]}
TINY = ogb.OgbSpec("ogbn-tiny", "tiny", "time", 6, 8, 3, 2, (2, 2, 2), directed=True)


def csv_gz(rows) -> bytes:
    text = "".join(",".join(str(v) for v in np.atleast_1d(row)) + "\n" for row in rows)
    return gzip.compress(text.encode())


def tiny_members(**override: bytes) -> dict[str, bytes]:
    """Member name -> bytes, in exactly the documented layout; ``override`` by short name."""
    files = {"edge": csv_gz(EDGES), "node-feat": csv_gz(X.tolist()), "node-label": csv_gz(Y),
             "num-node-list": csv_gz([6]), "num-edge-list": csv_gz([len(EDGES)]),
             **{key: csv_gz(nodes) for key, nodes in SPLIT.items()}}
    files.update(override)
    names = TINY.members()
    members = {names[key]: data for key, data in files.items() if data is not None}
    members["tiny/RELEASE_v1.txt"] = b"ogbn-tiny release 1\n"  # present in OGB zips, unread
    return members


def zip_bytes(members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """Registers ogbn-tiny; a cache in tmp_path; OGB downloads that give up quickly."""
    monkeypatch.setitem(ogb.DATASETS, "ogbn-tiny", TINY)
    monkeypatch.setattr(ogb, "FETCH_OPTIONS", {"timeout": (1.0, 0.5), "retries": 1,
                                               "backoff": 0.01})
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "data"))
    monkeypatch.delenv(ogb.URL_ENV, raising=False)
    return tmp_path / "data"


def serve_zip(scripted_server, body: bytes):
    return scripted_server({"tiny.zip": [("ok", body)]})


def test_facts_are_consistent():
    for spec in ogb.DATASETS.values():
        assert sum(spec.split_sizes) == spec.num_nodes, spec.name
    arxiv = ogb.DATASETS["ogbn-arxiv"]
    assert (arxiv.num_nodes, arxiv.num_edges, arxiv.num_features, arxiv.num_classes) == (
        169_343, 1_166_243, 128, 40)
    assert arxiv.members()["train"] == "arxiv/split/time/train.csv.gz"
    assert ogb.DATASETS["ogbn-products"].members()["edge"] == "products/raw/edge.csv.gz"


def test_tiny_archive_end_to_end(tiny, scripted_server):
    body = zip_bytes(tiny_members())
    base, log = serve_zip(scripted_server, body)
    seen = []
    g = ogb.load("ogbn-tiny", url=base, progress=lambda done, total, name: seen.append(done))
    assert (g.num_nodes, g.num_features, g.num_classes, g.name) == (6, 3, 2, "ogbn-tiny")
    # symmetrised: both directions, the self loop and the repeated 0-1 gone, sorted
    expected = [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1),
                (3, 4), (3, 5), (4, 3), (4, 5), (5, 3), (5, 4)]
    assert list(zip(*g.edge_index.tolist())) == expected
    np.testing.assert_array_equal(g.x, X)
    assert g.x.dtype == np.float32 and g.y.tolist() == Y and g.y.dtype == np.int64
    assert [np.flatnonzero(m).tolist() for m in (g.train_mask, g.val_mask, g.test_mask)] == [
        [0, 3], [1, 4], [2, 5]]
    assert seen[-1] == len(body) and log == ["tiny.zip"]
    archive = tiny / "ogbn_tiny" / "raw" / "tiny.zip"
    assert ogb.recorded_sha256(archive) == sha256(body)
    again = ogb.load("ogbn-tiny", url=base)  # verified cache and processed .npz: no request
    assert log == ["tiny.zip"] and len(list((tiny / "ogbn_tiny" / "processed").iterdir())) == 1
    np.testing.assert_array_equal(again.edge_index, g.edge_index)
    np.testing.assert_array_equal(again.x, g.x)


def test_directed_keeps_the_edges_as_written(tiny, scripted_server):
    base, _ = serve_zip(scripted_server, zip_bytes(tiny_members()))
    g = ogb.load("ogbn-tiny", url=base, directed=True)
    assert list(zip(*g.edge_index.tolist())) == EDGES
    with pytest.raises(ConfigError, match="ogbn-products is an undirected graph"):
        ogb.process("ogbn-products", directed=True)


def test_first_checksum_is_kept_and_enforced(tiny, scripted_server):
    first = zip_bytes(tiny_members())
    base, log = serve_zip(scripted_server, first)
    ogb.download("ogbn-tiny", url=base)
    archive = tiny / "ogbn_tiny" / "raw" / "tiny.zip"
    archive.write_bytes(first[:-1] + b"!")  # tampered cache: deleted and fetched again
    ogb.download("ogbn-tiny", url=base)
    assert archive.read_bytes() == first and log == ["tiny.zip", "tiny.zip"]
    archive.unlink()
    other_base, _ = serve_zip(scripted_server, zip_bytes(tiny_members(**{"node-label":
                                                                        csv_gz([1] * 6)})))
    with pytest.raises(ChecksumError, match=r"tiny\.zip from .* has SHA-256 .* expected "
                                            + sha256(first)[:16]):
        ogb.download("ogbn-tiny", url=other_base)
    assert not archive.exists()


def test_offline_install_of_a_copied_zip(tiny, tmp_path):
    archive = tiny / "ogbn_tiny" / "raw" / "tiny.zip"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(zip_bytes(tiny_members()))
    g = ogb.load("ogbn-tiny", url=str(tmp_path / "no-such-mirror"))
    assert g.num_edges == 12 and ogb.cache_status("ogbn-tiny")["cached"] is True


def test_mirror_folder_and_unreachable_host(tiny, tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.zip").write_bytes(zip_bytes(tiny_members()))
    assert ogb.load("ogbn-tiny", url=str(mirror)).num_nodes == 6
    with pytest.raises(DownloadError, match=r"unreachable.*; the host is dataset.url's \(--url\), "
                                            r"set to http://127\.0\.0\.1:9/: check it"):
        ogb.download("ogbn-tiny", root=tmp_path / "other", url="http://127.0.0.1:9/")


def truncated(body: bytes) -> bytes:
    return body[: len(body) // 2]


def crc_damaged() -> bytes:
    body = bytearray(zip_bytes(tiny_members(), zipfile.ZIP_STORED))
    at = bytes(body).index(csv_gz(X.tolist())) + 20  # inside node-feat's stored bytes
    body[at] ^= 0xFF
    return bytes(body)


@pytest.mark.parametrize("body, message", [
    (truncated(zip_bytes(tiny_members())), r"^tiny\.zip: not a readable zip archive"),
    (crc_damaged(), r"^tiny\.zip: member tiny/raw/node-feat\.csv\.gz is damaged"),
    (zip_bytes(tiny_members(test=None)),
     r"not the documented OGB layout: tiny/split/time/test\.csv\.gz is missing"),
])
def test_damaged_download_is_refused_and_not_trusted(tiny, scripted_server, body, message):
    base, _ = serve_zip(scripted_server, body)
    with pytest.raises(DataError, match=message) as info:
        ogb.load("ogbn-tiny", url=base)
    assert "\n" not in str(info.value)
    assert list((tiny / "ogbn_tiny" / "raw").iterdir()) == []  # no archive, no record


@pytest.mark.parametrize("override, message", [
    ({"edge": csv_gz(EDGES[:-1])}, r"edge\.csv\.gz: 7 rows, expected 8"),
    ({"edge": b"0,1\n1,2\n"}, r"edge\.csv\.gz: damaged gzip data"),
    ({"edge": gzip.compress(b"0,1\n1,x\n")}, r"edge\.csv\.gz line 2, column 2: 'x' is not"),
    ({"edge": gzip.compress(b"0,1\n1,2,3\n")}, r"edge\.csv\.gz line 2: 3 columns, expected 2"),
    ({"edge": csv_gz(EDGES[:-1] + [(2, 6)])}, r"edge\.csv\.gz line 8: node id \[2, 6\] out of"),
    ({"num-node-list": csv_gz([7])}, r"num-node-list\.csv\.gz: 7 nodes, but the dataset has 6"),
    ({"node-feat": csv_gz(X[:, :2].tolist())}, r"node-feat\.csv\.gz: 2 columns, expected 3"),
    ({"node-label": csv_gz([0, 0, 0, 1, 1, 2])}, r"node-label\.csv\.gz line 6: label 2 is not"),
    ({"valid": csv_gz([1])}, r"valid\.csv\.gz: 1 nodes, but the official split has 2"),
    ({"test": csv_gz([2, 3])}, r"test\.csv\.gz: node 3 is also in an earlier split file"),
])
def test_damaged_content_is_one_line(tiny, scripted_server, override, message):
    base, _ = serve_zip(scripted_server, zip_bytes(tiny_members(**override)))
    with pytest.raises(DataError, match=r"^tiny\.zip:tiny/(raw|split/time)/" + message) as info:
        ogb.load("ogbn-tiny", url=base)
    assert "\n" not in str(info.value)


def test_not_downloaded_and_unknown_names(tiny):
    with pytest.raises(DataError, match="ogbn-tiny is not downloaded"):
        ogb.process("ogbn-tiny")
    with pytest.raises(ConfigError, match="unknown OGB dataset 'ogbn-nope'"):
        ogb.load("ogbn-nope")


def test_oversized_download_and_malformed_url_are_refused(tiny, scripted_server, monkeypatch):
    monkeypatch.setitem(ogb.DATASETS, "ogbn-tiny", ogb.OgbSpec(**{**TINY.__dict__,
                                                                  "max_bytes": 100}))
    base, _ = serve_zip(scripted_server, zip_bytes(tiny_members()))
    with pytest.raises(DownloadError, match=r"tiny\.zip from .* is larger than the 100 bytes"):
        ogb.download("ogbn-tiny", url=base)
    assert list((tiny / "ogbn_tiny" / "raw").iterdir()) == []  # no .part file left
    monkeypatch.setenv(ogb.URL_ENV, "http://[::1/")
    with pytest.raises(ConfigError, match=r"^MGSPARSE_OGB_URL: malformed URL"):
        ogb.download("ogbn-tiny")


# --- trust only what parses: the first archive is pinned after its parse and counts ------------

def test_a_first_archive_that_fails_its_counts_is_not_pinned_so_a_good_mirror_is_used(
        tiny, tmp_path):
    bad, good = tmp_path / "bad", tmp_path / "good"
    for folder, members in ((bad, tiny_members(**{"num-node-list": csv_gz([7])})),
                            (good, tiny_members())):
        folder.mkdir()
        (folder / "tiny.zip").write_bytes(zip_bytes(members))
    with pytest.raises(DataError, match=r"num-node-list\.csv\.gz: 7 nodes, but the dataset "
                                        r"has 6"):
        ogb.download("ogbn-tiny", url=str(bad))
    assert list((tiny / "ogbn_tiny" / "raw").iterdir()) == []  # neither archive nor record
    archive = ogb.download("ogbn-tiny", url=str(good))
    assert ogb.recorded_sha256(archive) == sha256((good / "tiny.zip").read_bytes())
    assert ogb.load("ogbn-tiny", url=str(bad)).num_nodes == 6  # the pinned cache, not bad


def test_a_pinned_archive_that_does_not_parse_is_unpinned(tiny, tmp_path):
    """An archive pinned before parses were checked: refused once, then fetched afresh."""
    archive = tiny / "ogbn_tiny" / "raw" / "tiny.zip"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(zip_bytes(tiny_members(edge=csv_gz(EDGES[:-1]))))
    record_sha256(archive)
    with pytest.raises(DataError, match=r"edge\.csv\.gz: 7 rows, expected 8 \(the archive "
                                        r"was deleted: the next run downloads it again\)"):
        ogb.process("ogbn-tiny")
    assert list(archive.parent.iterdir()) == []
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.zip").write_bytes(zip_bytes(tiny_members()))
    assert ogb.load("ogbn-tiny", url=str(mirror)).num_edges == 12


def bomb(row: bytes, count: int) -> bytes:
    """`row` `count` times, gzipped a MB at a time (10 MB of rows make about 10 KB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip header and trailer
    chunk = row * ((1 << 20) // len(row))
    parts = [packer.compress(chunk) for _ in range(count // ((1 << 20) // len(row)))]
    return b"".join([*parts, packer.flush()])


TOO_MANY_BYTES = r"decompresses to more than 65,536 bytes, more than 8 rows can take"


@pytest.mark.parametrize("override, message", [
    ({"edge": bomb(b"0,1\n", 10_000_000)}, r"edge\.csv\.gz: more than 8 rows, expected exactly"),
    ({"edge": bomb(b"0", 40_000_000)}, r"edge\.csv\.gz: " + TOO_MANY_BYTES),  # one line
    ({"edge": bomb(b"\n", 40_000_000)}, r"edge\.csv\.gz: " + TOO_MANY_BYTES),  # no rows at all
    ({"train": bomb(b"0\n", 10_000_000)}, r"train\.csv\.gz: more than 2 rows, expected 2"),
])
def test_a_gzip_bomb_is_refused_after_a_bounded_read(tiny, tmp_path, override, message):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.zip").write_bytes(zip_bytes(tiny_members(**override)))
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match=r"^tiny\.zip:tiny/(raw|split/time)/" + message):
            ogb.download("ogbn-tiny", url=str(mirror))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak / 1e6:.1f} MB traced: the member was read in full"
    assert list((tiny / "ogbn_tiny" / "raw").iterdir()) == []


def test_a_zip_member_declaring_more_than_the_cap_is_refused_before_inflating(
        tiny, tmp_path, monkeypatch):
    monkeypatch.setitem(ogb.DATASETS, "ogbn-tiny", ogb.OgbSpec(**{**TINY.__dict__,
                                                                  "max_bytes": 1 << 20}))
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    members = {**tiny_members(), "tiny/mapping/zeros.bin": bytes(64 << 20)}
    (mirror / "tiny.zip").write_bytes(zip_bytes(members))
    with pytest.raises(DataError, match=r"^tiny\.zip: member tiny/mapping/zeros\.bin takes the "
                                        r"unzipped size past 4,194,304 bytes \(a zip bomb\?\)"):
        ogb.download("ogbn-tiny", url=str(mirror))
    assert list((tiny / "ogbn_tiny" / "raw").iterdir()) == []
