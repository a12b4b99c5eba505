"""Neural-network building blocks on the mgsparse engine: modules, layers, losses."""

from mgsparse.nn import functional
from mgsparse.nn.conv import GCNConv, normalized_adjacency
from mgsparse.nn.gat import GAT, GATConv
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
from mgsparse.nn.models import GCN, MLP
from mgsparse.nn.module import LoadResult, Module, ModuleList, Parameter, Sequential
from mgsparse.nn.sage import GraphSAGE, SAGEConv

__all__ = [
    "ELU", "GAT", "GCN", "MLP", "Dropout", "GATConv", "GCNConv", "GraphSAGE", "Identity",
    "LeakyReLU", "Linear", "LoadResult", "Module", "ModuleList", "Parameter", "ReLU", "SAGEConv",
    "Sequential", "Sigmoid", "Tanh", "functional", "glorot_", "normalized_adjacency",
]
