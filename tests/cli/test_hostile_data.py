"""Hostile data where the user meets it, `mgsparse train` and `mgsparse datasets`: one line
naming the file and the cause, exit 2 for the user's own files and 1 for a damaged download,
nothing written, no hang, no traceback."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from mgsparse.data.sources import ogb
from tests.conftest import REPO_ROOT, one_line_error
from tests.data.sources.test_ogb import csv_gz, tiny_members, zip_bytes

CONFIG = REPO_ROOT / "configs" / "csv-example.yaml"
EXAMPLE = REPO_ROOT / "configs" / "examples" / "two-communities"


@pytest.fixture
def example(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "ex")
    return tmp_path / "ex"


def drop_last_line(path):
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")


def write_bom(path):
    path.write_text("\ufeff" + path.read_text(), encoding="utf-8")


def damaged(write, *settings):
    """A damage: `write(folder)` changes the copied example, `settings` are --set KEY=VALUE
    with VALUE a file name in that folder (or null, random)."""
    return write, settings


HOSTILE = {  # damage, needles of the one error line
    "symlink loop": (damaged(lambda ex: os.symlink(ex / "loop", ex / "loop"),
                             "dataset.edges=loop"),
                     ["loop: cannot read it (Too many levels of symbolic links)"]),
    "fifo": (damaged(lambda ex: os.mkfifo(ex / "pipe"), "dataset.edges=pipe"),
             ["pipe: not a regular file (a pipe or a device?)"]),
    "features short": (damaged(lambda ex: drop_last_line(ex / "features.csv")),
                       ["features.csv: 59 feature rows, but", "labels.csv has 60 labels"]),
    "zero feature columns": (damaged(lambda ex: np.save(ex / "f.npy", np.zeros((60, 0))),
                                     "dataset.features=f.npy"), ["f.npy: 0 feature columns"]),
    "labels all -1": (damaged(lambda ex: (ex / "labels.csv").write_text("-1\n" * 60),
                              "dataset.split=random"), ["labels.csv: no node has a label"]),
    "no labels, random split": (damaged(lambda ex: None, "dataset.labels=null",
                                        "dataset.split=random"), ["dataset.labels is not set"]),
    "no labels, public split": (damaged(lambda ex: None, "dataset.labels=null"),
                                ["dataset.split public reads the labels",
                                 "dataset.labels is not set"]),
    "negative weight": (damaged(lambda ex: (ex / "edges.csv").write_text("0,6,1\n0,23,-2\n")),
                        ["edges.csv line 2: weight -2 is negative"]),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_train_on_hostile_csv_files_is_one_line_exit_2_nothing_written(cli, example, tmp_path,
                                                                       case):
    (write, settings), needles = HOSTILE[case]
    config = example.parent / "csv-example.yaml"
    config.write_text(CONFIG.read_text().replace("examples/two-communities/", "ex/"))
    write(example)
    extra = []
    for setting in settings:  # a file name in --set is read from the working folder
        key, value = setting.split("=")
        extra += ["--set", f"{key}={value if value in ('null', 'random') else example / value}"]
    out = tmp_path / "run"
    result = cli("train", config, "--epochs", 2, "--quiet", "--out", out, *extra)
    one_line_error(result, 2, *needles)
    assert not out.exists()


def test_train_accepts_excel_csv_with_a_byte_order_mark(cli, example, tmp_path):
    for name in ("edges.csv", "features.csv", "labels.csv", "train.csv", "val.csv", "test.csv"):
        write_bom(example / name)
    config = example.parent / "csv-example.yaml"
    config.write_text(CONFIG.read_text().replace("examples/two-communities/", "ex/"))
    result = cli("train", config, "--epochs", 2, "--quiet", "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "metrics.json").is_file()


@pytest.mark.parametrize("edges, summary", [
    ("0,0\n1,1\n2,2\n", "edges (directed)     │          0"),  # self loops only
    ("\ufeff0,1\n1,2\n", "edges (directed)     │          4"),  # a byte-order mark
])
def test_datasets_info_on_unusual_but_valid_edge_lists(cli, tmp_path, edges, summary):
    path = tmp_path / "e.csv"
    path.write_text(edges, encoding="utf-8")
    result = cli("datasets", "info", path)
    assert result.exit_code == 0, result.output
    assert summary in result.stdout


def test_datasets_info_on_a_folder_without_an_edge_list_is_a_usage_error(cli, tmp_path):
    one_line_error(cli("datasets", "info", tmp_path), 2, "no edges.csv")


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.symlink(p, p), "Too many levels of symbolic links"),  # not "unknown dataset"
    (lambda p: None, "No such file or directory"),
])
def test_datasets_info_on_a_broken_path_names_the_path(cli, tmp_path, make, needle):
    path = tmp_path / "graph.csv"
    make(path)
    one_line_error(cli("datasets", "info", path), 2, f"{path}: {needle}")


def test_datasets_info_on_a_pipe_is_refused_without_reading(cli, tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    one_line_error(cli("datasets", "info", tmp_path / "pipe.csv"), 2,
                   "pipe.csv: not a regular file")


def test_a_small_archive_is_not_accepted_as_ogbn_arxiv(cli, tmp_path, monkeypatch):
    """The tiny archive (6 nodes) in arxiv's layout: refused by its counts, nothing pinned, so
    the next download can still get the real one (exit 2: the archive came from the user's own
    folder, as a TU zip from one does; from a URL it is a damaged download, exit 1)."""
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "data"))
    names = ogb.DATASETS["ogbn-arxiv"].members()
    tiny = ogb.OgbSpec("ogbn-tiny", "tiny", "time", 6, 8, 3, 2, (2, 2, 2), directed=True)
    short = {name: key for key, name in tiny.members().items()}
    members = {names[short[name]]: data for name, data in tiny_members().items()
               if name in short}
    members[names["num-edge-list"]] = csv_gz([ogb.DATASETS["ogbn-arxiv"].num_edges])
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "arxiv.zip").write_bytes(zip_bytes(members))
    result = cli("datasets", "download", "ogbn-arxiv", "--url", mirror)
    one_line_error(result, 2, "arxiv.zip:arxiv/raw/num-node-list.csv.gz: 6 nodes, but the "
                              "dataset has 169,343")
    raw = tmp_path / "data" / "ogbn_arxiv" / "raw"
    assert not raw.exists() or list(raw.iterdir()) == []
