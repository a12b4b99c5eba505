"""The catalog's ``motifs`` source: graphs with planted answers for explanations (BA-Shapes,
Tree-Cycles, BA-2Motifs), made by `mgsparse.data.motifs` from ``dataset.seed``.

Nothing is downloaded or cached: each takes milliseconds. BA-Shapes and Tree-Cycles are one
graph each, with their own stratified 80/10/10 split ('public'; 'full' and 'random' as for
every graph); BA-2Motifs is a set of graphs, split by the graph task. The ground truth is not
part of the `Graph`: `mgsparse.data.motifs.planted(name, seed)` makes the same graph again
with its edge mask, which is what `mgsparse explain` reads.
"""

from __future__ import annotations

from mgsparse.data.graph import Graph
from mgsparse.data.graphset import GraphSet
from mgsparse.data.motifs import PlantedSet, planted
from mgsparse.data.sources import Source, check_split, finish
from mgsparse.errors import ConfigError


class Motifs(Source):
    """A planted-answer dataset from its seed."""

    name = "motifs"
    reads = ("seed", "split", "normalize_features")

    def options(self, section) -> dict:
        if section.name == "ba-2motifs":  # a set of graphs reads its seed only
            return {"seed": section.seed}
        return super().options(section)

    def load(self, dataset, *, split="public", normalize_features=False, root=None, url=None,
             progress=None, seed=0, **split_options) -> Graph | GraphSet:
        made = planted(dataset, seed)
        if isinstance(made, PlantedSet):
            if split != "public" or normalize_features or split_options:
                raise ConfigError(f"{dataset} is a set of graphs: split and "
                                  "normalize_features apply to node datasets only")
            return made.graphs
        check_split(split)
        return finish(made.graph, split, normalize_features, **split_options)
