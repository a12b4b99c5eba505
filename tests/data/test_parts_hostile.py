"""A damaged or edited partition is one line naming the file (DataError, exit 1), before any
array is allocated or indexed with; and a manifest says what it was made from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.data import partition as P
from mgsparse.data import synthetic
from mgsparse.errors import DataError
from tests.data.test_partition import gcn_adjacency

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph():
    return synthetic.sbm(300, num_classes=3, avg_degree=6, num_features=16, seed=1)


@pytest.fixture
def root(graph, tmp_path):
    """Two contiguous parts of 150 nodes each."""
    P.write_partitions(graph, gcn_adjacency(graph), 2, tmp_path, method="contiguous")
    return tmp_path


def edit_json(path: Path, change) -> None:
    value = json.loads(path.read_text())
    path.write_text(json.dumps(change(value)))


def edit_npz(path: Path, **changes) -> None:
    with np.load(path) as z:
        arrays = dict(z)
    for key, change in changes.items():
        arrays[key] = change(arrays[key])
    np.savez(path, **arrays)


def manifest(root: Path, **values) -> None:
    edit_json(root / P.MANIFEST, lambda m: {**m, **values})


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])


def shift_recv_onto_own(root: Path) -> None:
    """Received rows written over owned ones: positions in range and increasing, but not
    the halo's."""
    part = P.load_part(root, 0)
    edit_npz(root / "part-000" / "recv.npz", pos=lambda pos: part.own_pos[:pos.size])


CASES = {
    "manifest a list": (lambda r: (r / P.MANIFEST).write_text("[1, 2]"),
                        (r"manifest\.json: not a partition file \(a JSON object expected, got "
                        r"list\)")),
    "older format": (lambda r: manifest(r, format=1),
                     r"manifest\.json: partition format 1, this mgsparse reads 2"),
    "30 GiB of first layer": (lambda r: manifest(r, num_features=500_000_000),
                              (r"manifest\.json: num_features must be an integer in "
                              r"\[1, 16777216\], got 500000000")),
    "features the files lack": (lambda r: manifest(r, num_features=1_000_000,
                                                   graph={"num_nodes": 300,
                                                          "num_features": 1_000_000,
                                                          "num_classes": 3}),
                                (r"part-000/x\.npz: shape \[150, 16\], expected "
                                r"\[150, 1000000\]")),
    "counts that do not add up": (lambda r: manifest(r, nodes_per_part=[150, 151]),
                                  r"manifest\.json: nodes_per_part does not sum to num_nodes"),
    "a node moved in the manifest only": (lambda r: manifest(r, nodes_per_part=[151, 149]),
                                          (r"part-000/nodes\.npy: holds int64 \(150,\), "
                                          r"expected \(151,\)")),
    "a bool as a count": (lambda r: manifest(r, num_parts=True),
                          (r"manifest\.json: num_parts must be an integer in \[1, 65536\], "
                          r"got true")),
    "fewer classes": (lambda r: manifest(r, num_classes=2, graph={"num_nodes": 300,
                                                                   "num_features": 16,
                                                                   "num_classes": 2}),
                      r"part-000/y\.npy: labels outside \[-1, 2\)"),
    "part.json a list": (lambda r: (r / "part-001" / "part.json").write_text("[]"),
                         r"part-000/part\.json: not a partition file"),
    "adjacency not a zip": (lambda r: (r / "part-000" / "adj.npz").write_bytes(b"PK\3\4junk"),
                            r"part-000/adj\.npz: not an \.npz archive \(BadZipFile"),
    "adjacency truncated": (lambda r: truncate(r / "part-000" / "adj.npz"),
                            r"part-000/adj\.npz: not an \.npz archive"),
    "nodes truncated": (lambda r: truncate(r / "part-000" / "nodes.npy"),
                        r"part-000/nodes\.npy: truncated \(\d+ bytes for int64 \(150,\)\)"),
    "labels as floats": (lambda r: np.save(r / "part-000" / "y.npy", np.zeros(150)),
                         (r"part-000/y\.npy: holds float64 \(150,\), expected \(150,\) of kind "
                         r"'i'")),
    "send index out of range": (lambda r: edit_npz(r / "part-000" / "send.npz",
                                                   idx=lambda i: i + 10_000),
                                (r"part-000/send\.npz: idx must increase within each peer and "
                                r"lie in \[0, 150\)")),
    "send counts off": (lambda r: edit_npz(r / "part-000" / "send.npz",
                                           counts=lambda c: c + np.array([0, 1])),
                        r"part-000/send\.npz: counts must be 2 non-negative numbers summing"),
    "received rows over owned ones": (shift_recv_onto_own,
                                      r"part-000/recv\.npz: pos must be the halo positions"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_part_is_one_line_naming_the_file(root, case):
    damage, message = CASES[case]
    damage(root)
    part = 1 if "part.json" in case else 0
    with pytest.raises(DataError) as info:
        P.load_part(root, part)
    text = str(info.value).replace("\\", "/")
    assert re.search(message.replace("part-000/part", "part-001/part"), text), text
    assert info.value.exit_code == 1 and "\n" not in text
    assert text.endswith("run `mgsparse partition` again")


def test_the_intact_partition_loads(root):
    """Negative control: the fixture itself passes every check."""
    parts = [P.load_part(root, p) for p in range(2)]
    assert [p.nodes.size for p in parts] == [150, 150]
    assert sum(p.adj.nnz for p in parts) == json.loads((root / P.MANIFEST).read_text())[
        "graph"]["num_edges"] + 300  # edges and self loops


# ---------------------------------------------------------------- what it was made from


def section(*sets: str):
    return load_config(REPO / "configs" / "synthetic.yaml", list(sets)).dataset


def test_dataset_identity_is_the_keys_that_decide_the_graph():
    base = P.dataset_identity(section())
    assert base["section"]["name"] == "synthetic" and len(base["fingerprint"]) == 16
    assert "root" not in base["section"] and "url" not in base["section"]
    assert P.dataset_identity(section("dataset.root=/elsewhere")) == base
    assert P.dataset_identity(section("dataset.num_nodes=999"))["fingerprint"] != \
        base["fingerprint"]
    csv = P.dataset_identity(load_config(REPO / "configs" / "csv-example.yaml").dataset)
    assert csv["section"]["name"] == "csv" and csv["section"]["edges"].endswith("edges.csv")


def test_graph_fingerprint_sees_one_edge_and_one_feature(graph):
    base = P.graph_fingerprint(graph)
    assert base["num_nodes"] == 300 and base["num_edges"] == graph.num_edges
    assert P.graph_fingerprint(graph) == base
    edges = graph.edge_index.copy()
    edges[1, 0] = (edges[1, 0] + 1) % 300
    moved = synthetic.Graph(**{**graph.__dict__, "edge_index": edges})
    x = graph.x.copy()
    x.data[0] += 1
    other = synthetic.Graph(**{**graph.__dict__, "x": x})
    assert len({base["sha256"], P.graph_fingerprint(moved)["sha256"],
                P.graph_fingerprint(other)["sha256"]}) == 3


def test_the_manifest_records_both(graph, tmp_path):
    made_from = P.dataset_identity(section())
    m = P.write_partitions(graph, gcn_adjacency(graph), 2, tmp_path, made_from=made_from)
    assert m["dataset"] == made_from and m["graph"] == P.graph_fingerprint(graph)
    assert P.read_manifest(tmp_path) == m
