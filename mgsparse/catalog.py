"""The facts, once: every dataset a config may name and every model kind, with what each needs.

A dataset is a *graph* (nodes, edges, features, a node split: trained by a graph task), a set
of *graphs* (many small graphs with one label each: graph classification) or *points* (a 2-D
point cloud with no edges: trained by an MLP on mini-batches). Its source says where it comes
from: ``planetoid`` (downloaded and verified against embedded checksums), ``ogb`` and ``tu``
(downloaded, checked against the documented counts, trusted on first use),
``builtin`` (shipped in the package), ``generated`` (made from a seed), ``files`` (the user's
own, named in the config). A model kind names the graph operand its layers
read: the normalised adjacency Â (GCN), the scaled Laplacian L̃ (ChebNet), the raw edge list
(GAT, GraphSAGE) or nothing (MLP); a kind that classifies sets of graphs names the layer the
graph classifier stacks (``graph_layer``), and that layer says itself what it reads from a
batch of graphs (`mgsparse.nn.graphnet`).

This module imports nothing from mgsparse, so config and data (the leaves) may read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetFacts:
    name: str
    kind: str  # "graph" | "graphs" | "molecules" | "points" | "triples"
    source: str  # "planetoid" | "ogb" | "tu" | "kg" | "builtin" | "generated" | "files" | "molecules" | "motifs"
    description: str
    paper_accuracy: dict[str, float] = field(default_factory=dict)  # model kind -> test acc
    maker: str = ""  # generated data: its function in mgsparse.data.synthetic (motifs: .motifs)
    num_classes: int | None = None  # None: read from the config (synthetic, blobs)
    title: str = ""  # the dataset's own spelling (Planetoid's cache folders are named by it)


@dataclass(frozen=True)
class ModelFacts:
    kind: str
    operand: str | None  # "norm_adj" | "cheb_lap" | "edge_index" | None: what forward reads
    description: str
    builder: str  # the class in mgsparse.nn that builds it for a graph's nodes ("": none)
    options: tuple[str, ...] = ()  # model-section keys passed on to that class
    block_form: bool = True  # its layers run on blocks (nn/block.py): receptive fields, sampling
    # "module:Class" of the layer nn.graphnet.GraphClassifier stacks for sets of graphs ("": none)
    graph_layer: str = ""


DATASETS: dict[str, DatasetFacts] = {d.name: d for d in (
    DatasetFacts("cora", "graph", "planetoid",
                 "citation graph: 2,708 nodes, 10,556 edges, 1,433 features, 7 classes",
                 {"gcn": 0.815, "gat": 0.830, "sgc": 0.810, "gcnii": 0.855, "cheb": 0.812},
                 title="Cora"),
    DatasetFacts("citeseer", "graph", "planetoid",
                 "citation graph: 3,327 nodes, 9,104 edges, 3,703 features, 6 classes",
                 {"gcn": 0.703, "gat": 0.725}, title="CiteSeer"),
    DatasetFacts("pubmed", "graph", "planetoid",
                 "citation graph: 19,717 nodes, 88,648 edges, 500 features, 3 classes",
                 {"gcn": 0.790, "gat": 0.790}, title="PubMed"),
    DatasetFacts("ogbn-arxiv", "graph", "ogb",
                 "citation graph (OGB): 169,343 nodes, 1,166,243 directed edges, 128 features, "
                 "40 classes, time split", {"gcn": 0.7174}),
    DatasetFacts("ogbn-products", "graph", "ogb",
                 "co-purchase graph (OGB): 2,449,029 nodes, 61,859,140 edges, 100 features, "
                 "47 classes, sales-rank split"),
    DatasetFacts("karate", "graph", "builtin",
                 "Zachary's karate club: 34 nodes, 156 edges, 2 factions (embedded)"),
    DatasetFacts("synthetic", "graph", "generated",
                 "stochastic block model, generated from a seed (any size)", maker="sbm"),
    DatasetFacts("csv", "graph", "files",
                 "your own graph: edge list, features, labels, split files (dataset.edges...)"),
    DatasetFacts("mutag", "graphs", "tu",
                 "188 molecules (TU): 3,371 nodes, 7 atom types, 2 classes (mutagenic or not)",
                 num_classes=2, title="MUTAG"),
    DatasetFacts("nci1", "graphs", "tu",
                 "4,110 molecules (TU): 122,747 nodes, 37 atom types, 2 classes (lung cancer)",
                 num_classes=2, title="NCI1"),
    DatasetFacts("nci109", "graphs", "tu",
                 "4,127 molecules (TU): 122,494 nodes, 38 atom types, 2 classes (ovarian cancer)",
                 num_classes=2, title="NCI109"),
    DatasetFacts("proteins", "graphs", "tu",
                 "1,113 proteins (TU): 43,471 nodes, 3 node labels + 1 attribute, 2 classes",
                 num_classes=2, title="PROTEINS"),
    DatasetFacts("enzymes", "graphs", "tu",
                 "600 enzymes (TU): 19,580 nodes, 3 node labels + 18 attributes, 6 classes",
                 num_classes=6, title="ENZYMES"),
    DatasetFacts("dd", "graphs", "tu",
                 "1,178 proteins (TU): 334,925 nodes, 89 amino-acid labels, 2 classes",
                 num_classes=2, title="DD"),
    DatasetFacts("solubility", "molecules", "molecules",
                 "1,282 molecules (RDKit book, SDF): aqueous solubility SOL = log S, fixed "
                 "split 1,025 train / 257 test; 3 classes in SOL_classification"),
    DatasetFacts("freesolv", "molecules", "molecules",
                 "642 molecules (MoleculeNet, SMILES; needs RDKit): hydration free energy "
                 "expt, kcal/mol"),
    DatasetFacts("molecules", "molecules", "molecules",
                 "your own molecules: an SDF or a CSV of SMILES (dataset.path, dataset.target)"),
    DatasetFacts("umls", "triples", "kg",
                 "knowledge graph (UMLS): 135 entities, 46 relations, 5,216/652/661 triples",
                 title="UMLS"),
    DatasetFacts("kinships", "triples", "kg",
                 "knowledge graph (Kinships): 104 entities, 25 relations, 8,544/1,068/1,074 "
                 "triples", title="Kinships"),
    DatasetFacts("nations", "triples", "kg",
                 "knowledge graph (Nations): 14 entities, 55 relations, 1,592/199/201 triples",
                 title="Nations"),
    DatasetFacts("triples", "triples", "kg",
                 "your own knowledge graph: head<TAB>relation<TAB>tail files "
                 "(dataset.train_triples...)"),
    DatasetFacts("ba-shapes", "graph", "motifs",
                 "planted answers: 300-node BA graph + 80 houses, 700 nodes, 4 classes "
                 "(explain)", maker="ba_shapes", num_classes=4),
    DatasetFacts("tree-cycles", "graph", "motifs",
                 "planted answers: binary tree of depth 8 + 80 six-cycles, 991 nodes, 2 classes "
                 "(explain)", maker="tree_cycles", num_classes=2),
    DatasetFacts("ba-2motifs", "graphs", "motifs",
                 "planted answers: 1,000 BA graphs with a house or a five-cycle, 2 classes "
                 "(explain)", maker="ba_2motifs", num_classes=2),
    DatasetFacts("moons", "points", "generated", "two interleaving half circles (2-D points)",
                 maker="make_moons", num_classes=2),
    DatasetFacts("circles", "points", "generated", "a circle inside a circle (2-D points)",
                 maker="make_circles", num_classes=2),
    DatasetFacts("blobs", "points", "generated", "Gaussian blobs, one per class (2-D points)",
                 maker="make_blobs"),
)}

STACK_OPTIONS = ("residual", "jk", "norm")  # the options of nn.stack.StackedModel.stack_options
MODELS: dict[str, ModelFacts] = {m.kind: m for m in (
    ModelFacts("gcn", "norm_adj", "graph convolution, Kipf & Welling 2017", "GCN",
               ("learn_edge_weight", *STACK_OPTIONS), graph_layer="mgsparse.nn.gcn:GCNConv"),
    ModelFacts("gat", "edge_index", "graph attention, Veličković et al. 2018", "GAT",
               ("heads", "output_heads", "attn_dropout", *STACK_OPTIONS),
               graph_layer="mgsparse.nn.gat:GATConv"),
    ModelFacts("sage", "edge_index", "GraphSAGE with mean aggregation, Hamilton et al. 2017",
               "GraphSAGE", ("normalize", *STACK_OPTIONS), graph_layer="mgsparse.nn.sage:SAGEConv"),
    ModelFacts("gin", "edge_index", "graph isomorphism network, Xu et al. 2019", "GIN",
               ("train_eps", *STACK_OPTIONS), graph_layer="mgsparse.nn.gin:GINConv"),
    ModelFacts("mlp", None, "multi-layer perceptron: no graph", "MLP", STACK_OPTIONS),
    ModelFacts("appnp", "norm_adj", "MLP then personalised-PageRank propagation, Klicpera et "
               "al. 2019", "APPNP", ("k", "alpha"), block_form=False),
    ModelFacts("sgc", "norm_adj", "simplified graph convolution (Â^K X, one linear layer), Wu "
               "et al. 2019", "SGC", ("k",), block_form=False),
    ModelFacts("gcnii", "norm_adj", "deep GCN with initial residual and identity mapping, Chen "
               "et al. 2020", "GCNII", ("alpha", "theta"), block_form=False),
    ModelFacts("cheb", "cheb_lap", "Chebyshev spectral convolution (K terms of the scaled "
               "Laplacian), Defferrard et al. 2016", "ChebNet", ("k",), block_form=False),
    ModelFacts("gine", "edge_index", "GIN with edge features (ReLU(h_j + W·e_ij) summed), Hu "
               "et al. 2020", "", ("train_eps",), block_form=False,
               graph_layer="mgsparse.nn.gine:GINEConv"),
    ModelFacts("gat_edge", "edge_index", "graph attention with edge features in its logits "
               "(PyG's edge_dim)", "", ("heads", "attn_dropout"), block_form=False,
               graph_layer="mgsparse.nn.gat:EdgeGATConv"),
)}

DATASET_NAMES: tuple[str, ...] = tuple(DATASETS)
GRAPH_DATASETS: tuple[str, ...] = tuple(n for n, d in DATASETS.items() if d.kind == "graph")
GRAPHSET_DATASETS: tuple[str, ...] = tuple(n for n, d in DATASETS.items() if d.kind == "graphs")
MOLECULE_DATASETS: tuple[str, ...] = tuple(n for n, d in DATASETS.items()
                                            if d.kind == "molecules")
POINT_DATASETS: tuple[str, ...] = tuple(n for n, d in DATASETS.items() if d.kind == "points")
TRIPLE_DATASETS: tuple[str, ...] = tuple(n for n, d in DATASETS.items() if d.kind == "triples")
PLANETOID_DATASETS: tuple[str, ...] = tuple(n for n, d in DATASETS.items()
                                            if d.source == "planetoid")
MODEL_KINDS: tuple[str, ...] = tuple(MODELS)
# the kinds whose layers `mgsparse.nn.graphnet.GraphClassifier` stacks for sets of graphs
GRAPH_CLASSIFIER_KINDS: tuple[str, ...] = tuple(k for k, m in MODELS.items() if m.graph_layer)
# the kinds with a node model (`builder`); the others classify sets of graphs only
NODE_MODEL_KINDS: tuple[str, ...] = tuple(k for k, m in MODELS.items() if m.builder)


def paper_accuracy(model_kind: str, dataset: str) -> float | None:
    """The test accuracy a paper reports for this model on this dataset, if one does."""
    facts = DATASETS.get(dataset)
    return facts.paper_accuracy.get(model_kind) if facts else None


def is_points(dataset: str) -> bool:
    return dataset in DATASETS and DATASETS[dataset].kind == "points"


def is_graphset(dataset: str) -> bool:
    """A set of small graphs with one label each (graph classification: MUTAG, NCI1, ...)."""
    return dataset in DATASETS and DATASETS[dataset].kind == "graphs"


def is_molecules(dataset: str) -> bool:
    """A set of molecules with a graph target (regression, or classes): solubility, ..."""
    return dataset in DATASETS and DATASETS[dataset].kind == "molecules"
def is_triples(dataset: str) -> bool:
    """A knowledge graph of (head, relation, tail) triples: knowledge-graph completion."""
    return dataset in DATASETS and DATASETS[dataset].kind == "triples"
