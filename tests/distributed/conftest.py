"""The small partition the failure tests share: a 2,000-node synthetic graph in two parts."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = ["dataset.num_nodes=2000", "dataset.num_features=32", "monitor.memory=false"]


@pytest.fixture(scope="session")
def small_parts(tmp_path_factory):
    from mgsparse.config import load_config
    from mgsparse.distributed import partition_graph
    from mgsparse.run.placed import load_graph

    config = load_config(REPO / "configs" / "synthetic.yaml", SMALL)
    folder = tmp_path_factory.mktemp("small-parts")
    partition_graph(config, load_graph(config.dataset), 2, folder)
    return folder
