"""micrograd's Neuron, Layer and MLP on scalar `Value`s: the reference for vectorised MLPs.

Unlike micrograd, the weights are never drawn inside the model: a `ValueMLP` is built from
explicit float arrays `[(W₁, b₁), (W₂, b₂), …]`, `Wₖ` of shape (fan_in, fan_out): the
layout of a Tensor MLP computing `h @ W + b`. Given the same arrays, both engines compute the
same function, so their losses and gradients can be compared number for number.

Neuron j of layer k computes  act(bₖ[j] + Σᵢ xᵢ·Wₖ[i, j]);  every layer but the last
applies the activation, the last is linear (micrograd's `nonlin=i != len(nouts) - 1`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from mgsparse.engine.tensor import Tensor
from mgsparse.engine.value import Value
from mgsparse.errors import ConfigError, ShapeError

ACTIVATIONS = ("tanh", "relu", "sigmoid")


class Neuron:
    """One unit: a weight per input, a bias, and an optional activation."""

    def __init__(self, w: Sequence[float], b: float, activation: str | None = "tanh"):
        self.w = [Value(float(wi)) for wi in w]
        self.b = Value(float(b))
        self.activation = activation

    def __call__(self, x: Sequence) -> Value:
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return getattr(act, self.activation)() if self.activation else act

    def parameters(self) -> list[Value]:
        return self.w + [self.b]

    def __repr__(self) -> str:
        return f"Neuron({len(self.w)}, activation={self.activation})"


class Layer:
    """fan_out neurons reading the same fan_in inputs, from W (fan_in, fan_out) and b (fan_out,)."""

    def __init__(self, W: np.ndarray, b: np.ndarray, activation: str | None = "tanh"):
        W, b = np.asarray(W, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if W.ndim != 2 or b.shape != (W.shape[1],):
            raise ShapeError(f"Layer: need W of shape (fan_in, fan_out) and b of shape "
                             f"(fan_out,), got W {W.shape} and b {b.shape}")
        self.fan_in, self.activation = W.shape[0], activation
        self.neurons = [Neuron(W[:, j], b[j], activation) for j in range(W.shape[1])]

    def __call__(self, x: Sequence) -> list[Value]:
        return [n(x) for n in self.neurons]

    def parameters(self) -> list[Value]:
        return [p for n in self.neurons for p in n.parameters()]

    def to_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The current (W, b) as float64 arrays, in the layout the layer was built from."""
        W = np.array([[w.data for w in n.w] for n in self.neurons], dtype=np.float64).T
        return W, np.array([n.b.data for n in self.neurons], dtype=np.float64)

    def __repr__(self) -> str:
        return f"Layer({self.fan_in} -> {len(self.neurons)}, activation={self.activation})"


class ValueMLP:
    """A multilayer perceptron on scalar Values, built from explicit weight arrays.

    `weights` is `[(W₁, b₁), …]` with `Wₖ` of shape (fan_in, fan_out); consecutive layers
    must chain (fan_out of one = fan_in of the next). Calling it on one sample (a sequence of
    floats or Values) returns the list of output Values, one per output unit.
    """

    def __init__(self, weights: Sequence[tuple], activation: str = "tanh"):
        if activation not in ACTIVATIONS:
            raise ConfigError(f"ValueMLP: activation must be one of {', '.join(ACTIVATIONS)}, "
                              f"got {activation!r}")
        if not weights:
            raise ShapeError("ValueMLP: needs at least one (W, b) layer")
        last = len(weights) - 1
        self.layers = [Layer(W, b, activation if k < last else None)
                       for k, (W, b) in enumerate(weights)]
        fans = [np.shape(W) for W, _ in weights]
        for k in range(last):
            if fans[k][1] != fans[k + 1][0]:
                raise ShapeError(f"ValueMLP: layer {k} outputs {fans[k][1]} features but layer "
                                 f"{k + 1} expects {fans[k + 1][0]}")
        self.in_features, self.activation = fans[0][0], activation

    def __call__(self, x: Sequence) -> list[Value]:
        if len(x) != self.in_features:
            raise ShapeError(f"ValueMLP: expected {self.in_features} input features, got {len(x)}")
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self) -> list[Value]:
        """Layer by layer, neuron by neuron: the neuron's weights, then its bias."""
        return [p for layer in self.layers for p in layer.parameters()]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = 0.0

    def to_arrays(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [layer.to_arrays() for layer in self.layers]

    def __repr__(self) -> str:
        sizes = [self.in_features] + [len(layer.neurons) for layer in self.layers]
        return f"ValueMLP({'-'.join(map(str, sizes))}, activation={self.activation})"


def init_mlp_weights(sizes: Sequence[int], seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Glorot-uniform float64 weights and zero biases for layer sizes like (2, 16, 16, 1).

    W ~ U(-a, a) with a = √(6 / (fan_in + fan_out)), which keeps the variance of activations
    about constant through tanh layers. Both engines start from these same arrays.
    """
    if len(sizes) < 2 or any(int(n) < 1 for n in sizes):
        raise ShapeError(f"init_mlp_weights: need two or more positive sizes, got {tuple(sizes)}")
    rng = np.random.default_rng(seed)
    weights = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        weights.append((rng.uniform(-bound, bound, (fan_in, fan_out)), np.zeros(fan_out)))
    return weights


# ---------------------------------------------------------------- one SGD step, on each engine


def value_sgd_step(mlp: ValueMLP, x: np.ndarray, y: np.ndarray, lr: float) -> float:
    """micrograd's loop: one scalar graph per step, MSE loss, p.data -= lr·p.grad; the loss."""
    outs = [mlp(list(row))[0] for row in x]
    loss = sum((o - t) ** 2 for o, t in zip(outs, y)) * (1.0 / len(y))
    mlp.zero_grad()
    loss.backward()
    for p in mlp.parameters():
        p.data -= lr * p.grad
    return loss.data


def tensor_mlp_params(weights: Sequence[tuple]) -> list[tuple[Tensor, Tensor]]:
    """The same weights as leaf Tensors (copies), for `tensor_sgd_step`."""
    return [(Tensor(np.array(W, dtype=np.float64), requires_grad=True),
             Tensor(np.array(b, dtype=np.float64), requires_grad=True)) for W, b in weights]


def tensor_sgd_step(params: list[tuple[Tensor, Tensor]], x: Tensor, y: Tensor,
                    lr: float) -> float:
    """The same step as matrices: h = tanh(h @ W + b) per hidden layer, one graph node per op."""
    h = x
    for k, (W, b) in enumerate(params):
        h = h @ W + b
        h = h.tanh() if k < len(params) - 1 else h
    loss = ((h - y) ** 2).mean()
    loss.backward()
    for p in (p for pair in params for p in pair):
        p.data -= lr * p.grad
        p.zero_grad()
    return loss.item()
