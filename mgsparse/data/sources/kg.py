"""Knowledge graphs as triples (UMLS, Kinships, Nations, or your own files): download -> check
-> index, as `kg_io.Triples`.

Facts, as the standard splits publish them (Kok & Domingos 2007; the splits of Dettmers et al.
2018 as PyKEEN ships them), checked on every load:

=========  ========  =========  =====  =====  =====
name       entities  relations  train  valid  test
=========  ========  =========  =====  =====  =====
UMLS       135       46         5,216  652    661
Kinships   104       25         8,544  1,068  1,074
Nations    14        55         1,592  199    201
=========  ========  =========  =====  =====  =====

Files: ``<base>/<name>/{train,valid,test}.txt``, one ``head<TAB>relation<TAB>tail`` per line
(`kg_io` says what is refused). The base is the ``url`` argument (config ``dataset.url``), else
``MGSPARSE_KG_URL``, else PyKEEN's repository, whose ``src/pykeen/datasets/<name>/`` holds
these files; a URL or a local folder of the same layout.

Trust. Nobody publishes checksums of these files, so we trust on first use, as for TU: the three
files are downloaded, parsed whole and checked against the table above before their SHA-256 is
written beside each (``<split>.txt.sha256``); from then on the cached files, and any new
download, must match. A damaged first download keeps nothing: every file without a recorded
checksum is removed. Errors name the file and the line; from a remote host they are
`DataError`s (exit 1), from the user's own folder `InputFileError`s (exit 2).

Your own triples: ``dataset.name: triples`` with ``dataset.train_triples``,
``valid_triples`` and ``test_triples`` naming the three files (relative to the config's
folder). They are read as they are, never cached, and any problem is an `InputFileError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mgsparse.data import download as dl
from mgsparse.data.cache import folder_status, resolve_root
from mgsparse.data.sources import Source, unknown_dataset
from mgsparse.data.sources.kg_io import SPLITS, Triples, index_triples
from mgsparse.errors import ConfigError, DataError, InputFileError

DEFAULT_URL = "https://raw.githubusercontent.com/pykeen/pykeen/master/src/pykeen/datasets/"
URL_ENV = "MGSPARSE_KG_URL"
FETCH_OPTIONS = {"timeout": (10.0, 60.0), "retries": 3, "backoff": 1.0}  # see download.fetch
MAX_BYTES = 16 << 20  # per file: the real ones are 30-400 KB
MIRROR_HINT = (f"to use a mirror, set {URL_ENV} (or the config key dataset.url) to a URL or a "
               "folder holding <name>/train.txt, valid.txt and test.txt")
OWN_FILES = "triples"  # the catalog name of the user's own files
TRIPLE_KEYS = ("train_triples", "valid_triples", "test_triples")  # their dataset-section keys


@dataclass(frozen=True)
class KgSpec:
    """What the published splits say of one knowledge graph; a load that disagrees is refused."""

    name: str
    title: str
    num_entities: int
    num_relations: int
    sizes: tuple[int, int, int]  # train, valid, test triples


DATASETS: dict[str, KgSpec] = {s.name: s for s in (
    KgSpec("umls", "UMLS", 135, 46, (5_216, 652, 661)),
    KgSpec("kinships", "Kinships", 104, 25, (8_544, 1_068, 1_074)),
    KgSpec("nations", "Nations", 14, 55, (1_592, 199, 201)),
)}


def check_name(name: str) -> KgSpec:
    spec = DATASETS.get(str(name).lower())
    if spec is None:
        raise unknown_dataset(name, DATASETS, "knowledge graph")
    return spec


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    return resolve_root(root) / "kg" / check_name(name).name


def raw_path(name: str, split: str, root: str | Path | None = None) -> Path:
    return dataset_dir(name, root) / "raw" / f"{split}.txt"


# --- download: trust on first use -------------------------------------------------------------

def download(name: str, root: str | Path | None = None, url: str | None = None,
             progress: dl.Progress | None = None) -> Triples:
    """The three checked files of `name` in the cache, indexed; the first download is parsed
    and checked against the published counts before its checksums are recorded."""
    spec = check_name(name)
    base = dl.resolve_url(url, URL_ENV, DEFAULT_URL)
    dests = {s: raw_path(spec.name, s, root) for s in SPLITS}
    pinned = {s: dl.recorded_sha256(d) for s, d in dests.items()}
    with dl.mirror_hint(MIRROR_HINT, url, URL_ENV):
        for split, dest in dests.items():
            source = dl.source_of(base, f"{spec.name}/{split}.txt")
            if pinned[split] is not None:
                dl.fetch(source, dest, pinned[split], progress=progress, max_bytes=MAX_BYTES,
                         **FETCH_OPTIONS)
            elif not dest.is_file():
                dl.fetch_unpinned(source, dest, MAX_BYTES, progress, **FETCH_OPTIONS)
    refuse = DataError if dl.is_remote(base) else InputFileError  # a local folder: theirs
    try:
        triples = _checked(spec, {s: d.read_bytes() for s, d in dests.items()},
                           {s: f"{spec.name}/{s}.txt" for s in SPLITS}, refuse)
    except BaseException:  # damaged, or Ctrl-C mid-parse: nothing unpinned is kept
        for split, dest in dests.items():
            if pinned[split] is None:
                dest.unlink(missing_ok=True)
        raise
    for split, dest in dests.items():
        if pinned[split] is None:
            dl.record_sha256(dest)
    return triples


def _checked(spec: KgSpec, files: dict[str, bytes], filenames: dict[str, str],
             refuse) -> Triples:
    """The files indexed, and their counts against the spec's."""
    triples = index_triples(spec.name, files, filenames, refuse)
    got = (triples.num_entities, triples.num_relations,
           *(len(triples.split(s)) + triples.dropped.get(s, 0) for s in SPLITS))
    want = (spec.num_entities, spec.num_relations, *spec.sizes)
    if got != want:
        labels = ("entities", "relations", "train", "valid", "test")
        diff = ", ".join(f"{k} {g:,} (expected {w:,})" for k, g, w in zip(labels, got, want)
                         if g != w)
        raise refuse(f"{spec.title}: the files do not match the published splits: {diff}")
    return triples


