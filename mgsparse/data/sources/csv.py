"""The catalog's ``files`` source: the user's own graph, named in a config's dataset section.

The files and their formats are `mgsparse.data.user`'s (the section's keys) and
`mgsparse.data.files`' (the parsers and their one-line errors); this module only binds them to
the source protocol. Every key is optional but ``edges``; paths are absolute once the config
is loaded. Nothing is downloaded or cached. A run needs labelled training nodes, so a section
without labels, or whose labels are all -1, is refused here by name (`datasets info` on the
folder itself still describes an unlabelled graph).
"""

from __future__ import annotations

from pathlib import Path

from mgsparse.data import user
from mgsparse.data.graph import Graph
from mgsparse.data.sources import Source
from mgsparse.errors import ConfigError, InputFileError


class Csv(Source):
    """`user.load_csv_graph` over the section's files, the graph named by their folder."""

    name = "files"
    reads = (*user.FILE_KEYS, *user.OPTION_KEYS)

    def options(self, section) -> dict:
        """The keys the section has (`user.config_kwargs`): all of them are optional here."""
        return user.config_kwargs(section)

    def load(self, dataset, *, edges=None, root=None, url=None, progress=None,
             **options) -> Graph:
        if edges is None:
            raise ConfigError(f"{dataset}: your own graph is read by "
                              "mgsparse.data.user.load_csv_graph from the files a config "
                              "names (dataset.edges, ...)")
        graph = user.load_csv_graph(edges, **options, name=Path(edges).parent.name)
        labels = options.get("labels")
        if labels is None:
            raise ConfigError("dataset.labels is not set: training needs the class of each "
                              "node (a labels file, one class id per line, -1 for none)")
        if not (graph.y >= 0).any():
            raise InputFileError(f"{labels}: no node has a label (all are -1): nothing to "
                                 "train on")
        return graph
