"""Knowledge-graph embedding scorers as `Function`s: DistMult, ComplEx, TransE, RotatE.

Each scores a batch of queries (h, r) against candidate tails in one op, forward and backward
side by side. The candidates are either every entity, E (N, D), giving (B, N) scores (1-N
scoring), or each query's own, T (B, K, D), giving (B, K) (sampled negatives). With q the
query's combination of h and r:

    DistMult   q = h ∘ r                 s(t) = ⟨q, t⟩                   (Yang et al. 2015)
    ComplEx    q = h ∘ r (complex)        s(t) = Re⟨q, t̄⟩ = ⟨q, t⟩ on halves (Trouillon 2016)
    TransE     q = h + r                 s(t) = −‖q − t‖_p               (Bordes et al. 2013)
    RotatE     q = h ∘ e^{iθ} (complex)   s(t) = −Σ_k |q_k − t_k|          (Sun et al. 2019)

A complex vector is stored as two real halves [re | im] along the last axis (K complex
numbers: 2K reals), so ComplEx's Re⟨h ∘ r, t̄⟩ is the real dot product of [q_re | q_im] with
[t_re | t_im]; RotatE's relation is its K phases θ. The margin γ of TransE and RotatE is added
by the model (a constant: softmax cross-entropy ignores it, sigmoid losses read it).

`Lookup` (rows of an embedding table, scatter-add backward) feeds them; `N3` is the weighted
nuclear-3 regulariser of Lacroix et al. (2018), Σ |x|³ (a complex entry's modulus cubed).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Function

EPS = 1e-12  # a distance this small counts as this, so its gradient direction stays finite
CHUNK = 1 << 22  # entries of a (B, N, K) difference built at once (RotatE, TransE-L1)


# ---------------------------------------------------------------- helpers


def _halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = x.shape[-1] // 2
    return x[..., :k], x[..., k:]


def cmul(a: np.ndarray, b: np.ndarray, conj_b: bool = False) -> np.ndarray:
    """a ∘ b (or a ∘ b̄) on [re | im] halves."""
    ar, ai = _halves(a)
    br, bi = _halves(b)
    if conj_b:
        bi = -bi
    return np.concatenate([ar * br - ai * bi, ar * bi + ai * br], axis=-1)


def contract(q: np.ndarray, E: np.ndarray) -> np.ndarray:
    """s[b, n] = ⟨q_b, E_n⟩ (E (N, D) shared) or ⟨q_b, E_bk⟩ (E (B, K, D) per query)."""
    return q @ E.T if E.ndim == 2 else (E @ q[:, :, None])[..., 0]


def grad_q(g: np.ndarray, E: np.ndarray) -> np.ndarray:
    """dq = g·E: the gradient of `contract` with respect to q."""
    return g @ E if E.ndim == 2 else (g[:, None, :] @ E)[:, 0, :]


def grad_E(g: np.ndarray, q: np.ndarray, E: np.ndarray) -> np.ndarray:
    """dE = gᵀ·q (shared E) or g[b, k]·q_b (per query): the gradient of `contract` in E."""
    return g.T @ q if E.ndim == 2 else g[:, :, None] * q[:, None, :]


def _row_chunks(b: int, per_row: int):
    step = max(1, CHUNK // max(per_row, 1))
    return [slice(i, min(i + step, b)) for i in range(0, b, step)] or [slice(0, 0)]


def _cands(E: np.ndarray, rows: slice) -> np.ndarray:
    """The candidates of query rows `rows`, broadcastable against q[rows, None, :]."""
    return E[None] if E.ndim == 2 else E[rows]


def _unbatch(dE: np.ndarray, E: np.ndarray) -> np.ndarray:
    return dE.sum(axis=0) if E.ndim == 2 else dE


# ---------------------------------------------------------------- the lookup


class Lookup(Function):
    @staticmethod
    def forward(ctx, w, idx):
        ctx.shape, ctx.idx = w.shape, idx
        return w[idx]

    @staticmethod
    def backward(ctx, g):
        """dW[i] = Σ_{k: idx_k = i} g_k (a scatter-add: repeated rows add), as one sparse
        product Sᵀ·g with S the (B, N) one-hot rows of idx (np.add.at is ~10x slower)."""
        idx = ctx.idx.reshape(-1)
        g2 = g.reshape(len(idx), *ctx.shape[1:])
        onehot = sp.csr_matrix((np.ones(len(idx), g.dtype), (idx, np.arange(len(idx)))),
                               shape=(ctx.shape[0], len(idx)))
        return np.asarray(onehot @ g2).reshape(ctx.shape), None


# ---------------------------------------------------------------- bilinear scorers


class DistMult(Function):
    @staticmethod
    def forward(ctx, h, r, E):
        ctx.save_for_backward(h, r, E)
        return contract(h * r, E)

    @staticmethod
    def backward(ctx, g):
        """dq = g·E, dh = dq ∘ r, dr = dq ∘ h, dE = gᵀ·(h ∘ r)."""
        h, r, E = ctx.saved_tensors
        nh, nr, nE = ctx.needs_input_grad
        dq = grad_q(g, E) if nh or nr else None
        return (dq * r if nh else None, dq * h if nr else None,
                grad_E(g, h * r, E) if nE else None)


class ComplEx(Function):
    @staticmethod
    def forward(ctx, h, r, E):
        ctx.save_for_backward(h, r, E)
        return contract(cmul(h, r), E)

    @staticmethod
    def backward(ctx, g):
        """dq = g·E, dh = dq ∘ r̄, dr = dq ∘ h̄ (complex), dE = gᵀ·(h ∘ r)."""
        h, r, E = ctx.saved_tensors
        nh, nr, nE = ctx.needs_input_grad
        dq = grad_q(g, E) if nh or nr else None
        return (cmul(dq, r, conj_b=True) if nh else None,
                cmul(dq, h, conj_b=True) if nr else None,
                grad_E(g, cmul(h, r), E) if nE else None)


# ---------------------------------------------------------------- distance scorers


class TransE(Function):
    @staticmethod
    def forward(ctx, h, r, E, p):
        q = h + r
        ctx.save_for_backward(q, E)
        ctx.p = p
        if p == 2 and E.ndim == 2:  # ‖q − e‖² = |q|² − 2q·e + |e|²: one product, no (B, N, D)
            sq = (q * q).sum(1)[:, None] - 2 * (q @ E.T) + (E * E).sum(1)[None, :]
            d = np.sqrt(np.maximum(sq, 0))
        else:
            d = np.concatenate([_norm(q[c, None, :] - _cands(E, c), p)
                                for c in _row_chunks(len(q), E.shape[-2] * E.shape[-1])])
        ctx.d = d
        return -d

    @staticmethod
    def backward(ctx, g):
        """ds/dq = −(q − t)/‖q − t‖ (p = 2) or −sign(q − t) (p = 1); dt = −ds/dq; dh = dr = dq."""
        q, E = ctx.saved_tensors
        p, d = ctx.p, ctx.d
        nh, nr, nE = ctx.needs_input_grad[:3]
        if p == 2 and E.ndim == 2:
            w = g / np.maximum(d, EPS)  # (B, N)
            dq = w @ E - w.sum(1)[:, None] * q
            dE = w.T @ q - w.sum(0)[:, None] * E if nE else None
        else:
            dq, parts = np.zeros_like(q), []
            for c in _row_chunks(len(q), E.shape[-2] * E.shape[-1]):
                diff = q[c, None, :] - _cands(E, c)  # (b, N or K, D)
                unit = np.sign(diff) if p == 1 else diff / np.maximum(d[c], EPS)[..., None]
                gu = g[c][..., None] * unit
                dq[c] = -gu.sum(1)
                parts.append(gu)
            dE = None
            if nE:
                dE = (sum(part.sum(0) for part in parts) if E.ndim == 2
                      else np.concatenate(parts))
        return (dq if nh else None, dq if nr else None, dE, None)


def _norm(diff: np.ndarray, p: int) -> np.ndarray:
    return np.abs(diff).sum(-1) if p == 1 else np.sqrt((diff * diff).sum(-1))


class RotatE(Function):
    @staticmethod
    def forward(ctx, h, theta, E):
        rot = np.concatenate([np.cos(theta), np.sin(theta)], axis=-1)
        q = cmul(h, rot)
        ctx.save_for_backward(q, rot, E)
        k = q.shape[-1] // 2
        out = [_modulus(q[c, None, :] - _cands(E, c), k).sum(-1)
               for c in _row_chunks(len(q), E.shape[-2] * E.shape[-1])]
        return -np.concatenate(out)

    @staticmethod
    def backward(ctx, g):
        """dq = −Σ_t g·(q − t)/|q − t| per complex entry, dt its opposite; dh = dq ∘ e^{−iθ},
        dθ = −dq_re·q_im + dq_im·q_re."""
        q, rot, E = ctx.saved_tensors
        nh, nt, nE = ctx.needs_input_grad
        k = q.shape[-1] // 2
        dq, parts = np.zeros_like(q), []
        for c in _row_chunks(len(q), E.shape[-2] * E.shape[-1]):
            diff = q[c, None, :] - _cands(E, c)  # (b, N or K, 2K)
            m = np.maximum(_modulus(diff, k), EPS)  # (b, N or K, K)
            gu = g[c][..., None] * diff / np.concatenate([m, m], axis=-1)
            dq[c] = -gu.sum(1)
            parts.append(gu)
        dE = None
        if nE:
            dE = sum(part.sum(0) for part in parts) if E.ndim == 2 else np.concatenate(parts)
        dre, dim = _halves(dq)
        qr, qi = _halves(q)
        return (cmul(dq, rot, conj_b=True) if nh else None,
                (-dre * qi + dim * qr) if nt else None, dE)


def _modulus(diff: np.ndarray, k: int) -> np.ndarray:
    re, im = diff[..., :k], diff[..., k:]
    return np.sqrt(re * re + im * im)


# ---------------------------------------------------------------- regulariser and loss


class N3(Function):
    @staticmethod
    def forward(ctx, x, complex_halves):
        ctx.save_for_backward(x)
        ctx.halves = complex_halves
        if complex_halves:
            re, im = _halves(x)
            return np.asarray(((re * re + im * im) ** 1.5).sum(), dtype=x.dtype)
        return np.asarray((np.abs(x) ** 3).sum(), dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        """d Σ|x|³ / dx = 3·x·|x| (|x| a complex entry's modulus, the same for both halves)."""
        (x,) = ctx.saved_tensors
        if ctx.halves:
            re, im = _halves(x)
            m = np.sqrt(re * re + im * im)
            m = np.concatenate([m, m], axis=-1)
        else:
            m = np.abs(x)
        return 3 * g * x * m, None


class WeightedSoftplus(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.w = w
        return np.asarray((w * (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))))).sum(),
                          dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        """d Σ w·softplus(x) / dx = w·σ(x) (w a constant: RotatE's detached weights)."""
        (x,) = ctx.saved_tensors
        return g * ctx.w * (0.5 * (1 + np.tanh(0.5 * x))), None
