"""Optimizers against hand-computed updates, parameter groups, state, clipping, and an MLP fit."""

import math
import tracemalloc

import numpy as np
import pytest

from mgsparse import Tensor
from mgsparse.errors import HyperparameterError, MgsparseError, ShapeError
from mgsparse.nn import Linear, Parameter, ReLU, Sequential
from mgsparse.nn import functional as F
from mgsparse.optim import SGD, Adam, AdamW, clip_grad_norm_


def _scalar(value=1.0):
    return Parameter(np.array([value]), dtype=np.float64)


def _run(opt, params, steps):
    """Minimise L = p² for each parameter (∇ = 2p) for `steps` steps; return the trajectories."""
    history = []
    for _ in range(steps):
        opt.zero_grad()
        sum(((p * p).sum() for p in params), Tensor(np.zeros(()))).backward()
        opt.step()
        history.append([float(p.data[0]) for p in params])
    return history


# ---------------------------------------------------------------- hand-computed first steps


def test_sgd_momentum_weight_decay_by_hand():
    # lr 0.1, μ 0.9, wd 0.1, p0 = 1, ∇ = 2p:
    # step 1: g = 2 + 0.1 = 2.1, b = 2.1, p = 1 − 0.21 = 0.79
    # step 2: g = 1.58 + 0.079 = 1.659, b = 1.89 + 1.659 = 3.549, p = 0.79 − 0.3549 = 0.4351
    p = _scalar()
    hist = _run(SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1), [p], 2)
    assert [h[0] for h in hist] == pytest.approx([0.79, 0.4351], abs=1e-12)


def test_sgd_nesterov_by_hand():
    # step 1: g = 2.1, b = 2.1, g' = 2.1 + 0.9·2.1 = 3.99, p = 1 − 0.399 = 0.601
    # step 2: g = 1.202 + 0.0601 = 1.2621, b = 1.89 + 1.2621 = 3.1521,
    #         g' = 1.2621 + 2.83689 = 4.09899, p = 0.601 − 0.409899 = 0.191101
    p = _scalar()
    hist = _run(SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1), [p], 2)
    assert [h[0] for h in hist] == pytest.approx([0.601, 0.191101], abs=1e-12)


def test_plain_sgd_by_hand():
    p = _scalar(3.0)  # p ← p − 0.25·2p = p/2
    assert [h[0] for h in _run(SGD([p], lr=0.25), [p], 3)] == pytest.approx([1.5, 0.75, 0.375])


def test_adam_and_adamw_differ_by_decoupled_decay():
    # Step 1 of Adam moves every coordinate by lr·g/|g| = lr whatever g is (bias correction):
    # Adam (L2 in the gradient): 1 − 0.1 = 0.9; AdamW: 1·(1 − 0.1·0.1) − 0.1 = 0.89.
    a, w = _scalar(), _scalar()
    assert _run(Adam([a], lr=0.1, weight_decay=0.1), [a], 1)[0][0] == pytest.approx(0.9, abs=1e-9)
    assert _run(AdamW([w], lr=0.1, weight_decay=0.1), [w], 1)[0][0] == pytest.approx(0.89, abs=1e-9)


# ---------------------------------------------------------------- several steps, scalar references


def _ref_sgd(p, steps, lr, mu=0.0, nesterov=False, wd=0.0):
    out, b = [], None
    for _ in range(steps):
        g = 2 * p + wd * p
        if mu:
            b = g if b is None else mu * b + g
            g = g + mu * b if nesterov else b
        p -= lr * g
        out.append(p)
    return out


def _ref_adam(p, steps, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False):
    out, m, v = [], 0.0, 0.0
    for t in range(1, steps + 1):
        g = 2 * p
        if decoupled:
            p *= 1 - lr * wd
        else:
            g += wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        p -= lr * m_hat / (math.sqrt(v_hat) + eps)
        out.append(p)
    return out


def test_sgd_param_groups_over_several_steps():
    p1, p2 = _scalar(1.0), _scalar(-2.0)
    opt = SGD([{"params": [p1], "weight_decay": 0.2},
               {"params": [p2], "lr": 0.05, "nesterov": True}], lr=0.1, momentum=0.8)
    hist = np.array(_run(opt, [p1, p2], 6))
    np.testing.assert_allclose(hist[:, 0], _ref_sgd(1.0, 6, 0.1, 0.8, wd=0.2), rtol=1e-13)
    np.testing.assert_allclose(hist[:, 1], _ref_sgd(-2.0, 6, 0.05, 0.8, nesterov=True),
                               rtol=1e-13)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0


