"""The OGB node-property datasets ogbn-arxiv and ogbn-products: download -> check -> parse -> cache.

Facts from the OGB documentation (Hu et al., NeurIPS 2020), checked on every parse:

=============  =========  ==========  ========  =======  ====================================
name           nodes      edge rows   features  classes  train/valid/test (split folder)
=============  =========  ==========  ========  =======  ====================================
ogbn-arxiv     169,343    1,166,243   128       40       90,941/29,799/48,603 (time)
ogbn-products  2,449,029  61,859,140  100       47       196,615/39,323/2,213,091 (sales_ranking)
=============  =========  ==========  ========  =======  ====================================

The archive ``<download name>.zip`` (``arxiv.zip``, ``products.zip`` under OGB's
``/ogb/data/nodeproppred/``) holds one folder of that name; we read these members of it::

    arxiv/raw/edge.csv.gz            E rows "source,target", node ids from 0
    arxiv/raw/node-feat.csv.gz       N rows of F comma-separated floats
    arxiv/raw/node-label.csv.gz      N rows, one class id each
    arxiv/raw/num-node-list.csv.gz   one row: N
    arxiv/raw/num-edge-list.csv.gz   one row: E
    arxiv/split/time/train.csv.gz    one node id per row (and valid.csv.gz, test.csv.gz)

and ignore the others (``node_year``, ``mapping/``, ``RELEASE_v1.txt``).

Edges. arxiv's file lists directed citations (OGB's ``add_inverse_edge=False``); products lists
each co-purchase pair once and OGB adds the reverse. By default both become the canonical
undirected form (both directions, no self loops, no duplicates): OGB's GCN baseline trains
arxiv that way (``adj_t.to_symmetric()``) and GCN's symmetric normalisation assumes it.
``directed=True`` keeps arxiv's edges as written (source cites target); products has no
direction to keep and refuses it.

Checksums. OGB publishes none, so we trust on first use: the first archive is checked as a zip
(every member's CRC-32, the members above) and parsed against the documented facts above (its
parse is cached) before its SHA-256 is written beside it in ``<archive>.sha256``; from then on
the cached archive, and any new download, must match that record. An archive that fails any
check is deleted unrecorded, so the next try (another mirror) starts afresh. A zip copied by
hand into ``<root>/ogbn_arxiv/raw/`` is checked and recorded the same way (offline install).

Bounds. Nothing in an archive is read past what the facts allow: a member whose declared size
passes `MAX_EXPANSION` times the download cap is refused before its CRC is checked, and each
CSV is read as a stream of at most its documented rows + 1, and at most
`ogb_io.MAX_FIELD_CHARS` characters per field, so a gzip bomb stops after a bounded read instead of filling memory. Source: the ``url`` argument (config ``dataset.url``), else
``MGSPARSE_OGB_URL``, else OGB's server; a URL or a local folder holding the zip.

Cost, measured by ``benchmarks/ogb_parse.py`` on synthetic archives of the documented sizes
(the real files cannot be fetched here): arxiv parses and symmetrises in 16 s with a peak of
175 MB traced memory; a tenth of products in 18 s and 574 MB, so the whole of products needs
about 3 minutes and 6 GB once (then the ``.npz`` cache): it fits in 24 GB.
"""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mgsparse.data import download as dl
from mgsparse.data.cache import cached_graph, folder_status, resolve_root
from mgsparse.data.download import recorded_sha256, source_of
from mgsparse.data.graph import Graph, undirected_edges
from mgsparse.data.sources import Source, check_split, finish, unknown_dataset
from mgsparse.data.sources.ogb_io import TooLarge, check_declared_sizes, read_csv_gz
from mgsparse.data.transforms import index_to_mask
from mgsparse.errors import ConfigError, DataError, InputFileError

DEFAULT_URL = "https://snap.stanford.edu/ogb/data/nodeproppred/"
URL_ENV = "MGSPARSE_OGB_URL"
PROCESSED_VERSION = "1"  # bump when the processing changes, to invalidate cached .npz files
FETCH_OPTIONS = {"timeout": (10.0, 60.0), "retries": 3, "backoff": 1.0}  # see download.fetch
MIRROR_HINT = (f"to use a mirror, set {URL_ENV} (or the config key dataset.url) to a URL or a "
               "folder holding the zip, or copy the zip into the raw folder")
