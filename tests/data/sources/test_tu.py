"""TU graph-classification archives: a tiny archive in the documented layout, served over
loopback, parsed end to end; every kind of damage refused with one line naming the file and
line, nothing kept; the first checksum pinned; the real MUTAG, NCI1 and NCI109."""

from __future__ import annotations

import io
import stat
import time
import zipfile

import numpy as np
import pytest

from mgsparse import catalog
from mgsparse.data import load_dataset
from mgsparse.data.sources import tu, tu_io
from mgsparse.errors import ChecksumError, ConfigError, DataError, InputFileError
from tests.conftest import one_line_error, require_real_tu
from tests.data.conftest import sha256

# Three graphs: a triangle (nodes 1-3, label -1), an edge (4-5, label 1), a path 6-7-8-9
# (label 1); each edge listed both ways as the TU files do. Node labels 2..4 (one-hot width 3).
A = [(1, 2), (2, 1), (2, 3), (3, 2), (1, 3), (3, 1), (4, 5), (5, 4),
     (6, 7), (7, 6), (7, 8), (8, 7), (8, 9), (9, 8)]
INDICATOR = [1, 1, 1, 2, 2, 3, 3, 3, 3]
GRAPH_LABELS = [-1, 1, 1]
NODE_LABELS = [2, 3, 4, 2, 2, 3, 3, 4, 2]
TINY = tu.TuSpec("tiny", "TINY", 3, 9, 2, len(A))


def lines(rows) -> bytes:
    return "".join(", ".join(str(v) for v in np.atleast_1d(row)) + "\n" for row in rows).encode()


def tiny_members(**override) -> dict[str, bytes]:
    """Member name -> bytes in the documented layout; ``override`` by part (None drops it)."""
    parts = {"A": lines(A), "graph_indicator": lines(INDICATOR),
             "graph_labels": lines(GRAPH_LABELS), "node_labels": lines(NODE_LABELS)}
    parts.update(override)
    members = {tu_io.member_name("TINY", p): data for p, data in parts.items() if data is not None}
    members["TINY/README.txt"] = b"README for dataset TINY\n"  # present, never read
    return members


def zip_bytes(members: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name in links:  # a Unix symbolic link member, as `zip --symlinks` writes it
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, b"/etc/passwd")
    return buffer.getvalue()


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """Registers 'tiny' (catalog row and spec), a cache in tmp_path/data, a mirror folder
    tmp_path/mirror, and downloads that give up quickly. Returns (cache root, mirror)."""
    monkeypatch.setitem(tu.DATASETS, "tiny", TINY)
    monkeypatch.setitem(catalog.DATASETS, "tiny",
                        catalog.DatasetFacts("tiny", "graphs", "tu", "3 graphs", num_classes=2))
    monkeypatch.setattr(tu, "FETCH_OPTIONS", {"timeout": (1.0, 0.5), "retries": 1,
                                              "backoff": 0.01})
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "data"))
    monkeypatch.delenv(tu.URL_ENV, raising=False)
    (tmp_path / "mirror").mkdir()
    return tmp_path / "data", tmp_path / "mirror"


def put(mirror, data: bytes) -> None:
    (mirror / "TINY.zip").write_bytes(data)


def kept(root) -> list[str]:
    """Every file left under the dataset's cache folder."""
    folder = root / "TINY"
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- a good archive ----------------------------------------------------------------------------

def test_tiny_archive_end_to_end_over_http(tiny, serve_folder):
    root, mirror = tiny
    put(mirror, zip_bytes(tiny_members()))
    url, log = serve_folder(mirror)
    graphs = load_dataset("tiny", url=url)
    assert (graphs.num_graphs, graphs.num_nodes, graphs.num_edges) == (3, 9, 14)
    assert graphs.node_ptr.tolist() == [0, 3, 5, 9] and graphs.edge_ptr.tolist() == [0, 6, 8, 14]
    assert graphs.y.tolist() == [0, 1, 1]  # -1/1 -> 0/1
    np.testing.assert_array_equal(graphs.x, np.eye(3, dtype=np.float32)[np.array(NODE_LABELS) - 2])
    assert graphs.edge_index[:, 6:8].tolist() == [[3, 4], [4, 3]]  # 1-based 4-5, graph 2
    assert graphs.x.dtype == np.float32 and graphs.edge_index.dtype == np.int64
    assert (root / "TINY/raw/TINY.zip.sha256").read_text().split()[0] == sha256(
        (mirror / "TINY.zip").read_bytes())
    assert log == ["/TINY.zip"]
    (mirror / "TINY.zip").unlink()  # the cache alone serves the second load: no request
    again = load_dataset("tiny", url=url)
    assert log == ["/TINY.zip"] and np.array_equal(again.edge_index, graphs.edge_index)
    assert [p for p in kept(root) if p.startswith("processed/")] != []


