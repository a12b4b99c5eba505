"""Neural-network building blocks on the mgsparse engine: modules, layers, losses.

One module per architecture (`gcn`, `gat`, `sage`, `gin`), each a layer with its block form and its
model; `stack` the model shape they share; `block` the block-form protocol (read it before
adding a layer). `GRAPH_LAYERS` lists every graph layer: tests/nn/test_layer_contract.py runs
each one, and a subclass of each, through the contract that `nn/block.py` writes down;
`WHOLE_GRAPH_LAYERS` lists those without a block form (ChebConv), trained on the whole graph.
"""

from mgsparse.nn import functional
from mgsparse.nn.appnp import APPNP, APPNPProp
from mgsparse.nn.cheb import ChebConv, ChebNet
from mgsparse.nn.gat import GAT, GATConv
from mgsparse.nn.gcn import GCN, GCNConv, normalized_adjacency
from mgsparse.nn.gcnii import GCNII, GCNIILayer
from mgsparse.nn.gin import GIN, GINConv, gin_mlp
from mgsparse.nn.layers import (
    ELU,
    Dropout,
    Identity,
    LeakyReLU,
    Linear,
    ReLU,
    Sigmoid,
    Tanh,
    glorot_,
)
from mgsparse.nn.module import Buffer, LoadResult, Module, ModuleList, Parameter, Sequential
from mgsparse.nn.norm import BatchNorm1d, LayerNorm
from mgsparse.nn.pool import global_add_pool, global_max_pool, global_mean_pool, global_pool
from mgsparse.nn.rgcn import RGCNConv
from mgsparse.nn.sage import GraphSAGE, SAGEConv
from mgsparse.nn.sgc import SGC
from mgsparse.nn.stack import MLP

GRAPH_LAYERS: tuple[type[Module], ...] = (GCNConv, GATConv, SAGEConv, GINConv)
# graph layers without a block form (K hops a layer; R-GCN: relations): gradchecked, trained
# on the whole graph
WHOLE_GRAPH_LAYERS: tuple[type[Module], ...] = (ChebConv, RGCNConv)

__all__ = [
    "APPNP", "ELU", "GAT", "GCN", "GCNII", "GIN", "GRAPH_LAYERS", "MLP", "SGC",
    "WHOLE_GRAPH_LAYERS", "APPNPProp", "BatchNorm1d", "Buffer", "ChebConv", "ChebNet",
    "Dropout", "GATConv", "GCNConv", "GCNIILayer", "GINConv", "GraphSAGE",
    "Identity", "LayerNorm", "LeakyReLU", "Linear", "LoadResult", "Module", "ModuleList",
    "Parameter", "RGCNConv", "ReLU", "SAGEConv", "Sequential", "Sigmoid", "Tanh", "functional", "gin_mlp",
    "global_add_pool", "global_max_pool", "global_mean_pool", "global_pool", "glorot_",
    "normalized_adjacency",
]