def read_own(paths: dict[str, str | Path]) -> Triples:
    """Your own three files (split -> path), read and indexed; every problem names the file."""
    files, names = {}, {}
    for split in SPLITS:
        path = Path(paths[split])
        try:
            files[split] = path.read_bytes()
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read the {split} triples "
                                 f"({exc.strerror or exc})") from None
        names[split] = str(path)
    folder = Path(paths["train"]).parent.name or "triples"
    return index_triples(folder, files, names, InputFileError)


def cache_status(name: str, root: str | Path | None = None) -> dict | None:
    if name == OWN_FILES:
        return None
    cached = all(raw_path(name, s, root).is_file() and
                 dl.recorded_sha256(raw_path(name, s, root)) for s in SPLITS)
    return folder_status(dataset_dir(name, root), cached)


class Kg(Source):
    """The catalog's ``kg`` source: the functions above. A knowledge graph has its own splits
    and no features, so the node datasets' split and normalisation keys are not read."""

    name = "kg"
    reads = ("root", "url", *TRIPLE_KEYS)

    def options(self, section) -> dict:
        return {key: getattr(section, key, None) for key in self.reads}

    def load(self, dataset, *, root=None, url=None, progress=None, train_triples=None,
             valid_triples=None, test_triples=None, **options) -> Triples:
        if dataset == OWN_FILES:
            paths = dict(zip(SPLITS, (train_triples, valid_triples, test_triples)))
            missing = [f"dataset.{k}" for k, p in zip(TRIPLE_KEYS, paths.values()) if p is None]
            if missing:
                raise ConfigError(f"dataset.name: triples reads your files: {', '.join(missing)} "
                                  "must name them (head<TAB>relation<TAB>tail per line)")
            return read_own(paths)
        return download(dataset, root=root, url=url, progress=progress)

    def download(self, dataset, *, root=None, url=None, progress=None) -> str:
        if dataset == OWN_FILES:
            return "triples are your own files; nothing to download"
        triples = download(dataset, root=root, url=url, progress=progress)
        folder = raw_path(dataset, "train", root).parent
        return (f"{check_name(dataset).title}: train/valid/test.txt checked "
                f"({triples.num_entities} entities, {triples.num_relations} relations; SHA-256 "
                f"recorded) in {folder}")

    def cache_status(self, dataset, root=None) -> dict | None:
        return cache_status(dataset, root)
