"""Losses and metrics: values against numpy references, gradients against finite differences."""

import numpy as np
import pytest

from mgsparse import Tensor, gradcheck
from mgsparse.errors import ShapeError
from mgsparse.nn import functional as F


def _ref_cross_entropy(z, t, rows):
    z = z[rows].astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(rows)), t[rows]].mean()


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((7, 4))
    t = rng.integers(0, 4, size=7)
    mask = np.array([True, False, True, True, False, True, False])
    return z, t, mask


def test_cross_entropy_matches_numpy_reference(problem):
    z, t, mask = problem
    loss = F.cross_entropy(Tensor(z.astype(np.float32)), t, mask)
    assert loss.dtype == np.float32 and loss.shape == ()
    assert loss.item() == pytest.approx(_ref_cross_entropy(z, t, np.flatnonzero(mask)), rel=1e-6)
    full = F.cross_entropy(Tensor(z), t)
    assert full.item() == pytest.approx(_ref_cross_entropy(z, t, np.arange(7)), rel=1e-12)


def test_cross_entropy_is_one_graph_node(problem):
    z, t, mask = problem
    loss = F.cross_entropy(Tensor(z, requires_grad=True), t, mask)
    assert loss._ctx.fn is F.CrossEntropy


def test_cross_entropy_is_stable_for_huge_logits():
    z = np.array([[1000.0, 0.0, -1000.0], [1000.0, 1000.0, 0.0]], dtype=np.float32)
    x = Tensor(z, requires_grad=True)
    loss = F.cross_entropy(x, np.array([1, 0]))
    # row 0: lse = 1000, loss 1000; row 1: lse = 1000 + log 2, loss log 2
    assert loss.item() == pytest.approx((1000 + np.log(2)) / 2, rel=1e-6)
    loss.backward()
    assert np.all(np.isfinite(x.grad))
    np.testing.assert_allclose(x.grad, [[0.5, -0.5, 0.0], [-0.25, 0.25, 0.0]], atol=1e-7)


@pytest.mark.parametrize("which", ["bool", "index", "repeated", "none"])
def test_cross_entropy_gradcheck(problem, which):
    z, t, mask = problem
    mask = {"bool": mask, "index": np.array([5, 0, 2]), "repeated": np.array([1, 3, 1, 6]),
            "none": None}[which]
    result = gradcheck(lambda x: F.cross_entropy(x, t, mask) * 3.0,
                       [Tensor(z, requires_grad=True)])
    assert result.passed and result.max_abs_err < 1e-8


def test_cross_entropy_masked_rows_get_no_gradient(problem):
    z, t, mask = problem
    x = Tensor(z, requires_grad=True)
    F.cross_entropy(x, t, mask).backward()
    assert np.all(x.grad[~mask] == 0)
    np.testing.assert_allclose(x.grad.sum(axis=1), 0, atol=1e-12)  # softmax − onehot sums to 0


def test_cross_entropy_equals_nll_of_log_softmax(problem):
    z, t, mask = problem
    a, b = Tensor(z, requires_grad=True), Tensor(z, requires_grad=True)
    F.cross_entropy(a, t, mask).backward()
    F.nll_loss(b.log_softmax(-1), t, mask).backward()
    np.testing.assert_allclose(a.grad, b.grad, atol=1e-12)


def test_cross_entropy_ignores_labels_outside_the_mask(problem):
    z, t, mask = problem
    t = t.copy()
    t[~mask] = -1  # unlabeled nodes
    assert F.cross_entropy(Tensor(z), t, mask).item() == pytest.approx(
        _ref_cross_entropy(z, np.where(t < 0, 0, t), np.flatnonzero(mask)))


@pytest.mark.parametrize("target, mask, message", [
    (np.array([0, 1, 9]), None, r"target ids must be in \[0, 2\), got 0..9"),
    (np.array([0, 1]), None, r"target of shape \(2,\) for 3 rows"),
    (np.array([0.0, 1.0, 1.0]), None, "target must hold integer class ids"),
    (np.array([0, 1, 1]), np.zeros(3, dtype=bool), "the mask selects no rows"),
    (np.array([0, 1, 1]), np.ones(4, dtype=bool), r"boolean mask of shape \(4,\) for 3 rows"),
    (np.array([0, 1, 1]), np.array([0, 3]), "mask index out of range for 3 rows"),
])
def test_cross_entropy_bad_input_messages(target, mask, message):
    with pytest.raises(ShapeError, match="cross_entropy: " + message):
        F.cross_entropy(Tensor(np.zeros((3, 2))), target, mask)


