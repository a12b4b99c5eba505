"""Neural-network building blocks on the mgsparse engine: modules, layers, losses."""

from mgsparse.nn import functional
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

__all__ = [
    "ELU", "Dropout", "Identity", "LeakyReLU", "Linear", "LoadResult", "Module", "ModuleList",
    "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional", "glorot_",
]
