"""The Planetoid citation datasets (Cora, CiteSeer, PubMed): download -> parse -> process -> cache.

Facts the tests assert (public split, directed edge counts = 2 x undirected):

========  =====  ======  ========  =======  ============
name      nodes  edges   features  classes  train/val/test
========  =====  ======  ========  =======  ============
Cora      2708   10556   1433      7        140/500/1000
CiteSeer  3327   9104    3703      6        120/500/1000
PubMed    19717  88648   500       3        60/500/1000
========  =====  ======  ========  =======  ============

Where files come from: the ``url`` argument (config key ``dataset.url``), else the variable
``MGSPARSE_PLANETOID_URL``, else the canonical Planetoid repository. Either may be an
``http(s)://`` URL or a local folder used as a mirror. Where they go: ``root`` (config key
``dataset.root``), else ``MGSPARSE_DATA``, else ``./datasets``; raw files in
``<root>/<Name>/raw/``, the processed graph in ``<root>/<Name>/processed/*.npz``, named by
a digest of the raw checksums so that a change of raw files never reuses a stale graph.

Every raw file is verified against the SHA-256 embedded below before it is parsed; a file
whose checksum differs is discarded. (``ind.pubmed.allx``, 7,578,385 bytes, the largest file,
was recorded last, from a public copy of the canonical files whose other PubMed checksums
equal the ones here.)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mgsparse.catalog import DATASETS, PLANETOID_DATASETS
from mgsparse.data import download as dl
from mgsparse.data.cache import ROOT_ENV, cached_graph, folder_status, resolve_root  # noqa: F401
from mgsparse.data.download import Progress, fetch, source_of
from mgsparse.data.graph import Graph
from mgsparse.data.sources import Source, check_split, finish, unknown_dataset
from mgsparse.data.sources.planetoid_io import FILE_KEYS, read_planetoid

NAMES = {name: DATASETS[name].title for name in PLANETOID_DATASETS}  # cache folder names
DEFAULT_URL = "https://github.com/kimiyoung/planetoid/raw/master/data/"
URL_ENV = "MGSPARSE_PLANETOID_URL"
PROCESSED_VERSION = "1"  # bump when the processing changes, to invalidate cached .npz files
FETCH_OPTIONS = {"timeout": (5.0, 30.0), "retries": 3, "backoff": 0.5}  # see download.fetch
MIRROR_HINT = (f"to use a mirror, set {URL_ENV} (or the config key dataset.url) to a URL "
               "or a local folder holding the ind.<name>.* files")

CHECKSUMS: dict[str, str] = {
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index":
        "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.pubmed.x": "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",
    "ind.pubmed.tx": "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
    "ind.pubmed.allx": "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e",
    "ind.pubmed.y": "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
    "ind.pubmed.ty": "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
    "ind.pubmed.ally": "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
    "ind.pubmed.graph": "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
    "ind.pubmed.test.index":
        "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
}


# --- where things are ------------------------------------------------------------------------

def check_name(name: str) -> str:
    key = str(name).lower()
    if key not in NAMES:
        raise unknown_dataset(name, NAMES, "Planetoid dataset")
    return key


def resolve_url(url: str | None = None) -> str:
    """Explicit argument > ``MGSPARSE_PLANETOID_URL`` > the canonical repository."""
    return dl.resolve_url(url, URL_ENV, DEFAULT_URL)


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    return resolve_root(root) / NAMES[check_name(name)]


def raw_dir(name: str, root: str | Path | None = None) -> Path:
    return dataset_dir(name, root) / "raw"


def file_names(name: str) -> list[str]:
    return [f"ind.{check_name(name)}.{key}" for key in FILE_KEYS]


# --- download -----------------------------------------------------------------------------------

def known_checksums(name: str) -> dict[str, str]:
    """The embedded SHA-256 of each of the dataset's eight raw files."""
    return {f: CHECKSUMS[f] for f in file_names(name)}