def test_nll_loss_value_and_gradcheck(problem):
    z, t, mask = problem
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.flatnonzero(mask)
    loss = F.nll_loss(Tensor(logp), t, mask)
    assert loss.item() == pytest.approx(-logp[rows, t[rows]].mean(), rel=1e-12)
    assert gradcheck(lambda x: F.nll_loss(x, t, mask), [Tensor(z, requires_grad=True)])
    assert gradcheck(lambda x: F.nll_loss(x, t), [Tensor(z, requires_grad=True)])


def test_mse_loss_value_gradcheck_and_shape_check():
    rng = np.random.default_rng(1)
    p, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    assert F.mse_loss(Tensor(p), y).item() == pytest.approx(np.mean((p - y) ** 2), rel=1e-12)
    assert gradcheck(lambda a, b: F.mse_loss(a, b),
                     [Tensor(p, requires_grad=True), Tensor(y, requires_grad=True)])
    with pytest.raises(ShapeError, match=r"mse_loss: pred shape \(4, 3\) != target shape \(3,\)"):
        F.mse_loss(Tensor(p), y[0])


def test_bce_with_logits_value_stability_and_gradcheck():
    x = np.array([[-800.0, -2.0, 0.0], [0.0, 3.0, 800.0]])
    y = np.array([[0.0, 1.0, 1.0], [0.0, 0.3, 1.0]])
    expected = np.mean(np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x))))
    loss = F.binary_cross_entropy_with_logits(Tensor(x), y)
    assert np.isfinite(loss.item()) and loss.item() == pytest.approx(expected, rel=1e-12)
    xs = Tensor(x, requires_grad=True)
    F.binary_cross_entropy_with_logits(xs, y).backward()
    sig = np.array([[0.0, 1 / (1 + np.exp(2.0)), 0.5], [0.5, 1 / (1 + np.exp(-3.0)), 1.0]])
    np.testing.assert_allclose(xs.grad, (sig - y) / 6, atol=1e-15)  # σ(0) − y at the kink
    smooth = np.array([[-1.5, 0.2], [2.0, -0.3]])
    assert gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b),
                     [Tensor(smooth, requires_grad=True),
                      Tensor(np.array([[0.0, 1.0], [0.4, 0.9]]), requires_grad=True)])


def test_accuracy_from_scores_labels_and_masks():
    scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    target = np.array([0, 1, 1, 0])
    assert F.accuracy(Tensor(scores), target) == 0.5
    assert F.accuracy(scores, target, np.array([True, True, False, False])) == 1.0
    assert F.accuracy(np.array([1, 1, 1, 1]), target, np.array([1, 2, 3])) == pytest.approx(2 / 3)
    assert isinstance(F.accuracy(scores, target), float)
    with pytest.raises(ShapeError, match="accuracy: the mask selects no rows"):
        F.accuracy(scores, target, np.zeros(4, dtype=bool))


def test_cross_entropy_counts_a_row_named_by_a_negative_and_a_positive_index_twice():
    """Issue #12, defect 3: mask [-1, 3] on 4 rows names row 3 twice; it got half its gradient."""
    z = Tensor(np.zeros((4, 3)), requires_grad=True)
    t = np.array([0, 1, 2, 0])
    F.cross_entropy(z, t, np.array([-1, 3])).backward()
    expected = Tensor(np.zeros((4, 3)), requires_grad=True)
    F.nll_loss(expected.log_softmax(-1), t, np.array([3, 3])).backward()
    np.testing.assert_allclose(z.grad, expected.grad, atol=1e-15)
    np.testing.assert_allclose(z.grad[3], [-2 / 3, 1 / 3, 1 / 3], atol=1e-15)


