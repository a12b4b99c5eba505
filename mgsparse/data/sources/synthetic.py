"""The catalog's ``generated`` source for graphs: the stochastic block model `synthetic.sbm`,
made from a seed and shaped by the dataset section (``num_nodes``, ``num_classes``,
``avg_degree``, ``homophily``, ``num_features``, ``seed``).

The SBM draws its own random split (sizes from ``num_train_per_class``, ``num_val``,
``num_test``); 'full' trains on every node outside its validation and test sets. Point clouds
(moons, circles, blobs) are ``generated`` too, but they are no graphs: the points trainer
makes them from `mgsparse.data.synthetic` itself.
"""

from __future__ import annotations

import inspect

from mgsparse.data.graph import Graph
from mgsparse.data.progress import announce
from mgsparse.data.sources import Source, check_split, finish
from mgsparse.data.synthetic import sbm
from mgsparse.errors import ConfigError

SBM_DEFAULTS = {name: p.default for name, p in inspect.signature(sbm).parameters.items()}
SBM_OPTIONS = frozenset(SBM_DEFAULTS)


class Synthetic(Source):
    """Any keyword of `sbm` is an option; nothing is downloaded or cached."""

    name = "generated"
    reads = ("num_nodes", "num_classes", "avg_degree", "homophily", "num_features", "seed",
             "split", "normalize_features")

    def load(self, dataset, *, split="public", normalize_features=False, root=None, url=None,
             progress=None, **options) -> Graph:
        check_split(split)
        unknown = sorted(set(options) - SBM_OPTIONS)
        if unknown:
            raise ConfigError(f"{dataset}: unknown option(s) {', '.join(unknown)}")
        announce(progress, "generating", _describe(options))
        return finish(sbm(**options), "full" if split == "full" else "public",
                      normalize_features, progress)


def _describe(options: dict) -> str:
    """What is being generated, for the phase line at 80 columns ('a stochastic block
    model: 1,000,000 nodes, ~10,000,000 edges')."""
    nodes, degree = (options.get(k, SBM_DEFAULTS[k]) for k in ("num_nodes", "avg_degree"))
    try:  # sbm itself refuses bad values, with the message the user needs
        return (f"a stochastic block model: {int(nodes):,} nodes, "
                f"~{round(nodes * degree):,} edges")
    except (TypeError, ValueError, OverflowError):
        return "a stochastic block model"
