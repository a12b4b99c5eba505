"""A knowledge-graph embedding model: entity and relation tables, and one scorer of `nn.kge`.

`KGEModel.score(heads, relations)` scores every entity as the tail of each query (B, N);
with `candidates` (B, K), only those (sampled negatives). Relation ids at or above
`num_base_relations` are the learned inverses of the reciprocal setting (Lacroix et al. 2018:
each training triple (h, r, t) also trains (t, r⁻¹, h), and a head query (?, r, t) is asked
as (t, r⁻¹, ?)). Without learned inverses, `score_heads` asks the head query through the
scorer's own inverse, which exists for each of the four:

    DistMult  r⁻¹ = r          ComplEx  r⁻¹ = r̄ (the conjugate)
    TransE    r⁻¹ = −r         RotatE   θ⁻¹ = −θ

(s(h, r, t) = s(t, r⁻¹, h) exactly: ⟨h∘r, t⟩ = ⟨t∘r, h⟩; Re⟨h∘r, t̄⟩ = Re⟨t∘r̄, h̄⟩;
‖h + r − t‖ = ‖t − r − h‖; |h∘e^{iθ} − t| = |t∘e^{−iθ} − h|.)

The model also keeps the entity and relation names it was trained with, as a buffer saved with
its parameters (their UTF-8 bytes, one per float32 entry: 0-255 are exact, and a Tensor holds
floating data only), so a run's predictions name what the ids meant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.nn import kge
from mgsparse.nn.module import Buffer, Module, ModuleList, Parameter
from mgsparse.nn.rgcn import RGCNConv

COMPLEX = ("complex", "rotate")  # scorers whose entities are [re | im] halves
_SCORERS = {"distmult": kge.DistMult, "complex": kge.ComplEx, "transe": kge.TransE,
            "rotate": kge.RotatE}


class Embedding(Module):
    """A table of rows, read by id (`kge.Lookup`: a gather, its backward a scatter-add)."""

    def __init__(self, weight: np.ndarray, dtype: Any = np.float32):
        super().__init__()
        self.weight = Parameter(weight, dtype=dtype)

    def forward(self, idx: np.ndarray) -> Tensor:
        return kge.Lookup.apply(self.weight, np.asarray(idx, dtype=np.int64))

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"


def encode_names(entities: tuple[str, ...], relations: tuple[str, ...]) -> np.ndarray:
    """Both vocabularies as one array of bytes (float32 values 0-255): UTF-8 lines, the
    entities, a blank line, the relations."""
    text = "\n".join(entities) + "\n\n" + "\n".join(relations)
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.float32)


def decode_names(blob: np.ndarray) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`encode_names` inverted: (entities, relations)."""
    ents, _, rels = bytes(np.asarray(blob).astype(np.uint8)).decode("utf-8").partition("\n\n")
    return tuple(ents.split("\n")), tuple(rels.split("\n"))


