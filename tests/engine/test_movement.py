"""GetItem's backward names the rows its gradient reaches (`kernels.mark_rows`) where they
are few: the rows picked for a loss (`out[train]`), and a column or row block of a gradient
whose own rows are recorded; the values are never changed by it."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from mgsparse import Function, Tensor, kernels

N = 3 * kernels.tuning.MIN_BLOCK_ROWS


def _grad_of(x: Tensor, out: Tensor, seed: int = 0) -> np.ndarray:
    (out * Tensor(np.random.default_rng(seed).standard_normal(out.shape))).sum().backward()
    return x.grad


@pytest.mark.parametrize("pick", ["ints", "repeated", "negative", "mask"])
def test_rows_picked_for_a_loss_are_recorded_on_the_gradient(rng, pick, monkeypatch):
    x = Tensor(rng.standard_normal((N, 4)), requires_grad=True)
    rows = np.sort(rng.choice(N, 50, replace=False))
    idx = {"ints": rows[::-1].copy(), "repeated": np.concatenate([rows, rows[:5]]),
           "negative": rows - N, "mask": np.isin(np.arange(N), rows)}[pick]
    seen = []
    monkeypatch.setattr(kernels, "mark_rows", lambda g, r: seen.append(r) or g)
    grad = _grad_of(x, x[idx])
    assert len(seen) == 1 and np.array_equal(seen[0], rows)
    assert np.array_equal(np.flatnonzero(grad.any(axis=1)), rows)


class Probe(Function):
    """Identity that keeps what its backward received: the rows recorded on it."""

    seen: ClassVar[list] = []

    @staticmethod
    def forward(ctx, a):
        return a.copy()

    @staticmethod
    def backward(ctx, g):
        Probe.seen.append(kernels.known_rows(g))
        return g


@pytest.mark.parametrize("idx, want", [((slice(100, None), slice(1, 4)), [105, 140, 141]),
                                       ((slice(None), slice(0, 3)), [5, 40, 41]),
                                       (slice(100, None, 2), None)])
def test_a_block_of_a_recorded_gradient_carries_its_rows_shifted(idx, want):
    """dx of x[a:, c:d] is g's rows moved down by a; a column block keeps them; a strided
    block records nothing."""
    x = Tensor(np.ones((N, 5)), requires_grad=True)
    out = Probe.apply(x)[idx]
    g = np.zeros(out.shape)
    g[[5, 40, 41]] = 1.0
    Probe.seen = []
    out.backward(kernels.mark_rows(g, np.array([5, 40, 41])))
    assert len(Probe.seen) == 1
    if want is None:
        assert Probe.seen[0] is None
    else:
        assert np.array_equal(Probe.seen[0], want)
        assert np.array_equal(np.flatnonzero(x.grad.any(axis=1)), want)


def test_two_recorded_gradients_add_up_to_the_union_of_their_rows(rng):
    """A tensor used twice receives the sum of two gradients; when both record their rows
    the sum records the union (both zero outside it)."""
    x = Tensor(rng.standard_normal((N, 3)), requires_grad=True)
    h = Probe.apply(x)
    picks = np.array([9, 30]), np.array([30, 2000])
    Probe.seen = []
    (h[picks[0]].sum() + h[picks[1]].sum() * 2.0).backward()
    assert np.array_equal(Probe.seen[0], [9, 30, 2000])
    assert np.array_equal(np.flatnonzero(x.grad.any(axis=1)), [9, 30, 2000])


@pytest.mark.parametrize("rows, picked, recorded", [(N, np.arange(N // 4), True),
                                                    (N, np.arange(N // 4 + 1), False),
                                                    (100, np.array([3, 7]), False)])
def test_many_rows_or_a_small_array_record_nothing(rng, rows, picked, recorded):
    """Up to a quarter of the rows are recorded; past it (the pass would decide anyway), or
    on an array under one row block, nothing is."""
    x = Tensor(rng.standard_normal((rows, 2)), requires_grad=True)
    Probe.seen = []
    Probe.apply(x)[picked].sum().backward()
    assert (Probe.seen[0] is not None) == recorded
    if recorded:
        assert np.array_equal(Probe.seen[0], picked)