@pytest.mark.parametrize("mask", [None, "bool", np.array([5, 0, 2, 0, -1])])  # repeats, −1
def test_targets_checked_once_give_the_checked_functions_bits(problem, mask):
    """`Targets` + `cross_entropy_at` / `accuracy_at` (a task's fast path) are the public
    functions without their checks: the same loss, gradient and accuracy, bit for bit."""
    z, t, bool_mask = problem
    mask = bool_mask if isinstance(mask, str) else mask
    for dtype in (np.float32, np.float64):
        losses, grads = [], []
        for fn in (lambda x: F.cross_entropy(x, t, mask),
                   lambda x: F.cross_entropy_at(x, F.Targets.for_cross_entropy(t, mask, x))):
            x = Tensor(z.astype(dtype), requires_grad=True)
            loss = fn(x)
            loss.backward()
            losses.append(loss.data.tobytes())
            grads.append(x.grad.tobytes())
        assert losses[0] == losses[1] and grads[0] == grads[1]
    pred = z.argmax(axis=1)
    for scores in (z, pred):
        assert F.accuracy_at(scores, F.Targets.for_accuracy(t, mask, scores)) == \
            F.accuracy(scores, t, mask)


def test_targets_check_as_the_public_functions_do():
    with pytest.raises(ShapeError, match=r"cross_entropy: target ids must be in \[0, 2\)"):
        F.Targets.for_cross_entropy(np.array([0, 1, 9]), None, Tensor(np.zeros((3, 2))))
    with pytest.raises(ShapeError, match=r"accuracy: target of shape \(2,\) for 3 rows"):
        F.Targets.for_accuracy(np.array([0, 1]), None, np.zeros(3))
    with pytest.raises(ShapeError, match="accuracy: the mask selects no rows"):
        F.Targets.for_accuracy(np.array([0, 1, 1]), np.zeros(3, dtype=bool), np.zeros(3))


@pytest.mark.parametrize("masked", ["all", "bool", "permuted", "repeated"])
def test_cross_entropy_by_row_blocks_is_bitwise_the_same_for_any_thread_count(masked,
                                                                               monkeypatch):
    """Above the pool's size the per-row work (gather, max, exp, row sums, softmax) and the
    gradient's rows run in row blocks, at one thread too; the two sums over rows run once, so
    loss and gradient do not depend on the thread count, and they are the formula's: for a
    split (increasing rows: each block zeroes its own stretch), for unique rows in any order
    and for repeated rows (added up)."""
    from mgsparse import kernels

    rng = np.random.default_rng(3)
    z = (rng.standard_normal((30_000, 40)) * 4).astype(np.float32)  # 1.2M > 2^20 entries
    y = rng.integers(0, 40, len(z))
    mask = {"all": None, "bool": rng.random(len(z)) < 0.6,
            "permuted": rng.permutation(len(z))[:20_000],
            "repeated": rng.integers(0, len(z), 40_000)}[masked]
    if masked == "bool":
        mask[:1000] = False  # rows before the first block's first row: zeroed all the same
    full = np.full  # a fresh array holds NaN here, so a row left unwritten shows
    monkeypatch.setattr(np, "empty", lambda shape, dtype=float: full(shape, np.nan, dtype))
    results = []
    for threads in (1, 2, 3):
        with kernels.num_threads(threads):
            logits = Tensor(z, requires_grad=True)
            loss = F.cross_entropy(logits, y, mask)
            loss.backward()
            results.append((np.asarray(loss.data).tobytes(), logits.grad.tobytes()))
    assert results[0] == results[1] == results[2]
    rows = (np.arange(len(z)) if mask is None else
            np.flatnonzero(mask) if mask.dtype == bool else mask)
    zm = z[rows].astype(np.float64)  # the formula, in float64: agrees to float32 rounding
    lse = zm.max(axis=1) + np.log(np.exp(zm - zm.max(axis=1, keepdims=True)).sum(axis=1))
    np.testing.assert_allclose(float(loss.data), np.mean(lse - zm[np.arange(len(rows)), y[rows]]),
                               rtol=1e-5)
    d = np.exp(zm - lse[:, None])  # softmax − onehot, over n, added up at repeated rows
    d[np.arange(len(rows)), y[rows]] -= 1
    want = np.zeros(z.shape)
    np.add.at(want, rows, d / len(rows))
    np.testing.assert_allclose(logits.grad, want, atol=1e-9)
    assert np.count_nonzero(logits.grad.any(axis=1)) == len(np.unique(rows))
