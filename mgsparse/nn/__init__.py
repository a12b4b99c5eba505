"""Neural-network building blocks on the mgsparse engine: modules, layers, losses."""

from mgsparse.nn import functional
from mgsparse.nn.conv import GCNConv, normalized_adjacency
from mgsparse.nn.gat import GAT, GATConv
from mgsparse.nn.gin import GINConv, gin_mlp
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
from mgsparse.nn.module import Buffer, LoadResult, Module, ModuleList, Parameter, Sequential
from mgsparse.nn.norm import BatchNorm1d, LayerNorm
from mgsparse.nn.pool import global_add_pool, global_max_pool, global_mean_pool, global_pool
from mgsparse.nn.sage import GraphSAGE, SAGEConv

__all__ = [
    "ELU", "GAT", "GCN", "MLP", "BatchNorm1d", "Buffer", "Dropout", "GATConv", "GCNConv",
    "GINConv", "GraphSAGE", "Identity", "LayerNorm", "LeakyReLU", "Linear", "LoadResult",
    "Module", "ModuleList", "Parameter", "ReLU", "SAGEConv", "Sequential", "Sigmoid", "Tanh",
    "functional", "gin_mlp", "global_add_pool", "global_max_pool", "global_mean_pool",
    "global_pool", "glorot_", "normalized_adjacency",
]
