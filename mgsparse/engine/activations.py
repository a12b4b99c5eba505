"""The activations: each a `Function`, forward and backward side by side.

The bodies run in `kernels.elementwise`: by row blocks on the pool, bitwise the same for any
thread count, and selects computed as max/min of the same floats (numpy's `where` on a random
sign pattern costs about ten times the arithmetic it chooses between), edges included (±0,
±inf, NaN, subnormals: tests/engine/test_activations.py compares bits).
"""

from __future__ import annotations

import numpy as np

from mgsparse import kernels
from mgsparse.engine.masks import drawn
from mgsparse.engine.tensor import Function


class Relu(Function):
    def forward(ctx, x):
        out, mask = kernels.relu(x, keep_mask=ctx.needs_input_grad[0])
        if mask is not None:  # no backward to follow (an evaluation pass): nothing to keep
            ctx.save_for_backward(mask)
        return out

    def backward(ctx, g):
        """dx = g·[x > 0]."""
        return kernels.multiply(g, ctx.saved_tensors[0])


class ReluDropout(Function):
    """relu(x) then inverted dropout as one op (a hidden layer's activation and the next
    layer's dropout, `nn.stack`): the floats of Relu then Dropout, one pass and one (N, F)
    array fewer, and no mask kept: out > 0 exactly where both derivatives are nonzero."""

    def forward(ctx, x, keep, scale, out=None):
        """`keep` and `out` as Dropout's: a mask or a `masks.Draw`; a buffer or a pool."""
        out = kernels.relu_dropout(x, drawn(keep, x.shape), scale, out)
        ctx.save_for_backward(out)
        ctx.scale = scale
        return out

    def backward(ctx, g):
        """dx = g·scale·[out > 0] (relu' · dropout': keep·[x > 0]·scale)."""
        dx = kernels.relu_dropout_backward(g, ctx.saved_tensors[0], ctx.scale)
        return kernels.same_rows(dx, g), None, None, None


class LeakyRelu(Function):
    def forward(ctx, x, slope):
        out, mask = kernels.leaky_relu(x, slope)
        ctx.save_for_backward(mask)
        ctx.slope = slope
        return out

    def backward(ctx, g):
        """dx = g·(1 if x > 0 else slope)."""
        return kernels.leaky_relu_backward(g, ctx.saved_tensors[0], ctx.slope), None


class Elu(Function):
    def forward(ctx, x, alpha):
        out, mask = kernels.elu(x, alpha)
        ctx.save_for_backward(mask, out)
        ctx.alpha = alpha
        return out

    def backward(ctx, g):
        """dx = g·(1 if x > 0 else elu(x) + alpha)."""
        return kernels.elu_backward(g, *ctx.saved_tensors, ctx.alpha), None


class Sigmoid(Function):
    def forward(ctx, x):
        out = kernels.sigmoid(x)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, g):
        """dx = g·s·(1 - s)."""
        s = ctx.saved_tensors[0]
        return g * s * (1 - s)


class Tanh(Function):
    def forward(ctx, x):
        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, g):
        """dx = g·(1 - tanh²x)."""
        t = ctx.saved_tensors[0]
        return g * (1 - t * t)
