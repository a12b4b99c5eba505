"""The partition step: disjoint balanced parts, local Â rows, exchange lists that rebuild
Â·H without MPI, the manifest's figures, atomic files, and a loader that reads one part."""

from __future__ import annotations

import builtins
import json
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data import partition as P
from mgsparse.data import synthetic
from mgsparse.errors import ConfigError, DataError


def gcn_adjacency(graph) -> sp.csr_matrix:
    """D^-1/2 (A + I) D^-1/2 with scipy alone: the oracle the parts are checked against."""
    n = graph.num_nodes
    a = sp.csr_matrix((np.ones(graph.num_edges), tuple(graph.edge_index)), shape=(n, n))
    a = a + sp.identity(n, format="csr")
    d = sp.diags(1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel()))
    return (d @ a @ d).astype(np.float32).tocsr()


@pytest.fixture(scope="module")
def graph():
    return synthetic.sbm(1200, num_classes=4, avg_degree=8, num_features=32, seed=3)


@pytest.fixture(scope="module")
def adjacency(graph):
    return gcn_adjacency(graph)


@pytest.fixture(params=["metis", "contiguous"])
def parted(request, graph, adjacency, tmp_path):
    if request.param == "metis":
        pytest.importorskip("pymetis")
    manifest = P.write_partitions(graph, adjacency, 3, tmp_path, method=request.param,
                                  widths=[16, 4])
    return tmp_path, manifest, [P.load_part(tmp_path, p) for p in range(3)]


def test_parts_are_disjoint_cover_and_balanced(parted, graph):
    _, manifest, parts = parted
    nodes = np.concatenate([p.nodes for p in parts])
    assert np.array_equal(np.sort(nodes), np.arange(graph.num_nodes))
    assert max(manifest["nodes_per_part"]) <= 1.05 * graph.num_nodes / 3
    assert manifest["nodes_per_part"] == [p.nodes.size for p in parts]


def test_local_rows_of_adjacency_and_part_data(parted, graph, adjacency):
    _, _, parts = parted
    for part in parts:
        assert abs(adjacency[part.nodes][:, part.ext] - part.adj).max() == 0
        assert adjacency[part.nodes].nnz == part.adj.nnz  # no column of a row was lost
        assert abs(graph.x[part.nodes] - part.x).max() == 0
        assert np.array_equal(part.y, graph.y[part.nodes])
        assert np.array_equal(part.test_mask, graph.test_mask[part.nodes])
        assert np.array_equal(part.ext[part.own_pos], part.nodes)


def test_exchange_lists_rebuild_the_full_product(parted, graph, adjacency):
    """Simulate the Alltoallv with the files' lists: every part's Â_p · H[ext] must be the
    rows it owns of Â·H."""
    _, _, parts = parted
    h = np.random.default_rng(0).standard_normal((graph.num_nodes, 5))
    offsets = [np.concatenate([[0], np.cumsum(p.send_counts)]) for p in parts]
    for q, part in enumerate(parts):
        ext = np.full((part.ext.size, 5), np.nan)
        ext[part.own_pos] = h[part.nodes]
        received = [parts[s].nodes[parts[s].send_idx[offsets[s][q]:offsets[s][q + 1]]]
                    for s in range(len(parts))]
        ext[part.recv_pos] = h[np.concatenate(received)]
        assert np.allclose(part.adj @ ext, (adjacency @ h)[part.nodes], atol=1e-6)


def test_manifest_figures(parted, adjacency):
    root, manifest, parts = parted
    coo = adjacency.tocoo()
    owner = np.empty(adjacency.shape[0], dtype=np.int64)
    for p, part in enumerate(parts):
        owner[part.nodes] = p
    assert manifest["cut_entries"] == np.count_nonzero(owner[coo.row] != owner[coo.col])
    halos = [p.ext.size - p.nodes.size for p in parts]
    assert manifest["halo_per_part"] == halos
    assert sum(halos) == sum(int(p.send_counts.sum()) for p in parts)
    assert manifest["bytes_per_epoch"] == sum(halos) * 4 * 3 * (16 + 4)
    assert json.loads((root / P.MANIFEST).read_text()) == manifest
    assert not list(root.rglob("*.tmp"))


def test_metis_cuts_fewer_edges_than_contiguous(graph, adjacency, tmp_path):
    pytest.importorskip("pymetis")
    metis = P.write_partitions(graph, adjacency, 4, tmp_path / "m", method="metis")
    blocks = P.write_partitions(graph, adjacency, 4, tmp_path / "c", method="contiguous")
    assert metis["method"] == "metis" and blocks["method"] == "contiguous"
    assert metis["cut_entries"] < 0.8 * blocks["cut_entries"]