def test_attributes_are_appended_to_the_one_hot_labels(tiny):
    _, mirror = tiny
    attributes = np.arange(18, dtype=np.float32).reshape(9, 2) / 4
    put(mirror, zip_bytes(tiny_members(node_attributes=lines(attributes.tolist()))))
    graphs = tu.load("tiny", url=str(mirror))
    assert graphs.num_features == 3 + 2
    np.testing.assert_array_equal(graphs.x[:, 3:], attributes)


def test_without_node_labels_or_attributes_one_constant_feature(tiny):
    _, mirror = tiny
    put(mirror, zip_bytes(tiny_members(node_labels=None)))
    assert tu.load("tiny", url=str(mirror)).x.tolist() == [[1.0]] * 9


def test_node_task_options_are_refused(tiny):
    with pytest.raises(ConfigError, match=r"^tiny is a set of graphs: split applies to node "
                                          r"datasets only"):
        load_dataset("tiny", split="random")
    with pytest.raises(ConfigError, match="normalize_features, directed applies"):
        load_dataset("tiny", normalize_features=True, directed=True)


# --- damage: one line naming the file and line; nothing kept ------------------------------------

WHERE = r"TINY\.zip:TINY/TINY_"
DAMAGE = {
    "parent member": ({"extra": {"../x": b"owned"}},
                      r"^TINY\.zip: member '\.\./x' points outside the archive's folder; refused"),
    "absolute member": ({"extra": {"/tmp/x": b"owned"}}, r"member '/tmp/x' points outside"),
    "symlink member": ({"links": ("TINY/link",)},
                       r"^TINY\.zip: member 'TINY/link' is a symbolic link; refused"),
    "missing member": ({"graph_labels": None},
                       r"^TINY\.zip: TINY/TINY_graph_labels\.txt is missing"),
    "fewer nodes": ({"graph_indicator": lines(INDICATOR[:-1] + [3, 3])},
                    WHERE + r"graph_indicator\.txt: 10 lines, but TINY has 9 nodes"),
    "more graph labels": ({"graph_labels": lines([*GRAPH_LABELS, 1])},
                          WHERE + r"graph_labels\.txt: 4 lines, but TINY has 3 graphs"),
    "labels beyond indicator": ({"graph_indicator": lines([1, 1, 1, 2, 2, 2, 2, 2, 2])},
                                WHERE + r"graph_indicator\.txt: the last graph id is 2, but "
                                r"TINY/TINY_graph_labels\.txt has 3 labels"),
    "graph ids go back": ({"graph_indicator": lines([1, 1, 2, 1, 2, 3, 3, 3, 3])},
                          WHERE + r"graph_indicator\.txt line 4: graph id 1 after 2"),
    "cross-graph edge": ({"A": lines([*A[:5], (3, 4), *A[6:]])},
                         WHERE + r"A\.txt line 6: edge 3, 4 joins graph 1 to graph 2"),
    "node id out of range": ({"A": lines([*A, (9, 10)])},
                             WHERE + r"A\.txt line 15: node id out of range in \[9, 10\]"),
    "an edge line short": ({"A": lines(A[:-2])},
                           WHERE + r"A\.txt: 12 lines, but TINY has 14 edge lines"),
    "non-numeric line": ({"A": lines(A[:2]) + b"2, three\n" + lines(A[3:])},
                         WHERE + r"A\.txt line 3: 'three' is not an integer"),
    "three columns": ({"A": lines(A[:7]) + b"4, 5, 6\n" + lines(A[8:])},
                      WHERE + r"A\.txt line 8: 3 values, expected 2"),
    "three classes": ({"graph_labels": lines([-1, 1, 2])},
                      WHERE + r"graph_labels\.txt: 3 distinct labels \(-1, 1, 2\), but TINY "
                      r"has 2 classes"),
    "oversized member": ({"graph_labels": lines(GRAPH_LABELS) + b" " * 70_000},
                         WHERE + r"graph_labels\.txt: 70,\d+ bytes, more than the 65,584 it "
                         r"can hold; refused"),
    "node label 10^12": ({"node_labels": lines([*NODE_LABELS[:6], 10**12, *NODE_LABELS[7:]])},
                         WHERE + r"node_labels\.txt line 7: node label 1000000000000 makes the "
                         r"one-hot encoding 999,999,999,999 columns wide \(labels "
                         r"2\.\.1000000000000\); at most 1,024 are accepted"),
    "node label -10^12": ({"node_labels": lines([-10**12, *NODE_LABELS[1:]])},
                          WHERE + r"node_labels\.txt line 1: node label -1000000000000"),
    "not ascii": ({"node_labels": lines(NODE_LABELS[:4]) + "\u00e9\n".encode()
                   + lines(NODE_LABELS[5:])},
                  WHERE + r"node_labels\.txt line 5: not ASCII text"),
}