class KGEModel(Module):
    """Entity (N, width) and relation (R or 2R, width) tables with one scorer."""

    def __init__(self, num_entities: int, num_relations: int, scorer: str, dim: int, *,
                 reciprocal: bool = True, margin: float = 0.0, p_norm: int = 2,
                 init_scale: float = 1e-3, names: np.ndarray | None = None,
                 rng: np.random.Generator | None = None, dtype: Any = np.float32):
        super().__init__()
        rng = rng if rng is not None else np.random.default_rng()
        self.scorer, self.dim, self.reciprocal = scorer, int(dim), bool(reciprocal)
        self.margin, self.p_norm = float(margin), int(p_norm)
        self.num_entities, self.num_base_relations = int(num_entities), int(num_relations)
        width = 2 * dim if scorer in COMPLEX else dim
        rel_rows = 2 * num_relations if reciprocal else num_relations
        self.entity = Embedding(rng.normal(0, init_scale, (num_entities, width)), dtype)
        rel = (rng.uniform(-np.pi, np.pi, (rel_rows, dim)) if scorer == "rotate"
               else rng.normal(0, init_scale, (rel_rows, width)))
        self.relation = Embedding(rel, dtype)
        self.names = Buffer(names if names is not None else np.zeros(0), np.float32)
        self.encoder: ModuleList | None = None
        self._graph = None  # the R-GCN's operand (`nn.rgcn.relation_operand`), not learned

    def add_encoder(self, operand: Any, num_relations: int, layers: int,
                    bases: int | None, rng: np.random.Generator, dtype: Any) -> KGEModel:
        """Put `layers` R-GCN layers (Schlichtkrull et al.: an encoder of the entity table over
        the training graph, `operand`, with `num_relations` edge types) under the scorer."""
        width = self.entity.weight.shape[1]
        self.encoder = ModuleList([RGCNConv(width, width, num_relations, bases, rng=rng,
                                            dtype=dtype) for _ in range(layers)])
        self._graph = operand
        return self

    def table(self) -> Tensor:
        """The entity rows the scorer reads: the embeddings, or their R-GCN encoding (ReLU
        between layers, none after the last: DistMult reads signed entries)."""
        x = self.entity.weight
        if self.encoder is None:
            return x
        for i, layer in enumerate(self.encoder):
            x = layer(x, self._graph)
            x = x.relu() if i < len(self.encoder) - 1 else x
        return x

    # ------------------------------------------------------------ scoring

    def _apply(self, h: Tensor, r: Tensor, cands: Tensor) -> Tensor:
        op = _SCORERS[self.scorer]
        s = op.apply(h, r, cands, self.p_norm) if self.scorer == "transe" else op.apply(h, r,
                                                                                          cands)
        return s + self.margin if self.margin else s

    @staticmethod
    def _rows(table: Tensor, idx: np.ndarray) -> Tensor:
        return kge.Lookup.apply(table, np.asarray(idx, dtype=np.int64))

    def _candidates(self, table: Tensor, candidates: np.ndarray | None) -> Tensor:
        return table if candidates is None else self._rows(table, candidates)

    def score(self, heads: np.ndarray, relations: np.ndarray,
              candidates: np.ndarray | None = None) -> Tensor:
        """(B, N) scores of every entity as the tail of (heads[b], relations[b]), or (B, K) of
        `candidates` (B, K) only."""
        table = self.table()
        return self._apply(self._rows(table, heads), self.relation(relations),
                           self._candidates(table, candidates))

    def score_heads(self, tails: np.ndarray, relations: np.ndarray,
                    candidates: np.ndarray | None = None) -> Tensor:
        """(B, N) scores of every entity as the head of (?, relations[b], tails[b]) (or (B, K)
        of `candidates`): through the learned inverse r + R (reciprocal), else through the
        scorer's own inverse."""
        relations = np.asarray(relations, dtype=np.int64)
        if self.reciprocal:
            return self.score(tails, relations + self.num_base_relations, candidates)
        table = self.table()
        return self._apply(self._rows(table, tails), self.inverse(self.relation(relations)),
                           self._candidates(table, candidates))

    def inverse(self, r: Tensor) -> Tensor:
        """The scorer's own r⁻¹ (see the module docstring)."""
        if self.scorer == "distmult":
            return r
        if self.scorer == "complex":
            k = r.shape[-1] // 2
            return r * np.r_[np.ones(k), -np.ones(k)].astype(r.dtype)
        return -r

    def factors(self, heads: np.ndarray, relations: np.ndarray,
                tails: np.ndarray) -> list[Tensor]:
        """The embedding rows a batch reads, for its regulariser (Lacroix et al.'s N3 weighs
        the factors of the batch's triples, not the whole tables)."""
        return [self.entity(heads), self.relation(relations), self.entity(tails)]

    def extra_repr(self) -> str:
        return (f"{self.scorer}, dim={self.dim}, entities={self.num_entities}, "
                f"relations={self.num_base_relations}, reciprocal={self.reciprocal}")