def test_contiguous_fallback_without_pymetis(graph, adjacency, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # import pymetis -> ImportError
    manifest = P.write_partitions(graph, adjacency, 2, tmp_path)
    assert manifest["method"] == "contiguous"
    assert np.array_equal(P.load_part(tmp_path, 0).nodes, np.arange(600))


def test_one_part_has_no_halo(graph, adjacency, tmp_path):
    manifest = P.write_partitions(graph, adjacency, 1, tmp_path, widths=[16, 4])
    assert manifest["halo_per_part"] == [0] and manifest["bytes_per_epoch"] == 0


@pytest.mark.parametrize("parts", [0, 1201])
def test_bad_part_count_is_a_usage_error(graph, adjacency, tmp_path, parts):
    """--parts above the node count is the user's option, not damaged data: exit 2."""
    with pytest.raises(ConfigError, match=rf"--parts must be in \[1, 1200\] \(the graph has "
                                          rf"1200 nodes\), got {parts}") as info:
        P.write_partitions(graph, adjacency, parts, tmp_path)
    assert info.value.exit_code == 2


# ---------------------------------------------------------------- the loader


class OpenedFiles:
    """Records every file the process opens while active (an audit hook sees `open` from
    builtins, io and numpy alike; hooks cannot be removed, so one stays installed)."""

    paths: ClassVar[list[str]] = []
    active = False

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if cls.active and event == "open" and isinstance(args[0], (str, bytes, Path)):
            cls.paths.append(str(args[0]))


sys.addaudithook(OpenedFiles.hook)


def test_a_rank_opens_only_its_own_part(parted):
    root, _, _ = parted
    OpenedFiles.paths, OpenedFiles.active = [], True
    try:
        part = P.load_part(root, 1)
    finally:
        OpenedFiles.active = False
    opened = {Path(p).resolve() for p in OpenedFiles.paths}
    assert part.part == 1 and part.nodes.size > 0
    assert (root / P.MANIFEST).resolve() in opened
    assert (root / "part-001" / "adj.npz").resolve() in opened
    outside = {p for p in opened if P.part_dir(root, 1).resolve() not in p.parents}
    assert outside == {(root / P.MANIFEST).resolve()}


def test_the_audit_hook_sees_numpy_and_pathlib_opens(tmp_path):
    """Negative control: the recorder does see the opens the loader makes."""
    np.save(tmp_path / "a.npy", np.zeros(2))
    OpenedFiles.paths, OpenedFiles.active = [], True
    try:
        np.load(tmp_path / "a.npy")
        (tmp_path / "a.npy").read_bytes()
        with builtins.open(tmp_path / "a.npy", "rb"), open(tmp_path / "a.npy", "rb"):
            pass
    finally:
        OpenedFiles.active = False
    assert len([p for p in OpenedFiles.paths if p.endswith("a.npy")]) == 4


def test_loader_refuses_unfinished_or_mixed_partitions(parted, graph, adjacency, tmp_path):
    root, _, _ = parted
    other = tmp_path / "other"
    P.write_partitions(graph, adjacency, 3, other, method="contiguous")
    (root / "part-002").rename(tmp_path / "keep")
    (other / "part-002").rename(root / "part-002")
    with pytest.raises(DataError, match="part-002: written by another partition run"):
        P.load_part(root, 2)
    with pytest.raises(DataError, match="no part 3 \\(the partition has 3\\)"):
        P.load_part(root, 3)
    (root / P.MANIFEST).unlink()
    with pytest.raises(DataError, match="not a finished partition"):
        P.load_part(root, 0)


def test_a_directed_adjacency_is_split_by_its_rows(graph, tmp_path):
    """Row i of Â holds i's incoming edges (messages source → target): a part owns rows and
    its halo is the sources outside it, whatever the pattern's symmetry."""
    rng = np.random.default_rng(1)
    n = graph.num_nodes
    directed = sp.random(n, n, density=0.004, random_state=rng, format="csr",
                         dtype=np.float32) + sp.identity(n, dtype=np.float32, format="csr")
    assert (directed != directed.T).nnz > 0
    P.write_partitions(graph, directed, 3, tmp_path, method="contiguous")
    h = rng.standard_normal((n, 3))
    for p in range(3):
        part = P.load_part(tmp_path, p)
        assert np.allclose(part.adj @ h[part.ext], (directed @ h)[part.nodes], atol=1e-5)
        assert set(part.ext) == set(part.nodes) | set(directed[part.nodes].indices)


def test_a_crafted_part_adjacency_is_one_line_naming_the_file(graph, adjacency, tmp_path):
    """A column index of 10^7 in a part's adjacency used to load, then crash the interpreter
    in the first SpMM; a damaged part is a runtime error (exit 1) naming the file."""
    P.write_partitions(graph, adjacency, 2, tmp_path, method="contiguous")
    path = P.part_dir(tmp_path, 1) / "adj.npz"
    with np.load(path) as z:
        arrays = dict(z)
    good = arrays["indices"].copy()
    arrays["indices"][5] = 10**7
    np.savez(path, **arrays)
    with pytest.raises(DataError, match=r"part-001/adj\.npz: column index holds 10000000, "
                                        r"outside \[0, \d+\)") as info:
        P.load_part(tmp_path, 1)
    assert info.value.exit_code == 1 and "\n" not in str(info.value)
    arrays["indices"] = good
    arrays["indptr"][3] = arrays["indptr"][4] + 1  # indptr[4] < indptr[3]
    np.savez(path, **arrays)
    with pytest.raises(DataError, match=r"adj\.npz: indptr decreases after entry 3"):
        P.load_part(tmp_path, 1)
    del arrays["data"]
    np.savez(path, **arrays)
    with pytest.raises(DataError, match=r"adj\.npz: no array 'data'"):
        P.load_part(tmp_path, 1)