@pytest.mark.parametrize("cls, decoupled", [(Adam, False), (AdamW, True)])
def test_adam_family_param_groups_over_several_steps(cls, decoupled):
    p1, p2 = _scalar(1.0), _scalar(-2.0)
    opt = cls([{"params": [p1], "weight_decay": 0.5}, {"params": [p2], "weight_decay": 0.0}],
              lr=0.05, betas=(0.8, 0.99))
    hist = np.array(_run(opt, [p1, p2], 8))
    ref1 = _ref_adam(1.0, 8, 0.05, 0.8, 0.99, wd=0.5, decoupled=decoupled)
    ref2 = _ref_adam(-2.0, 8, 0.05, 0.8, 0.99)
    np.testing.assert_allclose(hist[:, 0], ref1, rtol=1e-12)
    np.testing.assert_allclose(hist[:, 1], ref2, rtol=1e-12)


def test_adamw_default_weight_decay_and_float32_stays_float32():
    p = Parameter(np.ones((3, 2)))
    opt = AdamW([p])
    assert opt.param_groups[0]["weight_decay"] == 1e-2
    p.grad = np.full((3, 2), 0.5, dtype=np.float32)
    opt.step()
    assert p.dtype == np.float32
    np.testing.assert_allclose(p.data, 1 * (1 - 1e-5) - 1e-3, rtol=1e-6)


def test_params_without_grad_are_skipped():
    p, q = _scalar(1.0), _scalar(1.0)
    opt = Adam([p, q], lr=0.1)
    p.grad = np.array([2.0])
    opt.step()
    assert q.data[0] == 1.0 and id(q) not in opt.state
    assert p.data[0] == pytest.approx(0.9)


def test_step_allocates_nothing_after_the_first():
    p = Parameter(np.ones((500, 200)))  # 400 kB: any temporary would show in the peak
    p.grad = np.full(p.shape, 0.1, dtype=np.float32)
    for opt in [Adam([p], weight_decay=0.1), AdamW([p]),
                SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)]:
        opt.step()
        tracemalloc.start()
        for _ in range(3):
            opt.step()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 20_000, f"{type(opt).__name__} allocated {peak} bytes in a step"


# ---------------------------------------------------------------- state and memory


def test_state_dict_round_trip_continues_the_same_trajectory():
    p = _scalar(1.5)
    opt = Adam([p], lr=0.1)
    _run(opt, [p], 3)
    saved, saved_p = opt.state_dict(), p.data.copy()
    expected = _run(opt, [p], 3)

    q = Parameter(saved_p, dtype=np.float64)
    fresh = Adam([q], lr=0.5)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["lr"] == 0.1 and fresh.state[id(q)]["step"] == 3
    assert _run(fresh, [q], 3) == expected
    assert saved["state"][0]["step"] == 3  # the saved copy did not move on


def test_load_state_dict_checks_layout_and_shapes():
    p = _scalar()
    opt = SGD([p], lr=0.1, momentum=0.9)
    _run(opt, [p], 1)
    saved = opt.state_dict()
    with pytest.raises(MgsparseError, match=r"saved groups hold \[1\] parameters, "
                                            r"this optimizer's hold \[2\]"):
        SGD([_scalar(), _scalar()], lr=0.1).load_state_dict(saved)
    with pytest.raises(ShapeError, match=r"'momentum_buffer' of parameter 0: saved shape \(1,\) "
                                         r"!= parameter shape \(2,\)"):
        SGD([Parameter(np.zeros(2))], lr=0.1).load_state_dict(saved)


def test_state_nbytes_counts_buffers_and_workspace():
    p = Parameter(np.zeros((10, 10)))  # 400 bytes in float32
    opt = Adam([p])
    assert opt.state_nbytes() == 0
    p.grad = np.ones((10, 10), dtype=np.float32)
    opt.step()
    assert opt.state_nbytes() == 2 * 400 + 2 * 400  # exp_avg, exp_avg_sq + two temporaries
    sgd = SGD([p], lr=0.1, momentum=0.9)
    sgd.step()
    assert sgd.state_nbytes() == 400 + 2 * 400


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("make, message", [
    (lambda p: SGD(p, lr=0.0), r"SGD: lr must be in \(0.0, inf\], got 0.0"),
    (lambda p: SGD(p, lr=-1), r"SGD: lr must be in \(0.0, inf\], got -1"),
    (lambda p: SGD(p, lr=0.1, weight_decay=-0.1), "weight_decay must be in"),
    (lambda p: SGD(p, lr=0.1, momentum=-0.5), "momentum must be in"),
    (lambda p: SGD(p, lr=0.1, nesterov=True), "nesterov=True needs a momentum > 0"),
    (lambda p: SGD(p, lr="0.1"), "lr must be a number, got '0.1'"),
    (lambda p: Adam(p, betas=(0.9, 1.0)), r"Adam: betas\[1\] must be in \[0.0, 1.0\), got 1.0"),
    (lambda p: Adam(p, betas=(-0.1, 0.9)), r"betas\[0\] must be in"),
    (lambda p: Adam(p, betas=0.9), "betas must be a pair"),
    (lambda p: AdamW(p, eps=-1e-8), "AdamW: eps must be in"),
    (lambda p: Adam([{"params": p, "weight_decy": 0.1}]),
     "unknown parameter-group option 'weight_decy' \\(did you mean 'weight_decay'\\?\\)"),
    (lambda p: Adam([]), "Adam got an empty parameter list"),
    (lambda p: Adam([{"params": p}, {"params": p}]), "a parameter appears in more than one group"),
    (lambda p: Adam([np.zeros(2)]), "params must be Tensors, got ndarray"),
])
def test_bad_hyperparameters_raise_one_clear_error(make, message):
    with pytest.raises(HyperparameterError, match=message) as info:
        make([_scalar()])
    assert isinstance(info.value, ValueError) and info.value.exit_code == 2


