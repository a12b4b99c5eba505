"""Adam's flat update of a whole group: bitwise the per-parameter update, its state still per
parameter (saved, loaded, counted), and the per-parameter path wherever one flat update
cannot stand in."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import Tensor
from mgsparse.errors import MgsparseError
from mgsparse.nn import Parameter
from mgsparse.optim import Adam, AdamW, optimizers
from mgsparse.optim.flat import FlatGroup

SHAPES = [(7, 5), (5,), (5, 3), (3,), ()]


def _params(seed: int, dtype=np.float32) -> list[Parameter]:
    rng = np.random.default_rng(seed)
    return [Parameter(rng.standard_normal(s), dtype=dtype) for s in SHAPES]


def _grads(rng, params) -> list[np.ndarray]:
    return [rng.standard_normal(p.shape).astype(p.dtype) for p in params]


def _steps(make, flat: bool, steps: int, monkeypatch, seed: int = 0, dtype=np.float32,
           skip: tuple = ()):
    """Run `steps` updates on the same gradients, by the flat update or forced per parameter;
    `skip` lists (step, param index) pairs whose gradient is left out."""
    params = _params(seed, dtype)
    opt = make(params)
    rng = np.random.default_rng(seed + 1)
    with monkeypatch.context() as m:
        if not flat:
            m.setattr(optimizers, "flat_group", lambda *a: None)
        for k in range(steps):
            for i, (p, g) in enumerate(zip(params, _grads(rng, params))):
                p.grad = None if (k, i) in skip else g
            opt.step()
    return params, opt


def _two_groups(cls, **kw):
    return lambda ps: cls([{"params": ps[:2], "weight_decay": 5e-4}, {"params": ps[2:]}],
                          lr=0.01, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_the_flat_update_is_bitwise_the_per_parameter_update(cls, dtype, monkeypatch):
    make = _two_groups(cls, betas=(0.8, 0.99))
    flat, opt = _steps(make, True, 6, monkeypatch, dtype=dtype)
    each, ref = _steps(make, False, 6, monkeypatch, dtype=dtype)
    assert sorted(opt._flat) == [0, 1] and not ref._flat  # both groups ran flat
    for a, b in zip(flat, each):
        assert a.dtype == dtype and a.data.tobytes() == b.data.tobytes()
    for a, b in zip(flat, each):
        for key in ("exp_avg", "exp_avg_sq"):
            assert opt.state[id(a)][key].tobytes() == ref.state[id(b)][key].tobytes()
        assert opt.state[id(a)]["step"] == ref.state[id(b)]["step"] == 6


def test_the_state_stays_per_parameter_views_of_the_flat_buffers(monkeypatch):
    params, opt = _steps(_two_groups(Adam), True, 2, monkeypatch)
    flat = opt._flat[1]
    for p, m in zip(params[2:], flat.m_views):
        assert opt.state[id(p)]["exp_avg"] is m and m.shape == p.shape
        assert np.shares_memory(m, flat.m)
    saved = opt.state_dict()
    assert not any(np.shares_memory(s["exp_avg"], flat.m) for s in saved["state"].values())
    n = sum(p.size for p in params[2:])
    assert opt.state_nbytes() >= sum(f.scratch_nbytes for f in opt._flat.values()) == 2 * 4 * (
        n + sum(p.size for p in params[:2]))


def test_a_loaded_state_continues_the_trajectory_bitwise(monkeypatch):
    """A state loaded into a fresh optimizer (other arrays) is copied into new flat buffers
    on the next step and carries on exactly as the uninterrupted run."""
    make = _two_groups(Adam)
    whole, _ = _steps(make, True, 5, monkeypatch)
    params = _params(0)
    opt = make(params)
    rng = np.random.default_rng(1)
    for k in range(5):
        for p, g in zip(params, _grads(rng, params)):
            p.grad = g
        opt.step()
        if k == 2:  # save, and go on in a fresh optimizer from the saved state
            saved, copies = opt.state_dict(), [p.data.copy() for p in params]
            params = [Parameter(c, dtype=np.float32) for c in copies]
            opt = make(params)
            opt.load_state_dict(saved)
            assert not opt._flat
    for a, b in zip(params, whole):
        assert a.data.tobytes() == b.data.tobytes()


def test_a_parameter_without_a_gradient_is_left_alone(monkeypatch):
    """A step where one parameter has no gradient updates the others (flat, as a smaller
    group) and not it; afterwards their steps differ, so the group goes per parameter, each
    at its own step, as the per-parameter update would."""
    skip = ((1, 0), (2, 3))
    make = _two_groups(Adam)
    flat, opt = _steps(make, True, 5, monkeypatch, skip=skip)
    each, ref = _steps(make, False, 5, monkeypatch, skip=skip)
    for a, b in zip(flat, each):
        assert a.data.tobytes() == b.data.tobytes()
        assert opt.state[id(a)]["step"] == ref.state[id(b)]["step"]
    assert [opt.state[id(p)]["step"] for p in flat] == [4, 5, 5, 4, 5]


def test_mixed_dtypes_in_a_group_take_the_per_parameter_update():
    a, b = Parameter(np.ones(3), dtype=np.float32), Parameter(np.ones(3), dtype=np.float64)
    opt = Adam([a, b], lr=0.1)
    a.grad, b.grad = np.ones(3, np.float32), np.ones(3)
    opt.step()
    assert not opt._flat and a.dtype == np.float32 and b.dtype == np.float64
    np.testing.assert_allclose(a.data, 0.9, rtol=1e-6)
    np.testing.assert_allclose(b.data, 1 - 0.1 / (1 + 1e-8), rtol=1e-15)


def test_a_flat_step_between_forward_and_backward_makes_the_backward_fail():
    """The flat update bumps every parameter's version and lifts their read-only locks, as
    the per-parameter one does: a graph that saved a parameter refuses its backward."""
    w, b = Parameter(np.ones((3, 2))), Parameter(np.zeros(2))
    x = Tensor(np.ones((4, 3), dtype=np.float32))
    opt = Adam([w, b], lr=0.1)
    w.grad, b.grad = np.ones((3, 2), np.float32), np.ones(2, np.float32)
    out = ((x @ w) + b).sum()
    assert not w.data.flags.writeable  # saved by the matmul: locked
    opt.step()
    assert isinstance(opt._flat[0], FlatGroup)
    with pytest.raises(MgsparseError, match="modified in place"):
        out.backward()


@pytest.mark.parametrize("flat", [True, False])
def test_a_parameter_given_another_shape_is_refused_by_either_update(flat, monkeypatch):
    """Model surgery between steps (a parameter's data replaced by another shape): the flat
    group is rebuilt from the old state, which no longer fits, and the step fails loudly
    rather than writing a stale slice, as the per-parameter update fails."""
    if not flat:
        monkeypatch.setattr(optimizers, "flat_group", lambda *a: None)
    a, b = Parameter(np.ones((2, 3))), Parameter(np.ones(3))
    opt = Adam([a, b], lr=0.1)
    a.grad, b.grad = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    opt.step()
    assert bool(opt._flat) == flat
    a.data = np.ones((3, 3), np.float32)
    a.grad = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError):
        opt.step()