# Sizes in bytes of the canonical files: a download is cut off at ``max_download_bytes``, so a
# broken or hostile mirror cannot fill the disk before the checksum gets to reject its bytes.
SIZES: dict[str, int] = {
    "ind.cora.x": 22119, "ind.cora.tx": 148025, "ind.cora.allx": 257305,
    "ind.cora.y": 4054, "ind.cora.ty": 28135, "ind.cora.ally": 47959,
    "ind.cora.graph": 59847, "ind.cora.test.index": 5000,
    "ind.citeseer.x": 31087, "ind.citeseer.tx": 260321, "ind.citeseer.allx": 595021,
    "ind.citeseer.y": 3014, "ind.citeseer.ty": 24135, "ind.citeseer.ally": 55623,
    "ind.citeseer.graph": 61987, "ind.citeseer.test.index": 5000,
    "ind.pubmed.x": 23172, "ind.pubmed.tx": 405505, "ind.pubmed.allx": 7578385, "ind.pubmed.y": 854,
    "ind.pubmed.ty": 12135, "ind.pubmed.ally": 224739, "ind.pubmed.graph": 471808,
    "ind.pubmed.test.index": 6000,
}
UNKNOWN_SIZE_CAP = 64 << 20  # a file missing from the table above (none today)


def max_download_bytes(filename: str) -> int:
    """The most bytes a download of ``filename`` may write: its known size plus 1/8 and one
    chunk of margin, or 64 MiB for a file of unknown size."""
    size = SIZES.get(filename)
    return UNKNOWN_SIZE_CAP if size is None else size + size // 8 + (1 << 16)


def download(name: str, root: str | Path | None = None, url: str | None = None,
             progress: Progress | None = None) -> Path:
    """Make ``<root>/<Name>/raw/`` hold the eight verified raw files; return that folder."""
    key = check_name(name)
    base, folder = resolve_url(url), raw_dir(key, root)
    with dl.mirror_hint(MIRROR_HINT, url, URL_ENV):
        for filename, sha256 in known_checksums(key).items():
            fetch(source_of(base, filename), folder / filename, sha256, progress=progress,
                  max_bytes=max_download_bytes(filename), **FETCH_OPTIONS)
    return folder


# --- process and cache --------------------------------------------------------------------------

def _cache_key(name: str) -> str:
    sums = known_checksums(name)
    text = PROCESSED_VERSION + "".join(f"{f}={s}" for f, s in sorted(sums.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def processed_path(name: str, root: str | Path | None = None) -> Path:
    return dataset_dir(name, root) / "processed" / f"{check_name(name)}-{_cache_key(name)}.npz"


def process(name: str, root: str | Path | None = None) -> Graph:
    """Parse the verified raw files once; later calls read the cached ``.npz``."""
    key = check_name(name)
    return cached_graph(processed_path(key, root), _cache_key(key), key,
                        lambda: read_planetoid(raw_dir(key, root), key))


def load(name: str, root: str | Path | None = None, split: str = "public",
         url: str | None = None, normalize_features: bool = False,
         progress: Progress | None = None, **split_kwargs) -> Graph:
    """Cora, CiteSeer or PubMed as a `Graph`: verified download, safe parse, split, optional
    row normalisation of the features (see the module docstring for the numbers)."""
    key = check_name(name)
    check_split(split)
    download(key, root, url, progress)
    return finish(process(key, root), split, normalize_features, progress, **split_kwargs)


def cache_status(name: str, root: str | Path | None = None) -> dict:
    """Whether all raw files are present, and the bytes the dataset takes on disk."""
    raw = raw_dir(name, root)
    return folder_status(dataset_dir(name, root),
                         all((raw / f).is_file() for f in file_names(name)))


class Planetoid(Source):
    """The catalog's ``planetoid`` source: the functions above."""

    name = "planetoid"
    reads = ("root", "url", "split", "normalize_features")

    def load(self, dataset, *, progress=None, **options) -> Graph:
        return load(dataset, progress=progress, **options)

    def download(self, dataset, *, root=None, url=None, progress=None) -> str:
        folder = download(dataset, root=root, url=url, progress=progress)
        return f"{NAMES[check_name(dataset)]}: 8 files verified in {folder}"

    def cache_status(self, dataset, root=None) -> dict:
        return cache_status(dataset, root)
