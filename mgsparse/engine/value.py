"""micrograd's scalar `Value`: the reference every vectorised and sparse op is checked against.

One number, its gradient, and a closure that pushes the gradient to its children. Kept
deliberately tiny; the only change from micrograd is an iterative topological walk (a long
chain would exceed Python's recursion limit) over ordered children (deterministic order).
"""

from __future__ import annotations

import math


class Value:
    __slots__ = ("_backward", "_op", "_prev", "data", "grad")

    def __init__(self, data: float, _children: tuple = (), _op: str = ""):
        self.data = float(data)
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = _children
        self._op = _op

    def __repr__(self) -> str:
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    # --- primitives: each forward with its backward beside it
    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, p):
        assert isinstance(p, (int, float)), "Value ** supports constant exponents only"
        out = Value(self.data**p, (self,), f"**{p}")

        def _backward():
            self.grad += (p * self.data ** (p - 1) if p else 0.0) * out.grad  # d(x^0) = 0

        out._backward = _backward
        return out

    def _unary(self, y: float, dy_dx: float, op: str) -> Value:
        out = Value(y, (self,), op)

        def _backward():
            self.grad += dy_dx * out.grad

        out._backward = _backward
        return out

    def __rpow__(self, base):
        """base ** x for a constant base > 0: d/dx = base^x · ln(base)."""
        y = float(base) ** self.data
        return self._unary(y, y * math.log(base), f"{base}**")

    def relu(self):
        return self._unary(max(self.data, 0.0), float(self.data > 0), "relu")

    def tanh(self):
        t = math.tanh(self.data)
        return self._unary(t, 1 - t * t, "tanh")

    def exp(self):
        e = math.exp(self.data)
        return self._unary(e, e, "exp")

    def log(self):
        return self._unary(math.log(self.data), 1 / self.data, "log")

    def sigmoid(self):
        s = 1 / (1 + math.exp(-self.data)) if self.data >= 0 else math.exp(self.data) / (1 + math.exp(self.data))
        return self._unary(s, s * (1 - s), "sigmoid")

    # --- derived through the primitives
    def __neg__(self): return self * -1
    def __radd__(self, other): return self + other
    def __sub__(self, other): return self + (-other)
    def __rsub__(self, other): return other + (-self)
    def __rmul__(self, other): return self * other
    def __truediv__(self, other): return self * other**-1
    def __rtruediv__(self, other): return other * self**-1

    # --- backward
    def backward(self) -> None:
        """Set every ancestor's grad to d(self)/d(ancestor), walking a reverse topological order."""
        order, visited, stack = [], {id(self)}, [(self, 0)]
        while stack:
            node, i = stack.pop()
            if i < len(node._prev):
                stack.append((node, i + 1))
                child = node._prev[i]
                if id(child) not in visited:
                    visited.add(id(child))
                    stack.append((child, 0))
            else:
                order.append(node)
        self.grad = 1.0
        for node in reversed(order):
            node._backward()
