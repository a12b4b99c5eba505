"""The TU graph-classification datasets (MUTAG, NCI1, NCI109, PROTEINS, ENZYMES, DD): download
-> check -> parse -> cache, as a `GraphSet`.

Facts from the TU collection's documentation (Morris et al., "TUDataset", 2020), checked on
every parse:

========  ======  =======  =======  ===========================  ==================
name      graphs  nodes    classes  node features                graph labels
========  ======  =======  =======  ===========================  ==================
MUTAG     188     3,371    2        7 (one-hot atom type)        -1/1 -> 0/1
NCI1      4,110   122,747  2        37 (one-hot atom type)       0/1
NCI109    4,127   122,494  2        38 (one-hot atom type)       0/1
PROTEINS  1,113   43,471   2        3 one-hot + 1 attribute      1/2 -> 0/1
ENZYMES   600     19,580   6        3 one-hot + 18 attributes    1..6 -> 0..5
DD        1,178   334,925  2        89 (one-hot amino acid)      1/2 -> 0/1
========  ======  =======  =======  ===========================  ==================

MUTAG lists 7,442 directed edge lines (each bond both ways), 125 graphs labelled 1 and 63
labelled -1, so classes 0/1 count 63/125. (The feature widths and label values of PROTEINS,
ENZYMES and DD are those PyTorch Geometric reports for these files; only the counts in the
first three columns are checked.)

The archive ``<NAME>.zip`` holds a folder ``<NAME>/`` of comma-separated text files, one
line per node, edge or graph, ids counted from 1::

    NAME_A.txt                 E lines "i, j": an edge between global nodes i and j
    NAME_graph_indicator.txt   N lines: the graph of node i (non-decreasing, 1..G)
    NAME_graph_labels.txt      G lines: the label of graph g
    NAME_node_labels.txt       N lines, optional: node labels (one or more columns)
    NAME_node_attributes.txt   N lines, optional: node attributes (floats)
    NAME_edge_labels.txt       E lines, optional: the label of the edge on line k of A
    NAME_edge_attributes.txt   E lines, optional: edge attributes (floats)

What the parse makes of them: ids from 0; edges in the canonical undirected form of
`graph.undirected_edges` (the files list both directions already, so the count is kept);
node labels one-hot (per column, ``label - min`` wide ``max - min + 1``, as PyTorch Geometric
does; a column wider than `tu_io.MAX_ONE_HOT`, 1,024, is refused naming the line), attributes
appended; a dataset with neither gets one constant feature; graph labels mapped to 0..C-1 in
sorted order. Edge labels become ``edge_attr`` the same way (one-hot per column, edge
attributes appended; MUTAG: 7,442 × 4, its four bond types) and the first label column, from 0,
``edge_type``; each directed edge keeps its own line's row. README.txt is not read.

Trust. The collection publishes no checksums, so we trust on first use, as for OGB: the first
archive is parsed whole and checked against the table above (layout, counts, ids, every edge
inside its own graph) before its SHA-256 is written in ``<archive>.sha256``; from then on the
cached archive, and any new download, must match it. The zip is read in memory, never
extracted (`tu_io`): a member named with ``..`` or an absolute path, a symbolic link, more
than 64 members, or a member larger than its cap (bytes per expected line,
`tu_io.BYTES_PER_ROW`) refuses the archive.

Errors. One line naming the file and, where one is to blame, the line. A damaged download is a
`DataError` (exit 1); an archive from the user's own folder (``dataset.url`` or
``MGSPARSE_TU_URL`` a local folder) is an `InputFileError` (exit 2): the file to fix is
theirs. Either way nothing is kept: not the archive, not its checksum, not the ``.npz``.

Source: the ``url`` argument (config ``dataset.url``), else ``MGSPARSE_TU_URL``, else the TU
collection's server; a URL or a local folder holding ``<NAME>.zip``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from mgsparse.data import download as dl
from mgsparse.data.cache import cached_graphset, folder_status, resolve_root, save_graphset
from mgsparse.data.graphset import GraphSet
from mgsparse.data.sources import Source, unknown_dataset
from mgsparse.data.sources.tu_io import read_archive
from mgsparse.errors import ConfigError, DataError, InputFileError

DEFAULT_URL = "https://www.chrsmrrs.com/graphkerneldatasets/"
URL_ENV = "MGSPARSE_TU_URL"
PROCESSED_VERSION = "2"  # bump when the processing changes, to invalidate cached .npz files
FETCH_OPTIONS = {"timeout": (10.0, 60.0), "retries": 3, "backoff": 1.0}  # see download.fetch
MIRROR_HINT = (f"to use a mirror, set {URL_ENV} (or the config key dataset.url) to a URL or a "
               "folder holding <NAME>.zip")


@dataclass(frozen=True)
class TuSpec:
    """What the TU documentation says of one dataset; a parse that disagrees is refused."""

    name: str  # the catalog's name
    title: str  # the zip's name, its folder and its files' prefix
    num_graphs: int
    num_nodes: int
    num_classes: int
    num_edge_lines: int | None = None  # lines of NAME_A.txt (directed), where documented

    @property
    def max_bytes(self) -> int:
        """The largest download accepted: the real zips take 5-20 bytes per node."""
        return 256 * self.num_nodes + (1 << 20)


DATASETS: dict[str, TuSpec] = {s.name: s for s in (
    TuSpec("mutag", "MUTAG", 188, 3_371, 2, 7_442),
    TuSpec("nci1", "NCI1", 4_110, 122_747, 2, 265_506),
    TuSpec("nci109", "NCI109", 4_127, 122_494, 2, 265_208),
    TuSpec("proteins", "PROTEINS", 1_113, 43_471, 2),
    TuSpec("enzymes", "ENZYMES", 600, 19_580, 6),
    TuSpec("dd", "DD", 1_178, 334_925, 2),
)}


# --- where things are ------------------------------------------------------------------------

def check_name(name: str) -> TuSpec:
    spec = DATASETS.get(str(name).lower())
    if spec is None:
        raise unknown_dataset(name, DATASETS, "TU dataset")
    return spec


def resolve_url(url: str | None = None) -> str:
    """Explicit argument > ``MGSPARSE_TU_URL`` > the TU collection's server."""
    return dl.resolve_url(url, URL_ENV, DEFAULT_URL)


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    return resolve_root(root) / check_name(name).title