def damaged_zip(case: dict) -> bytes:
    parts = {k: v for k, v in case.items() if k not in ("extra", "links")}
    return zip_bytes({**tiny_members(**parts), **case.get("extra", {})}, case.get("links", ()))


@pytest.mark.parametrize("name", DAMAGE)
def test_a_damaged_download_is_one_data_error_and_nothing_is_kept(name, tiny, serve_folder,
                                                                  tmp_path):
    root, mirror = tiny
    case, message = DAMAGE[name]
    put(mirror, damaged_zip(case))
    url, _ = serve_folder(mirror)
    with pytest.raises(DataError, match=message) as info:
        tu.load("tiny", url=url)
    assert not isinstance(info.value, InputFileError) and info.value.exit_code == 1
    assert "\n" not in str(info.value)
    assert kept(root) == []  # no archive, no checksum, no .npz
    assert not (tmp_path / "x").exists() and not (root / "x").exists()


def test_a_huge_node_label_leaves_nothing_and_a_good_mirror_then_works(tiny, serve_folder,
                                                                       cli):
    """A label of 10^12 once asked numpy for a (9, 10^12) one-hot (a MemoryError traceback)
    and left the zip in the cache unrecorded, so every later command failed the same way."""
    root, mirror = tiny
    put(mirror, damaged_zip(DAMAGE["node label 10^12"][0]))
    url, _ = serve_folder(mirror)
    one_line_error(cli("datasets", "download", "tiny", "--url", url), 1,
                   "TINY.zip:TINY/TINY_node_labels.txt line 7: node label 1000000000000")
    assert kept(root) == []
    put(mirror, zip_bytes(tiny_members()))  # the mirror is mended: the next command works
    assert cli("datasets", "download", "tiny", "--url", url).exit_code == 0
    assert tu.load("tiny", url=url).num_features == 3


def test_an_error_other_than_a_data_error_keeps_nothing_either(tiny, monkeypatch):
    _, mirror = tiny
    put(mirror, zip_bytes(tiny_members()))

    def exhausted(*args):
        raise MemoryError("no room")
    monkeypatch.setattr(tu, "read_archive", exhausted)
    with pytest.raises(MemoryError):
        tu.load("tiny", url=str(mirror))
    assert kept(tiny[0]) == []


