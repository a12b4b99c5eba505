"""Neural-network building blocks on the mgsparse engine: modules, layers, losses."""

from mgsparse.nn import functional
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
from mgsparse.nn.module import LoadResult, Module, ModuleList, Parameter, Sequential
from mgsparse.nn.sage import GraphSAGE, SAGEConv

__all__ = [
    "ELU", "GAT", "Dropout", "GATConv", "GraphSAGE", "Identity", "LeakyReLU", "Linear",
    "LoadResult", "Module", "ModuleList", "Parameter", "ReLU", "SAGEConv", "Sequential", "Sigmoid",
    "Tanh", "functional", "glorot_",
]