# ---------------------------------------------------------------- clipping


def test_clip_grad_norm_returns_pre_clip_norm_and_scales():
    a, b, c = _scalar(), Parameter(np.zeros(2), dtype=np.float64), _scalar()
    a.grad, b.grad = np.array([3.0]), np.array([0.0, 4.0])  # global norm 5; c has no grad
    norm = clip_grad_norm_([a, b, c], max_norm=1.0)
    assert norm == pytest.approx(5.0)
    coef = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(a.grad, [3.0 * coef], rtol=1e-14)
    np.testing.assert_allclose(b.grad, [0.0, 4.0 * coef], rtol=1e-14)
    assert c.grad is None
    assert clip_grad_norm_([a, b], 1.0) == pytest.approx(1.0, abs=1e-6)


def test_clip_grad_norm_leaves_small_and_nonfinite_grads_alone():
    a = Parameter(np.zeros(2))
    a.grad = np.array([0.3, 0.4], dtype=np.float32)
    assert clip_grad_norm_(a, 1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(a.grad, np.array([0.3, 0.4], dtype=np.float32))
    a.grad = np.array([np.inf, 1.0], dtype=np.float32)
    assert clip_grad_norm_([a], 1.0) == math.inf
    a.grad = np.array([np.nan, 1.0], dtype=np.float32)
    assert math.isnan(clip_grad_norm_([a], 1.0))
    assert a.grad[1] == 1.0
    assert clip_grad_norm_([_scalar()], 1.0) == 0.0  # no gradients at all
    with pytest.raises(HyperparameterError, match="max_norm must be > 0, got 0"):
        clip_grad_norm_([a], 0)


# ---------------------------------------------------------------- end to end


@pytest.mark.parametrize("make_opt", [
    lambda ps: Adam(ps, lr=0.05),
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
])
def test_mlp_learns_a_separable_xor_problem(make_opt):
    rng = np.random.default_rng(0)
    centers = np.array([[1, 1], [-1, -1], [1, -1], [-1, 1]], dtype=np.float32)
    labels = np.repeat([0, 0, 1, 1], 16)
    x = Tensor(np.repeat(centers, 16, axis=0) + 0.2 * rng.standard_normal((64, 2)).astype(np.float32))
    model = Sequential(Linear(2, 16, rng=rng), ReLU(), Linear(16, 2, rng=rng))
    opt = make_opt(model.parameters())
    losses = []
    for _ in range(300):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 0.5 and losses[-1] < 0.05
    assert F.accuracy(model(x), labels) == 1.0


def test_clip_grad_norm_scales_a_0d_parameters_gradient():
    """Issue #12, defect 2: a scalar's gradient was a numpy scalar, missed by the in-place
    scaling: the post-clip norm stayed ~45 (torch: 1.0)."""
    s = Parameter(np.array(2.0), dtype=np.float64)
    v = Parameter(np.ones(3), dtype=np.float64)
    ((s * 40.0) + (v * 10.0).sum()).backward()
    norm = clip_grad_norm_([s, v], max_norm=1.0)
    assert norm == pytest.approx(math.sqrt(40**2 + 3 * 10**2))
    post = math.sqrt(float(s.grad) ** 2 + float((v.grad**2).sum()))
    assert post == pytest.approx(1.0, abs=1e-6)


def test_a_step_between_forward_and_backward_makes_the_backward_fail():
    """Issue #12, defect 6: the backward read the stepped weights and gave [0, 8], not [6, 16]."""
    w = Parameter(np.array([1.0, 2.0]), dtype=np.float64)
    loss = (w * w * Tensor(np.array([3.0, 4.0]))).sum()
    w.grad = np.array([1.0, 1.0])
    SGD([w], lr=1.0).step()  # writes through the read-only guard, bumping w's version
    np.testing.assert_array_equal(w.data, [0.0, 1.0])
    with pytest.raises(MgsparseError, match=r"^Mul\.backward: .*modified in place after the "
                                            r"forward \(version 0, now 1"):
        loss.backward()