RAW_FILES = ("edge", "node-feat", "node-label", "num-node-list", "num-edge-list")
# OGB's members are .csv.gz, which deflate cannot shrink: their unzipped sizes sum to about the
# archive's. A member declaring more than this times the download cap is a zip bomb.
MAX_EXPANSION = 4
SPLIT_FILES = ("train", "valid", "test")


@dataclass(frozen=True)
class OgbSpec:
    """What the OGB documentation says of one dataset; a parse that disagrees is refused."""

    name: str
    download_name: str  # the zip's name and its top folder
    split: str  # the folder under split/ holding the official split
    num_nodes: int
    num_edges: int  # rows of raw/edge.csv.gz
    num_features: int
    num_classes: int
    split_sizes: tuple[int, int, int]  # train, valid, test
    directed: bool  # whether edge.csv.gz lists directed edges
    max_bytes: int = 1 << 30  # a download larger than this is stopped (a wrong mirror)

    def members(self) -> dict[str, str]:
        """The archive members we read, by short name ("edge", ..., "train", ...)."""
        top = self.download_name
        names = {f: f"{top}/raw/{f}.csv.gz" for f in RAW_FILES}
        names.update({f: f"{top}/split/{self.split}/{f}.csv.gz" for f in SPLIT_FILES})
        return names


DATASETS: dict[str, OgbSpec] = {s.name: s for s in (
    OgbSpec("ogbn-arxiv", "arxiv", "time", 169_343, 1_166_243, 128, 40,
            (90_941, 29_799, 48_603), directed=True, max_bytes=256 << 20),  # zip: ~81 MB
    OgbSpec("ogbn-products", "products", "sales_ranking", 2_449_029, 61_859_140, 100, 47,
            (196_615, 39_323, 2_213_091), directed=False, max_bytes=4 << 30),  # ~1.4 GB
)}


# --- where things are ------------------------------------------------------------------------

def check_name(name: str) -> OgbSpec:
    spec = DATASETS.get(str(name).lower())
    if spec is None:
        raise unknown_dataset(name, DATASETS, "OGB dataset")
    return spec


def resolve_url(url: str | None = None) -> str:
    """Explicit argument > ``MGSPARSE_OGB_URL`` > OGB's server."""
    return dl.resolve_url(url, URL_ENV, DEFAULT_URL)


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    return resolve_root(root) / check_name(name).name.replace("-", "_")


def archive_path(name: str, root: str | Path | None = None) -> Path:
    return dataset_dir(name, root) / "raw" / f"{check_name(name).download_name}.zip"


# --- download: trust on first use -------------------------------------------------------------

def download(name: str, root: str | Path | None = None, url: str | None = None,
             progress: dl.Progress | None = None, directed: bool = False) -> Path:
    """Make ``<root>/<name>/raw/<download name>.zip`` a checked archive; return its path.

    A first archive is trusted only once it parses with the documented counts: its parse is
    cached (``directed`` or not) and only then is its SHA-256 recorded."""
    spec = check_name(name)
    check_directed(spec, directed)
    dest = archive_path(spec.name, root)
    base = resolve_url(url)
    source = source_of(base, dest.name)
    recorded = recorded_sha256(dest)
    with dl.mirror_hint(MIRROR_HINT, url, URL_ENV):
        if recorded is not None:  # the cache, or a fresh download, must be the first archive
            return dl.fetch(source, dest, recorded, progress=progress,
                            max_bytes=spec.max_bytes, **FETCH_OPTIONS)
        if not dest.is_file():
            dl.fetch_unpinned(source, dest, spec.max_bytes, progress, **FETCH_OPTIONS)
    try:
        check_archive(dest, spec)
        processed_graph(spec, root, directed, dest, dl.sha256_file(dest))
    except DataError as exc:
        dest.unlink(missing_ok=True)  # never keep, and never trust, a damaged first archive
        if dl.is_remote(base):
            raise
        raise InputFileError(str(exc)) from None  # the user's own folder: theirs to fix
    dl.record_sha256(dest)
    return dest