def archive_path(name: str, root: str | Path | None = None) -> Path:
    return dataset_dir(name, root) / "raw" / f"{check_name(name).title}.zip"


def processed_path(name: str, root: str | Path | None, sha256: str) -> Path:
    key = hashlib.sha256(f"{PROCESSED_VERSION}:{sha256}".encode()).hexdigest()[:16]
    return dataset_dir(name, root) / "processed" / f"{check_name(name).title}-{key}.npz"


# --- download: trust on first use -------------------------------------------------------------

def download(name: str, root: str | Path | None = None, url: str | None = None,
             progress: dl.Progress | None = None) -> Path:
    """Make ``<root>/<NAME>/raw/<NAME>.zip`` a checked archive; return its path. The first
    archive is parsed whole before its checksum is recorded (and its parse cached)."""
    spec = check_name(name)
    dest = archive_path(spec.name, root)
    base = resolve_url(url)
    source = dl.source_of(base, dest.name)
    recorded = dl.recorded_sha256(dest)
    with dl.mirror_hint(MIRROR_HINT, url, URL_ENV):
        if recorded is not None:  # the cache, or a fresh download, must be the first archive
            return dl.fetch(source, dest, recorded, progress=progress, max_bytes=spec.max_bytes,
                            **FETCH_OPTIONS)
        if not dest.is_file():
            dl.fetch_unpinned(source, dest, spec.max_bytes, progress, **FETCH_OPTIONS)
    try:
        graphs = read_archive(dest, spec)
    except DataError as exc:
        dest.unlink(missing_ok=True)  # never keep, and never trust, a damaged first archive
        if dl.is_remote(base):
            raise
        raise InputFileError(str(exc)) from None  # the user's own folder: theirs to fix
    except BaseException:  # anything else (memory, Ctrl-C): an unchecked archive is not kept
        dest.unlink(missing_ok=True)
        raise
    dl.record_sha256(dest)
    sha256 = dl.recorded_sha256(dest) or ""
    try:
        save_graphset(graphs, processed_path(spec.name, root, sha256), _cache_key(sha256))
    except OSError:
        pass  # a cache that cannot be written costs the next run one parse
    return dest


def _cache_key(sha256: str) -> str:
    return f"{PROCESSED_VERSION}:{sha256}"


# --- process and load ---------------------------------------------------------------------------

def process(name: str, root: str | Path | None = None) -> GraphSet:
    """The checked archive's GraphSet, from the ``.npz`` keyed by its recorded SHA-256."""
    spec = check_name(name)
    archive = archive_path(spec.name, root)
    sha256 = dl.recorded_sha256(archive)
    if sha256 is None or not archive.is_file():
        raise DataError(f"{spec.name} is not downloaded (no checked {archive.name} in "
                        f"{archive.parent}); run `mgsparse datasets download {spec.name}`")
    return cached_graphset(processed_path(spec.name, root, sha256), _cache_key(sha256),
                           spec.name, lambda: read_archive(archive, spec))


def load(name: str, root: str | Path | None = None, url: str | None = None,
         progress: dl.Progress | None = None) -> GraphSet:
    """A TU dataset as a `GraphSet`: checked download, parse, cache (see the module
    docstring for the facts). Splits are the graph task's (folds), not the source's."""
    spec = check_name(name)
    download(spec.name, root, url, progress)
    return process(spec.name, root)


def cache_status(name: str, root: str | Path | None = None) -> dict:
    archive = archive_path(name, root)
    return folder_status(dataset_dir(name, root),
                         archive.is_file() and dl.recorded_sha256(archive) is not None)


class Tu(Source):
    """The catalog's ``tu`` source: the functions above. Node-task keys (split,
    normalize_features, ...) have no meaning for a set of graphs and are refused."""

    name = "tu"
    reads = ("root", "url")

    def options(self, section) -> dict:
        return {key: getattr(section, key) for key in self.reads}

    def load(self, dataset, *, root=None, url=None, progress=None, split="public",
             normalize_features=False, **options) -> GraphSet:
        if split != "public" or normalize_features or options:
            given = [*(["split"] if split != "public" else []),
                     *(["normalize_features"] if normalize_features else []), *options]
            raise ConfigError(f"{dataset} is a set of graphs: {', '.join(given)} applies to "
                              "node datasets only (graph tasks split into folds)")
        return load(dataset, root=root, url=url, progress=progress)

    def download(self, dataset, *, root=None, url=None, progress=None) -> str:
        archive = download(dataset, root=root, url=url, progress=progress)
        sha = dl.recorded_sha256(archive) or ""
        return (f"{check_name(dataset).title}: {archive.name} checked (SHA-256 {sha[:16]}... "
                f"recorded) in {archive.parent}")

    def cache_status(self, dataset, root=None) -> dict:
        return cache_status(dataset, root)