def test_a_truncated_zip_is_refused(tiny, serve_folder):
    root, mirror = tiny
    data = zip_bytes(tiny_members())
    put(mirror, data[: len(data) // 2])
    url, _ = serve_folder(mirror)
    with pytest.raises(DataError, match=r"^TINY\.zip: not a readable zip archive"):
        tu.load("tiny", url=url)
    assert kept(root) == []


def test_too_many_members_are_refused(tiny):
    _, mirror = tiny
    put(mirror, zip_bytes({**tiny_members(), **{f"TINY/pad{i}": b"" for i in range(60)}}))
    with pytest.raises(DataError, match=r"^TINY\.zip: 65 members, more than the 64"):
        tu.load("tiny", url=str(mirror))


def test_the_users_own_folder_gives_exit_2_and_a_download_exit_1(tiny, serve_folder, cli):
    root, mirror = tiny
    put(mirror, damaged_zip(DAMAGE["cross-graph edge"][0]))
    result = cli("datasets", "download", "tiny", "--url", mirror)
    one_line_error(result, 2, "TINY.zip:TINY/TINY_A.txt line 6", "joins graph 1 to graph 2")
    url, _ = serve_folder(mirror)
    one_line_error(cli("datasets", "download", "tiny", "--url", url), 1, "line 6")
    assert kept(root) == []


# --- trust on first use -----------------------------------------------------------------------

def test_the_first_checksum_is_pinned(tiny, serve_folder):
    root, mirror = tiny
    put(mirror, zip_bytes(tiny_members()))
    url, log = serve_folder(mirror)
    first = tu.load("tiny", url=url)
    cached = root / "TINY/raw/TINY.zip"
    cached.write_bytes(cached.read_bytes()[:-1] + b"!")  # tampered cache: fetched again, healed
    assert np.array_equal(tu.load("tiny", url=url).y, first.y) and len(log) == 2
    put(mirror, zip_bytes(tiny_members(graph_labels=lines([1, -1, -1]))))  # server changed
    cached.write_bytes(b"tampered")
    with pytest.raises(ChecksumError, match=r"^TINY\.zip from .* has SHA-256 .*, expected "):
        tu.load("tiny", url=url)
    assert [p for p in kept(root) if p.startswith("raw/")] == ["raw/TINY.zip.sha256"]


def test_download_says_what_it_checked_and_info_shows_the_set(tiny, cli):
    _, mirror = tiny
    put(mirror, zip_bytes(tiny_members()))
    result = cli("datasets", "download", "tiny", "--url", mirror)
    assert result.exit_code == 0, result.output
    assert result.stdout.replace("\n", "").startswith("TINY: TINY.zip checked (SHA-256 ")
    assert result.stderr == "downloaded TINY.zip (727 bytes, verified)\n"  # a pipe: a line
    info = cli("datasets", "info", "tiny", "--url", mirror)
    assert info.exit_code == 0, info.output
    rows = dict(tuple(cell.strip() for cell in line.strip("│ ").split("│"))
                for line in info.output.splitlines() if line.count("│") == 3)
    assert rows == {"graphs": "3", "nodes": "9", "edges (directed)": "14",
                    "nodes per graph (mean/min/max)": "3.0 / 2 / 4",
                    "edges per graph (mean/min/max)": "4.7 / 2 / 6", "features": "3",
                    "edge features": "0", "classes": "2", "class balance": "0: 1 (33.3%)  1: 2 (66.7%)"}


# --- the catalog and the real archives -----------------------------------------------------------

def test_catalog_rows_agree_with_the_documented_facts():
    rows = {n: f for n, f in catalog.DATASETS.items() if f.source == "tu"}
    assert set(rows) == set(tu.DATASETS) == {"mutag", "nci1", "nci109", "proteins", "enzymes",
                                             "dd"}
    for name, facts in rows.items():
        spec = tu.DATASETS[name]
        assert facts.kind == "graphs" and facts.num_classes == spec.num_classes
        assert facts.title == spec.title
        assert facts.description.startswith(f"{spec.num_graphs:,} ")
        assert f"{spec.num_nodes:,} nodes" in facts.description
        assert f"{spec.num_classes} classes" in facts.description


REAL = {  # graphs, nodes, directed edges, features, class counts
    "mutag": (188, 3_371, 7_442, 7, [63, 125]),
    "nci1": (4_110, 122_747, 265_506, 37, [2_053, 2_057]),
    "nci109": (4_127, 122_494, 265_208, 38, [2_048, 2_079]),
}
REAL_SHA256 = {
    "MUTAG.zip": "66112bc67b33235364e6e75edbbcbd61294b865897e05988bb67ebea8cb5a517",
    "NCI1.zip": "7ba51bf6ef3cc830039d4161dc4684cdd747745bb9b87cdd9f4655a9eb58a42d",
    "NCI109.zip": "0532851b22653e69b2e2821de4c99f86267c9d8c6ff5df710ec32a75546efc15",
}


@pytest.mark.parametrize("name", REAL)
def test_the_real_archives(name, serve_folder, tmp_path):
    url, _ = serve_folder(require_real_tu())
    start = time.perf_counter()
    graphs = tu.load(name, root=tmp_path, url=url)
    print(f"{name}: downloaded and parsed in {time.perf_counter() - start:.2f} s")
    num_graphs, num_nodes, num_edges, num_features, counts = REAL[name]
    assert (graphs.num_graphs, graphs.num_nodes, graphs.num_edges) == (num_graphs, num_nodes,
                                                                      num_edges)
    assert graphs.num_features == num_features and graphs.class_counts().tolist() == counts
    assert (graphs.x.sum(axis=1) == 1).all()  # exactly one atom type per node
    archive = tu.archive_path(name, tmp_path)
    assert archive.with_name(archive.name + ".sha256").read_text().split()[0] == \
        REAL_SHA256[archive.name]


def test_mutag_raw_lines(serve_folder):
    """The facts of the module docstring, read from the file itself: 7,442 edge lines and
    125 graphs labelled 1, 63 labelled -1 (so class 0 is -1)."""
    with zipfile.ZipFile(require_real_tu() / "MUTAG.zip") as archive:
        edges = archive.read("MUTAG/MUTAG_A.txt").count(b"\n")
        labels = archive.read("MUTAG/MUTAG_graph_labels.txt").split()
    assert edges == 7_442 and (labels.count(b"1"), labels.count(b"-1")) == (125, 63)