def check_archive(path: Path, spec: OgbSpec) -> None:
    """The zip opens, every member's CRC-32 matches, the documented members are all there."""
    try:
        with zipfile.ZipFile(path) as archive:
            check_declared_sizes(archive, MAX_EXPANSION * spec.max_bytes)
            damaged = archive.testzip()
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as exc:
        raise DataError(f"{path.name}: not a readable zip archive ({exc})") from None
    except TooLarge as exc:
        raise DataError(f"{path.name}: member {exc} (a zip bomb?)") from None
    if damaged is not None:
        raise DataError(f"{path.name}: member {damaged} is damaged (CRC-32 mismatch)")
    missing = [m for m in spec.members().values() if m not in names]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(f"{path.name}: not the documented OGB layout: {missing[0]} is "
                        f"missing{more}")


# --- parse ---------------------------------------------------------------------------------------

def read_archive(path: Path, spec: OgbSpec) -> Graph:
    """Parse a checked archive: edges as the file lists them, the official split as masks.

    Every count is checked twice: against the archive's own num-*-list files and against
    the documented facts in ``spec``.
    """
    names = spec.members()

    def where(key: str) -> str:
        return f"{path.name}:{names[key]}"

    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{path.name}: not a readable zip archive ({exc})") from None
    with archive:
        def read(key, dtype, width, rows, limit=None):
            return read_csv_gz(archive, names[key], dtype, width, rows, where(key), limit)

        num_nodes = _count(read("num-node-list", np.int64, 1, 1), spec.num_nodes, where,
                           "num-node-list", "nodes")
        num_edges = _count(read("num-edge-list", np.int64, 1, 1), spec.num_edges, where,
                           "num-edge-list", "edges")
        edges = read("edge", np.int64, 2, num_edges)
        x = read("node-feat", np.float32, spec.num_features, num_nodes)
        y = read("node-label", np.float64, 1, num_nodes)[:, 0]
        parts = [read(key, np.int64, 1, None, size)[:, 0]
                 for key, size in zip(SPLIT_FILES, spec.split_sizes, strict=True)]
    _check_ids(edges, num_nodes, where("edge"), "node id")
    masks = _split_masks(parts, num_nodes, spec, where)
    return Graph(x=x, y=_labels(y, spec.num_classes, where("node-label")),
                 edge_index=np.ascontiguousarray(edges.T), num_nodes=num_nodes,
                 num_classes=spec.num_classes, train_mask=masks[0], val_mask=masks[1],
                 test_mask=masks[2], name=spec.name)


def _count(table: np.ndarray, documented: int, where, key: str, what: str) -> int:
    value = int(table[0, 0])
    if value != documented:
        raise DataError(f"{where(key)}: {value:,} {what}, but the dataset has {documented:,}")
    return value


def _check_ids(ids: np.ndarray, num_nodes: int, where: str, what: str) -> None:
    bad = np.flatnonzero(((ids < 0) | (ids >= num_nodes)).reshape(ids.shape[0], -1).any(axis=1))
    if bad.size:
        raise DataError(f"{where} line {bad[0] + 1}: {what} {ids[bad[0]].tolist()} out of "
                        f"range [0, {num_nodes:,})")


def _labels(y: np.ndarray, num_classes: int, where: str) -> np.ndarray:
    bad = np.flatnonzero((y != np.round(y)) | (y < 0) | (y >= num_classes) | ~np.isfinite(y))
    if bad.size:
        raise DataError(f"{where} line {bad[0] + 1}: label {y[bad[0]]:g} is not a class "
                        f"id in [0, {num_classes})")
    return y.astype(np.int64)


def _split_masks(parts: list[np.ndarray], num_nodes: int, spec: OgbSpec, where):
    """Train/valid/test masks; each file has its documented size, no node twice, none shared."""
    masks, taken = [], np.zeros(num_nodes, dtype=bool)
    for key, index, documented in zip(SPLIT_FILES, parts, spec.split_sizes, strict=True):
        if index.size != documented:
            raise DataError(f"{where(key)}: {index.size:,} nodes, but the official split "
                            f"has {documented:,}")
        _check_ids(index, num_nodes, where(key), "node id")
        mask = index_to_mask(index, num_nodes)
        if int(mask.sum()) != index.size:
            raise DataError(f"{where(key)}: lists a node more than once")
        shared = np.flatnonzero(mask & taken)
        if shared.size:
            raise DataError(f"{where(key)}: node {shared[0]} is also in an earlier split file")
        taken |= mask
        masks.append(mask)
    return masks


