"""The catalog: every dataset and model kind written once, with facts the rest of the library and
the data themselves agree with."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import typing

import pytest

import mgsparse.nn
from mgsparse import catalog
from mgsparse.catalog import (
    DATASET_NAMES,
    DATASETS,
    GRAPH_CLASSIFIER_KINDS,
    GRAPH_DATASETS,
    GRAPHSET_DATASETS,
    MODEL_KINDS,
    MODELS,
    MOLECULE_DATASETS,
    NODE_MODEL_KINDS,
    PLANETOID_DATASETS,
    POINT_DATASETS,
    STACK_OPTIONS,
    TRIPLE_DATASETS,
    is_graphset,
    is_points,
    is_triples,
    paper_accuracy,
)
from mgsparse.config import DatasetConfig, ModelConfig
from mgsparse.data import motifs, synthetic


def test_the_names_are_the_keys_and_each_kind_is_listed_once():
    assert all(name == facts.name for name, facts in DATASETS.items())
    assert all(kind == facts.kind for kind, facts in MODELS.items())
    assert DATASET_NAMES == tuple(DATASETS) and MODEL_KINDS == tuple(MODELS)
    assert (set(GRAPH_DATASETS) | set(GRAPHSET_DATASETS) | set(POINT_DATASETS)
            | set(MOLECULE_DATASETS) | set(TRIPLE_DATASETS)) == set(DATASETS)
    assert set(MOLECULE_DATASETS) == {"solubility", "freesolv", "molecules"}
    assert set(TRIPLE_DATASETS) == {"umls", "kinships", "nations", "triples"}
    assert not set(GRAPH_DATASETS) & set(POINT_DATASETS)
    assert not set(GRAPHSET_DATASETS) & (set(GRAPH_DATASETS) | set(POINT_DATASETS))
    assert set(GRAPHSET_DATASETS) == {"mutag", "nci1", "nci109", "proteins", "enzymes", "dd",
                                      "ba-2motifs"}
    assert set(PLANETOID_DATASETS) == {"cora", "citeseer", "pubmed"} <= set(GRAPH_DATASETS)
    assert set(POINT_DATASETS) == {"moons", "circles", "blobs"}
    assert GRAPH_DATASETS[0] == "cora"  # the bench's default


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_every_dataset_has_a_known_kind_source_and_maker(name):
    facts = DATASETS[name]
    assert facts.kind in ("graph", "graphs", "molecules", "points", "triples") and facts.description
    assert facts.source in ("planetoid", "ogb", "tu", "kg", "builtin", "generated", "files",
                            "molecules", "motifs")
    assert is_triples(name) == (facts.kind == "triples") == (facts.source == "kg")
    assert is_points(name) == (facts.kind == "points")
    assert is_graphset(name) == (facts.kind == "graphs")
    if facts.source == "generated":
        assert callable(getattr(synthetic, facts.maker))
    elif facts.source == "motifs":
        assert callable(getattr(motifs, facts.maker))
    else:
        assert facts.maker == ""
    assert set(facts.paper_accuracy) <= set(MODELS)
    assert all(0.5 < acc < 1 for acc in facts.paper_accuracy.values())


@pytest.mark.parametrize("kind", NODE_MODEL_KINDS)
def test_every_model_kind_names_its_class_operand_and_options(kind):
    facts = MODELS[kind]
    cls = getattr(mgsparse.nn, facts.builder)
    assert inspect.isclass(cls)
    assert facts.operand in ("norm_adj", "cheb_lap", "edge_index", None)
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    parameters = inspect.signature(cls).parameters
    for option in facts.options:
        assert option in fields and option in parameters, option


def test_the_operand_each_model_reads():
    assert {k: m.operand for k, m in MODELS.items()} == {
        "gcn": "norm_adj", "gat": "edge_index", "sage": "edge_index", "gin": "edge_index",
        "mlp": None, "appnp": "norm_adj", "sgc": "norm_adj", "gcnii": "norm_adj",
        "cheb": "cheb_lap", "gine": "edge_index",
        "gat_edge": "edge_index"}


def test_the_kinds_for_sets_of_graphs_name_their_layer_and_its_options():
    """Each graph classifier kind names a "module:Class" whose `for_graphs` takes the kind's
    own options (the stack's aside: a graph classifier has its own shape); a kind without a
    node model (GINE) classifies sets of graphs."""
    from mgsparse.run.build import graph_layer

    assert GRAPH_CLASSIFIER_KINDS == ("gcn", "gat", "sage", "gin", "gine", "gat_edge")
    assert set(MODEL_KINDS) - set(NODE_MODEL_KINDS) == {"gine", "gat_edge"}
    for kind in GRAPH_CLASSIFIER_KINDS:
        module, name = MODELS[kind].graph_layer.split(":")
        layer = graph_layer(kind)
        assert (layer.__module__, layer.__name__) == (module, name)
        accepted = inspect.signature(layer.for_graphs).parameters
        for option in set(MODELS[kind].options) - set(STACK_OPTIONS) - {"learn_edge_weight",
                                                                          "output_heads"}:
            assert option in accepted, (kind, option)


@pytest.mark.parametrize("kind", [k for k in NODE_MODEL_KINDS if MODELS[k].operand is not None])
def test_the_block_form_fact_is_what_the_layers_say(kind):
    """The catalog's block_form (read by the config check) agrees with the model's layers."""
    from mgsparse.nn.block import block_support

    model = getattr(mgsparse.nn, MODELS[kind].builder)(3, 4, 2, layers=2)
    assert MODELS[kind].block_form == (block_support(model) is None)


def test_paper_accuracies():
    """Kipf & Welling 2017 (GCN), Veličković et al. 2018 (GAT)."""
    assert paper_accuracy("gcn", "cora") == 0.815
    assert paper_accuracy("gcn", "citeseer") == 0.703
    assert paper_accuracy("gcn", "pubmed") == 0.790
    assert paper_accuracy("gat", "cora") == 0.830
    assert paper_accuracy("sgc", "cora") == 0.810  # Wu et al. 2019
    assert paper_accuracy("gcnii", "cora") == 0.855  # Chen et al. 2020
    assert paper_accuracy("cheb", "cora") == 0.812  # Kipf & Welling 2017, Chebyshev K = 2
    assert paper_accuracy("gat", "citeseer") == 0.725
    assert paper_accuracy("mlp", "cora") is None
    assert paper_accuracy("gcn", "karate") is None
    assert paper_accuracy("gcn", "nope") is None
    assert not is_points("nope")


def test_the_config_accepts_exactly_the_catalog_names():
    hints = typing.get_type_hints(DatasetConfig)
    assert typing.get_args(hints["name"]) == DATASET_NAMES
    assert typing.get_args(typing.get_type_hints(ModelConfig)["kind"]) == MODEL_KINDS


def test_the_catalog_imports_nothing_from_mgsparse():
    tree = ast.parse(inspect.getsource(catalog))
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] == "mgsparse"], imported


def _numbers(description: str) -> dict[str, int]:
    return {what: int(n.replace(",", "")) for n, what in
            re.findall(r"([\d,]+) (nodes|edges|features|classes)", description)}


def test_the_karate_description_is_the_data():
    from mgsparse.data import karate_club

    g = karate_club()
    assert _numbers(DATASETS["karate"].description) == {"nodes": g.num_nodes,
                                                        "edges": g.num_edges}


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_descriptions_are_the_data(mirror_env, name):
    from mgsparse.data import load_dataset

    g = load_dataset(name)
    assert _numbers(DATASETS[name].description) == {
        "nodes": g.num_nodes, "edges": g.num_edges, "features": g.x.shape[1],
        "classes": g.num_classes}
