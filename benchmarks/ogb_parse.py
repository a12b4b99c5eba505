"""Time and peak memory of parsing an OGB node-property archive, on a synthetic one of the
real size (the real files cannot be fetched here).

Builds ``arxiv.zip`` in the documented layout with ogbn-arxiv's counts (or a fraction of
ogbn-products' with ``--products --scale 0.1``): random edges, 6-decimal float features,
random labels and a random split. Then times `ogb.read_archive` (gunzip + numpy parse + every
check) and the symmetrisation `process` adds, once without tracing, and reports the peak
traced memory of a second, traced run (numpy reports its buffers to tracemalloc).

    python benchmarks/ogb_parse.py [--products] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import gzip
import io
import tempfile
import time
import tracemalloc
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from mgsparse.data.graph import undirected_edges
from mgsparse.data.sources import ogb


def csv_gz(array: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=1) as f:
        np.savetxt(f, array, fmt=fmt, delimiter=",")
    return buffer.getvalue()


def scaled(spec: ogb.OgbSpec, scale: float) -> ogb.OgbSpec:
    n = int(spec.num_nodes * scale)
    train, val = int(spec.split_sizes[0] * scale), int(spec.split_sizes[1] * scale)
    return replace(spec, num_nodes=n, num_edges=int(spec.num_edges * scale),
                   split_sizes=(train, val, n - train - val))


def build(spec: ogb.OgbSpec, folder: Path) -> Path:
    rng = np.random.default_rng(0)
    n, names = spec.num_nodes, spec.members()
    order = rng.permutation(n)
    cut = np.cumsum(spec.split_sizes)[:2]
    files = {
        "edge": csv_gz(rng.integers(0, n, (spec.num_edges, 2)), "%d"),
        "node-feat": csv_gz(rng.standard_normal((n, spec.num_features)), "%.6f"),
        "node-label": csv_gz(rng.integers(0, spec.num_classes, n), "%d"),
        "num-node-list": csv_gz(np.array([n]), "%d"),
        "num-edge-list": csv_gz(np.array([spec.num_edges]), "%d"),
        **{k: csv_gz(part, "%d") for k, part in zip(ogb.SPLIT_FILES, np.split(order, cut))},
    }
    path = folder / f"{spec.download_name}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for key, data in files.items():
            archive.writestr(names[key], data)
    return path


def parse(path: Path, spec: ogb.OgbSpec):
    graph = ogb.read_archive(path, spec)
    row, col = graph.edge_index
    return graph, undirected_edges(row, col, graph.num_nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    spec = scaled(ogb.DATASETS["ogbn-products" if args.products else "ogbn-arxiv"], args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = build(spec, Path(tmp))
        print(f"{spec.name} x{args.scale}: {spec.num_nodes:,} nodes, {spec.num_edges:,} edge "
              f"rows, {spec.num_features} features; archive {path.stat().st_size / 2**20:.1f} "
              f"MB built in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        ogb.check_archive(path, spec)
        print(f"check_archive (CRC-32 of every member): {time.perf_counter() - start:.2f} s")
        start = time.perf_counter()
        graph, edges = parse(path, spec)
        print(f"parse + symmetrise: {time.perf_counter() - start:.2f} s "
              f"({edges.shape[1]:,} directed edges)")
        del graph, edges
        tracemalloc.start()
        parse(path, spec)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"peak traced memory: {peak / 2**20:.0f} MB")


if __name__ == "__main__":
    main()
