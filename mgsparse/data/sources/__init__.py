"""Where graphs come from: the source protocol, and one registry keyed by the catalog's `source`.

Adding a dataset source
-----------------------

A source is one module here holding one `Source` subclass; the registry below maps the
catalog's ``source`` string (``DatasetFacts.source``) to an instance of it. To add one:

1. ``mgsparse/data/sources/<name>.py``: subclass `Source`, set `name` to the new ``source``
   string and `reads` to the dataset-section keys it uses, implement `load` (and `download`
   and `cache_status` if it downloads);
2. a row in ``mgsparse/catalog.py`` per dataset it serves (``source="<name>"``);
3. its class in `SOURCES` at the foot of this file.

Then tests in ``tests/data/sources/test_<name>.py``, a config under ``configs/``. Nothing in
the trainer, the CLI or `mgsparse.data` changes: `load_dataset`, `load_section`,
`download_dataset` and `list_datasets` find the source through `source_for`.

What a source does, step by step:

- **Downloads** (`download`): into its own folder under the cache root (`cache.resolve_root`:
  ``dataset.root``, else ``MGSPARSE_DATA``, else ``./datasets``), from ``dataset.url``, else
  its own variable (``MGSPARSE_<NAME>_URL``), else its canonical server, via
  `download.resolve_url`; a URL or a local folder (a mirror), via `download.source_of`.
  Every byte goes through `download.fetch` (or `download.fetch_unpinned`), so partial files
  never land, retries, timeouts, a size cap and SIGTERM cleanup come for free; wrap it in
  `download.mirror_hint(...)` so an unreachable host says how to use a mirror.
- **Verifies**: against SHA-256 sums embedded in the module (Planetoid), or, when the
  publisher gives none, by trust on first use: check the content (a zip's CRC-32s and
  members), then pin it with `download.record_sha256` and fetch against
  `download.recorded_sha256` from then on (OGB).
- **Parses**: raw files into a `Graph` (float32 features dense or CSR, int64 labels with -1 for
  "no label", a (2, E) int64 ``edge_index`` in the canonical undirected form of
  `graph.undirected_edges` unless the data is directed, the dataset's own split as masks).
  Never unpickle or eval anything untrusted; vectorised numpy only, no loop over edges.
- **Caches**: the parsed graph with `cache.cached_graph(path, key, name, build)`, ``key``
  naming everything it was built from (raw checksums, a ``PROCESSED_VERSION`` to bump when
  parsing changes, options such as ``directed``); a stale or damaged cache is rebuilt.
  `cache_status` reports `cache.folder_status(folder, complete)` for ``datasets list``;
  a source that keeps nothing on disk returns None.
- **Splits and normalises**: `finish(graph, split, normalize_features, progress,
  **split_options)`, the same for every source: 'public' keeps the source's split, 'full' and 'random' as in
  `transforms.apply_split`.
- **Reads the dataset section**: `options(section)` turns the config's dataset section (any
  object with its attributes: data never imports the config) into `load`'s keywords: every
  key in `reads`, plus `transforms.SPLIT_OPTIONS` when ``split`` is 'random'. Override it
  only when keys are optional (CSV).
- **Reports**: ``progress(done_bytes, total_bytes_or_None, filename)`` as bytes arrive (pass it
  to `fetch`); a cache hit reports nothing. A step that moves no bytes but takes seconds on
  a large graph is announced with `mgsparse.data.progress.announce(progress, phase, detail)`
  (`finish` announces normalising). `download` returns one line saying what was checked
  and where it is (``mgsparse datasets download`` prints it).
- **Fails** with one line, never a traceback: `ConfigError` (exit 2) for the user's mistakes
  (unknown name, split or option, a malformed URL, directed=true on an undirected graph);
  `DataError` (exit 1) for a damaged download or cache (`DownloadError` and `ChecksumError`
  are DataErrors); `InputFileError` (a DataError with exit 2) for errors in the user's own
  files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from mgsparse.catalog import DATASETS
from mgsparse.data.graph import Graph
from mgsparse.data.progress import announce
from mgsparse.data.transforms import SPLIT_OPTIONS, SPLITS, apply_normalize, apply_split
from mgsparse.errors import ConfigError, did_you_mean

Progress = Callable[[int, "int | None", str], None]  # see `download.fetch`


class Source:
    """One place graphs come from (see the module docstring for the whole guide)."""

    name: ClassVar[str] = ""  # the catalog's ``source`` string
    reads: ClassVar[tuple[str, ...]] = ("split", "normalize_features")  # section keys

    def options(self, section: Any) -> dict[str, Any]:
        """`load`'s keywords from a config's dataset section: `reads`, and the random split's
        sizes and seed when ``section.split`` is 'random'."""
        options = {key: getattr(section, key) for key in self.reads}
        if section.split == "random":
            options.update({key: getattr(section, key) for key in SPLIT_OPTIONS})
        return options

    def load(self, dataset: str, *, split: str = "public", normalize_features: bool = False,
             root: str | Path | None = None, url: str | None = None,
             progress: Progress | None = None, **options: Any) -> Graph:
        """``dataset`` (a catalog name of this source) as a `Graph`; ``root``, ``url`` and
        ``progress`` concern downloads only and are ignored by sources that have none."""
        raise NotImplementedError

    def download(self, dataset: str, *, root: str | Path | None = None, url: str | None = None,
                 progress: Progress | None = None) -> str:
        """Fetch and verify into the cache; one line saying what was checked and where."""
        return f"{dataset} is {self.name} in mgsparse; nothing to download"

    def cache_status(self, dataset: str, root: str | Path | None = None) -> dict | None:
        """{"cached", "size_bytes", "path"} for a source that downloads, else None."""
        return None


def check_split(split: str) -> None:
    """Before any download: a split that does not exist is the user's mistake."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")


def finish(graph: Graph, split: str, normalize_features: bool, progress: Any = None,
           **split_options: Any) -> Graph:
    """The split (``public`` keeps the source's own) and the optional row normalisation,
    announced to `progress` (`mgsparse.data.progress`)."""
    graph = apply_split(graph, split, **split_options)
    if not normalize_features:
        return graph
    announce(progress, "normalising", f"the feature rows of {graph.num_nodes:,} nodes")
    return apply_normalize(graph)


def source_for(dataset: str) -> Source:
    """The registered source of a catalog dataset."""
    facts = DATASETS.get(str(dataset).lower())
    if facts is None:
        raise unknown_dataset(dataset, DATASETS)
    return SOURCES[facts.source]


def unknown_dataset(name: Any, known, what: str = "dataset") -> ConfigError:
    """``unknown dataset 'coraa'; did you mean 'cora'?``, or the known names when none is
    close (`errors.closest`, the one suggester of every unknown-name message)."""
    hint = did_you_mean(name, known)
    return ConfigError(f"unknown {what} {name!r}" + (hint or f"; known: {', '.join(known)}"))


# The registry: every catalog `source` string, once. (Imported here, at the foot, because each
# source module subclasses `Source` above.)
from mgsparse.data.sources import csv, karate, kg, molecules, motifs, ogb, planetoid, synthetic, tu

SOURCES: dict[str, Source] = {s.name: s for s in (
    planetoid.Planetoid(), ogb.Ogb(), karate.Karate(), synthetic.Synthetic(), csv.Csv(),
    tu.Tu(), molecules.Molecules(), kg.Kg(), motifs.Motifs(),
)}
