"""A model whose layers are subclasses of the shipped ones, for the tasks' tests."""

from __future__ import annotations

import pytest

from mgsparse.run.tasks.nodes import NodeTask


@pytest.fixture
def subclassed_layers(monkeypatch):
    """Call it to give every node task's model convs that are instances of a subclass of their
    layer (MyGCNConv, MySAGEConv, MyGATConv), keeping the inherited `on_block` or, with
    `block_form=False`, without one."""
    build = NodeTask.build_model

    def replace(block_form: bool = True) -> None:
        def build_model(self, rng):
            model = build(self, rng)
            for conv in model.convs:
                base = type(conv)
                conv.__class__ = type(f"My{base.__name__}", (base,),
                                      {} if block_form else {"on_block": None})
            return model

        monkeypatch.setattr(NodeTask, "build_model", build_model)

    return replace