# --- process and cache ---------------------------------------------------------------------------

def processed_path(name: str, root: str | Path | None, directed: bool, sha256: str) -> Path:
    spec = check_name(name)
    mode = "directed" if directed else "undirected"
    key = hashlib.sha256(f"{PROCESSED_VERSION}:{mode}:{sha256}".encode()).hexdigest()[:16]
    return dataset_dir(spec.name, root) / "processed" / f"{spec.download_name}-{mode}-{key}.npz"


def check_directed(spec: OgbSpec, directed: bool) -> None:
    if directed and not spec.directed:
        raise ConfigError(f"{spec.name} is an undirected graph; directed=true applies to "
                          f"{', '.join(n for n, s in DATASETS.items() if s.directed)} only")


def process(name: str, root: str | Path | None = None, directed: bool = False) -> Graph:
    """Parse the downloaded archive once (symmetrised unless ``directed``); later calls
    read the cached ``.npz``, which is keyed by the archive's recorded SHA-256. A recorded
    archive that no longer parses (pinned by an older mgsparse before parses were checked) is
    unpinned and deleted, so the next download fetches a fresh one."""
    spec = check_name(name)
    check_directed(spec, directed)
    archive = archive_path(spec.name, root)
    sha256 = recorded_sha256(archive)
    if sha256 is None or not archive.is_file():
        raise DataError(f"{spec.name} is not downloaded (no checked {archive.name} in "
                        f"{archive.parent}); run `mgsparse datasets download {spec.name}`")
    try:
        return processed_graph(spec, root, directed, archive, sha256)
    except DataError as exc:
        archive.unlink(missing_ok=True)
        archive.with_name(archive.name + ".sha256").unlink(missing_ok=True)
        raise DataError(f"{exc} (the archive was deleted: the next run downloads it "
                        "again)") from None


def processed_graph(spec: OgbSpec, root: str | Path | None, directed: bool, archive: Path,
                    sha256: str) -> Graph:
    """The parse of `archive` (SHA-256 `sha256`), from its cache or parsed and cached now."""
    def build() -> Graph:
        graph = read_archive(archive, spec)
        if directed:
            return graph
        row, col = graph.edge_index
        return replace(graph, edge_index=undirected_edges(row, col, graph.num_nodes))

    return cached_graph(processed_path(spec.name, root, directed, sha256), sha256, spec.name,
                        build)


def load(name: str, root: str | Path | None = None, split: str = "public",
         url: str | None = None, normalize_features: bool = False, directed: bool = False,
         progress: dl.Progress | None = None, **split_kwargs) -> Graph:
    """An OGB node-property dataset as a `Graph`: checked download, parse, official split
    ('public'; 'full' and 'random' as for Planetoid), optional row normalisation."""
    spec = check_name(name)
    check_split(split)
    download(spec.name, root, url, progress, directed)
    return finish(process(spec.name, root, directed), split, normalize_features, progress,
                  **split_kwargs)


def cache_status(name: str, root: str | Path | None = None) -> dict:
    """Whether the checked archive is present, and the bytes the dataset takes on disk."""
    archive = archive_path(name, root)
    return folder_status(dataset_dir(name, root),
                         archive.is_file() and recorded_sha256(archive) is not None)


class Ogb(Source):
    """The catalog's ``ogb`` source: the functions above (``directed`` from the section)."""

    name = "ogb"
    reads = ("root", "url", "split", "normalize_features", "directed")

    def load(self, dataset, *, progress=None, **options) -> Graph:
        return load(dataset, progress=progress, **options)

    def download(self, dataset, *, root=None, url=None, progress=None) -> str:
        archive = download(dataset, root=root, url=url, progress=progress)
        sha = recorded_sha256(archive) or ""
        return (f"{check_name(dataset).name}: {archive.name} checked (SHA-256 {sha[:16]}... "
                f"recorded) in {archive.parent}")

    def cache_status(self, dataset, root=None) -> dict:
        return cache_status(dataset, root)
