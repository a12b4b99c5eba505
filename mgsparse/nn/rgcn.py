"""R-GCN (Schlichtkrull et al., "Modeling Relational Data with Graph Convolutional Networks",
2018): one weight matrix per relation, a self-loop, normalisation by the relation's in-degree.

    h_i' = W_0·h_i + Σ_r Σ_{j ∈ N_r(i)} (1 / c_{i,r}) · W_r·h_j,     c_{i,r} = |N_r(i)|

with the basis decomposition W_r = Σ_b a_{rb}·V_b (B bases shared by the R relations; with
no bases, each W_r its own). The whole layer is two products: X·[W_1 | … | W_R] (N, R·F_out),
read as (N·R, F_out) rows (row j·R + r is W_r·h_j), and one sparse (N, N·R) operand M whose
entry (i, j·R + r) is 1 / c_{i,r} for each edge j → i of relation r: M·(that) sums every
relation's normalised messages at once, one product over a block-sparse operand. M is built
once per graph (`relation_operand`) and reused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from mgsparse.engine import Tensor
from mgsparse.nn.layers import glorot_
from mgsparse.nn.module import Module, Parameter
from mgsparse.sparse import SparseTensor, spmm


def relation_operand(edge_index: np.ndarray, edge_type: np.ndarray, num_nodes: int,
                     num_relations: int, dtype: Any = np.float32) -> SparseTensor:
    """M (N, N·R): M[i, j·R + r] = 1 / c_{i,r} for each edge j → i (source j, target i) of
    relation r, c_{i,r} the in-degree of i under r (repeated edges count, as messages do)."""
    src, dst = (np.asarray(edge_index[k], np.int64) for k in (0, 1))
    rel = np.asarray(edge_type, np.int64)
    key = dst * num_relations + rel
    counts = np.bincount(key, minlength=num_nodes * num_relations)
    values = 1.0 / counts[key]
    m = sp.csr_matrix((values.astype(dtype), (dst, src * num_relations + rel)),
                      shape=(num_nodes, num_nodes * num_relations))
    return SparseTensor.from_scipy(m, dtype=dtype)


class RGCNConv(Module):
    """One R-GCN layer, F_in -> F_out over R relations (`num_bases` bases, or none)."""

    def __init__(self, in_features: int, out_features: int, num_relations: int,
                 num_bases: int | None = None, bias: bool = True,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        rng = rng if rng is not None else np.random.default_rng()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.num_relations, self.num_bases = int(num_relations), num_bases
        count = num_bases or num_relations
        self.basis = Parameter(np.stack([glorot_((in_features, out_features), rng, dtype)
                                         for _ in range(count)]), dtype=dtype)  # (B, in, out)
        self.coeff = (Parameter(rng.normal(0, 1 / np.sqrt(count), (num_relations, count)),
                                dtype=dtype) if num_bases else None)  # (R, B)
        self.root = Parameter(glorot_((in_features, out_features), rng, dtype), dtype=dtype)
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None

    def relation_weights(self) -> Tensor:
        """(R, in, out): W_r = Σ_b a_rb·V_b, or each relation's own."""
        if self.coeff is None:
            return self.basis
        b, i, o = self.basis.shape
        return (self.coeff @ self.basis.reshape(b, i * o)).reshape(self.num_relations, i, o)

    def forward(self, x: Tensor, operand: SparseTensor) -> Tensor:
        """x (N, in), operand M of `relation_operand` -> (N, out)."""
        n, r, o = x.shape[0], self.num_relations, self.out_features
        w = self.relation_weights().transpose(1, 0, 2).reshape(self.in_features, r * o)
        messages = (x @ w).reshape(n * r, o)  # row j·R + r: W_r·h_j
        out = spmm(operand, messages) + x @ self.root
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return (f"{self.in_features}, {self.out_features}, relations={self.num_relations}, "
                f"bases={self.num_bases}")
