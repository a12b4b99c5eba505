"""The catalog's ``builtin`` source: Zachary's karate club, embedded in the package.

Nothing to download or cache; the graph and its split are `synthetic.karate_club`'s.
"""

from __future__ import annotations

from mgsparse.data.graph import Graph
from mgsparse.data.sources import Source, check_split, finish
from mgsparse.data.synthetic import karate_club


class Karate(Source):
    """Its own split ('public': the two leaders train, six members validate) or 'full' and
    'random' over its 34 labelled members."""

    name = "builtin"

    def load(self, dataset, *, split="public", normalize_features=False, root=None, url=None,
             progress=None, **split_options) -> Graph:
        check_split(split)
        return finish(karate_club(), split, normalize_features, progress, **split_options)
