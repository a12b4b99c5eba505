"""The halo exchange as a differentiable op, and the local Â operand that calls it.

Rank p owns the rows `nodes` of H (N, F) and its Â rows need the columns `ext` = owned ∪ halo
(sorted by global id). `HaloExchange` builds H[ext] from the owned rows and the rows other
ranks send; `HaloAdjacency @ h` is then Â_p · H[ext] — the rows of Â·H that p owns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgsparse.data.partition import LocalPart
from mgsparse.distributed.comm import Comm
from mgsparse.engine import Function, Tensor
from mgsparse.sparse import SparseTensor


@dataclass
class HaloPlan:
    """Who sends which rows where: the exchange lists of one part, plus its communicator."""

    comm: Comm
    own_pos: np.ndarray  # (n_p,) positions of the owned rows in ext
    num_ext: int
    send_idx: np.ndarray  # owned rows to send, grouped by destination
    send_counts: np.ndarray  # (K,)
    recv_pos: np.ndarray  # ext positions of the received rows, grouped by source
    recv_counts: np.ndarray  # (K,)

    @classmethod
    def of(cls, part: LocalPart, comm: Comm) -> HaloPlan:
        return cls(comm, part.own_pos, int(part.ext.size), part.send_idx, part.send_counts,
                   part.recv_pos, part.recv_counts)

    def __repr__(self) -> str:
        return (f"HaloPlan(rank={self.comm.rank}, own={self.own_pos.size}, "
                f"halo={self.recv_pos.size}, sends={self.send_idx.size})")


class HaloExchange(Function):
    """(n_p, F) owned rows → (e_p, F) owned + halo rows, in ext order."""

    @staticmethod
    def forward(ctx, h, plan: HaloPlan):
        ctx.plan = plan
        recv = plan.comm.alltoallv(h[plan.send_idx], plan.send_counts, plan.recv_counts)
        out = np.empty((plan.num_ext,) + h.shape[1:], dtype=h.dtype)
        out[plan.own_pos] = h
        out[plan.recv_pos] = recv
        return out

    @staticmethod
    def backward(ctx, g):
        """dh = G[own] + Σ_q (rows q sent back for the halo copies of p's nodes): each halo
        copy's gradient returns to its owner, who adds it to the owned row's."""
        plan: HaloPlan = ctx.plan
        back = plan.comm.alltoallv(g[plan.recv_pos], plan.recv_counts, plan.send_counts)
        dh = g[plan.own_pos]  # fancy indexing copies: safe to add into
        start = 0
        for count in plan.send_counts:  # per destination rank (K of them): indices unique
            idx = plan.send_idx[start:start + count]
            dh[idx] += back[start:start + count]
            start += count
        return dh, None


class HaloAdjacency:
    """The rows of Â a rank owns, (n_p, e_p), used as `adj @ h` on the owned rows h (n_p, F).

    Stands where a GCN layer expects its normalised adjacency, so the single-process `GCN`
    runs unchanged on a part: `GCNConv` computes h = x·W on the owned rows, then `adj @ h`.
    """

    def __init__(self, local: SparseTensor, plan: HaloPlan):
        self.local, self.plan = local, plan

    @property
    def shape(self) -> tuple[int, int]:
        return (self.local.shape[0], self.local.shape[0])

    @property
    def dtype(self):
        return self.local.dtype

    def __matmul__(self, h: Tensor) -> Tensor:
        return self.local @ HaloExchange.apply(h, self.plan)

    def __repr__(self) -> str:
        return f"HaloAdjacency(local={self.local.shape}, nnz={self.local.nnz}, {self.plan!r})"
