"""`dataset.reorder`: a choice of four, read by node classification only; every run it could
not map back to the file's numbering is one config line naming the key."""

from __future__ import annotations

import pytest

from mgsparse.config import config_from_dict, load_config
from mgsparse.errors import ConfigError
from mgsparse.run.tasks.partitioned import check_partitioned
from tests.config import HEADER, config_error, write


def test_the_default_is_the_files_own_order_and_the_choices_are_checked(tmp_path):
    assert config_from_dict({"dataset": {"name": "cora"}}).dataset.reorder == "none"
    for order in ("rcm", "degree", "metis"):
        assert config_from_dict({"dataset": {"name": "cora", "reorder": order}}
                                ).dataset.reorder == order
    err = config_error(write(tmp_path, HEADER + "  reorder: spectral\n"))
    assert str(err).endswith("bad.yaml:4: dataset.reorder must be one of 'none', 'rcm', "
                             "'degree', 'metis' (got 'spectral')")


@pytest.mark.parametrize("data, extra, needle", [
    ({"name": "mutag"}, {"model": {"kind": "gin"}}, "not dataset 'mutag'"),
    ({"name": "moons", "num_val": 100, "num_test": 100}, {"model": {"kind": "mlp"}},
     "not dataset 'moons'"),
    ({"name": "cora"}, {"task": "link"}, "not task: link"),
    ({"name": "cora"}, {"model": {"learn_edge_weight": True}}, "model.learn_edge_weight"),
], ids=["graph-set", "points", "link", "learned-edge-weights"])
def test_a_run_that_cannot_map_back_is_refused_in_one_line(data, extra, needle):
    with pytest.raises(ConfigError) as info:
        config_from_dict({"dataset": {**data, "reorder": "rcm"}, **extra})
    message = str(info.value)
    assert "dataset.reorder: rcm" in message and needle in message and "\n" not in message
    config_from_dict({"dataset": {**data, "reorder": "none"}, **extra})  # the default passes


def test_a_partitioned_run_refuses_a_new_order(tmp_path):
    path = write(tmp_path, HEADER + "  reorder: degree\n", "p.yaml")
    with pytest.raises(ConfigError, match="dataset.reorder: degree cannot apply: a partitioned "
                                          "run numbers each rank's nodes by its part"):
        check_partitioned(load_config(path))
    check_partitioned(load_config(write(tmp_path, HEADER, "q.yaml")))
