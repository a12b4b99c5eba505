"""Knowledge-graph triples: the real UMLS, Kinships and Nations served over loopback (counts,
checksums pinned on first use), a damaged download refused naming file and line with nothing
kept, and the user's own files: every kind of bad line refused in one line (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mgsparse.data import download as dl
from mgsparse.data import load_dataset
from mgsparse.data.sources import kg
from mgsparse.data.sources.kg_io import index_triples
from mgsparse.errors import ChecksumError, DataError, InputFileError
from tests.conftest import one_line_error
from tests.kgdata import require_real_kg as real_kg


@pytest.fixture
def kg_mirror(serve_folder, monkeypatch, tmp_path):
    url, log = serve_folder(real_kg())
    monkeypatch.setenv("MGSPARSE_KG_URL", url)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    return url, log, tmp_path / "cache"


def recorded(folder: Path) -> dict[str, str]:
    """split file -> the SHA-256 the shared folder's kg.sha256 lists for it."""
    rows = (line.split() for line in (folder / "kg.sha256").read_text().splitlines() if line)
    return {name: sha for sha, name in rows}


@pytest.mark.parametrize("name", ["umls", "kinships", "nations"])
def test_the_real_graphs_download_with_the_published_counts(kg_mirror, name):
    _, log, _ = kg_mirror
    t = load_dataset(name)
    spec = kg.DATASETS[name]
    assert (t.num_entities, t.num_relations) == (spec.num_entities, spec.num_relations)
    assert (len(t.train), len(t.valid), len(t.test)) == spec.sizes
    assert t.dropped == {} and t.notes == ()
    assert list(t.entities) == sorted(t.entities)  # ids in sorted name order
    assert t.train.dtype == np.int64 and t.train.shape[1] == 3
    assert t.train[:, 0].max() < t.num_entities and t.train[:, 1].max() < t.num_relations
    sums = recorded(real_kg())
    for split in ("train", "valid", "test"):
        path = kg.raw_path(name, split)
        assert dl.recorded_sha256(path) == sums[f"{name}/{split}.txt"]
    assert sorted(log) == sorted(f"/{name}/{s}.txt" for s in ("train", "valid", "test"))
    load_dataset(name)  # the cache: verified, nothing fetched again
    assert len(log) == 3


@pytest.mark.usefixtures("kg_mirror")
def test_a_cached_file_that_changed_is_refused(tmp_path):
    load_dataset("nations")
    pinned = kg.raw_path("nations", "test")
    mirror = tmp_path / "edited"
    shutil.copytree(real_kg() / "nations", mirror / "nations")
    (mirror / "nations" / "test.txt").write_bytes(b"brazil\tintergovorgs\tusa\n")
    pinned.write_bytes(b"tampered\n")
    with pytest.raises(ChecksumError):
        load_dataset("nations", url=str(mirror))


def _damaged_mirror(tmp_path: Path, split: str, text: bytes) -> Path:
    folder = tmp_path / "mirror"
    shutil.copytree(real_kg() / "umls", folder / "umls")
    (folder / "umls" / f"{split}.txt").write_bytes(text)
    return folder


def test_a_damaged_download_names_file_and_line_and_keeps_nothing(serve_folder, tmp_path,
                                                                 monkeypatch):
    real = (real_kg() / "umls" / "valid.txt").read_bytes().splitlines(keepends=True)
    bad = b"".join(real[:6]) + b"a\tb\tc\td\n" + b"".join(real[6:])
    url, _ = serve_folder(_damaged_mirror(tmp_path, "valid", bad))
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    with pytest.raises(DataError, match=r"umls/valid.txt:7: expected head<TAB>relation<TAB>"
                                        r"tail, got 4 fields") as err:
        load_dataset("umls", url=url)
    assert not isinstance(err.value, InputFileError)  # a remote host's: exit 1
    raw = kg.raw_path("umls", "train").parent
    assert not raw.exists() or list(raw.iterdir()) == []


def test_a_local_mirror_with_other_counts_is_the_users_to_fix(tmp_path, monkeypatch):
    real = (real_kg() / "umls" / "test.txt").read_bytes().splitlines(keepends=True)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "cache"))
    with pytest.raises(InputFileError, match=r"UMLS: the files do not match the published "
                                             r"splits: test 660 \(expected 661\)"):
        load_dataset("umls", url=str(_damaged_mirror(tmp_path, "test", b"".join(real[1:]))))
    assert not any(kg.raw_path("umls", "train").parent.glob("*"))


# --- parsing: what each bad line says -------------------------------------------------------

GOOD = {"train": b"a\tlikes\tb\nb\tlikes\tc\nc\thates\ta\n", "valid": b"a\tlikes\tc\n",
        "test": b"b\thates\ta\n"}
NAMES = {s: f"{s}.txt" for s in GOOD}


def parse(**override: bytes):
    return index_triples("tiny", GOOD | override, NAMES, InputFileError)


def test_a_tiny_graph_is_indexed_from_train_in_sorted_order():
    t = parse()
    assert t.entities == ("a", "b", "c") and t.relations == ("hates", "likes")
    assert t.train.tolist() == [[0, 1, 1], [1, 1, 2], [2, 0, 0]]
    assert t.valid.tolist() == [[0, 1, 2]] and t.test.tolist() == [[1, 0, 0]]


FIELDS = "expected head<TAB>relation<TAB>tail, got"
ONCE = "each triple must appear once across the splits"
BAD_LINES = [
    ("train", b"a\tlikes\tb\nb\tlikes\n", f"train.txt:2: {FIELDS} 2 fields"),
    ("valid", b"a\tlikes\tc\textra\n", f"valid.txt:1: {FIELDS} 4 fields"),
    ("test", b"b\t\ta\n", f"test.txt:1: {FIELDS} an empty field"),
    ("test", b"b\thates\ta\n\n\xff\tx\ty\n",
     "test.txt:3: not UTF-8 text (byte 0xff); names must be UTF-8"),
    ("valid", b"\n\n", "valid.txt: no triples (an empty split)"),
    ("train", b"a\tlikes\tb\nb\tlikes\tc\na\tlikes\tb\n",
     f"train.txt:3: duplicate triple (a, likes, b), already at train.txt:1; {ONCE}"),
    ("test", b"c\thates\ta\n",
     f"test.txt:1: duplicate triple (c, hates, a), already at train.txt:3; {ONCE}"),
]


@pytest.mark.parametrize("split, text, message", BAD_LINES)
def test_each_bad_line_is_named(split, text, message):
    with pytest.raises(InputFileError) as err:
        parse(**{split: text})
    assert str(err.value) == message


def test_unseen_entities_and_relations_are_dropped_and_counted():
    t = parse(test=b"b\thates\ta\nz\tlikes\ta\na\tloves\tb\n")
    assert t.test.tolist() == [[1, 0, 0]]
    assert t.dropped == {"test": 2}
    note = ("2 test triple(s) dropped: an entity or relation never seen in training (first: "
            "test.txt:2)")
    assert t.notes == (note,)
    with pytest.raises(InputFileError, match="valid.txt: no triple left"):
        parse(valid=b"z\tlikes\ta\n")


# --- your own files through the CLI -----------------------------------------------------------

def own_config(tmp_path: Path, **files: bytes) -> Path:
    for split, text in (GOOD | files).items():
        (tmp_path / f"{split}.txt").write_bytes(text)
    path = tmp_path / "own.yaml"
    path.write_text("dataset:\n  name: triples\n  train_triples: train.txt\n"
                    "  valid_triples: valid.txt\n  test_triples: test.txt\n"
                    "kg:\n  dim: 4\ntrain:\n  epochs: 2\nmonitor:\n  memory: false\n")
    return path


def test_own_triples_train_and_a_bad_line_exits_2_in_one_line(cli, tmp_path):
    result = cli("train", own_config(tmp_path), "-q")
    assert result.exit_code == 0, result.output
    assert "test MRR" in result.output
    bad = tmp_path / "bad"
    bad.mkdir()
    result = cli("train", own_config(bad, valid=b"a\tlikes\n"), "-q")
    one_line_error(result, 2, "valid.txt:1: expected head<TAB>relation<TAB>tail, got 2 fields")
