"""Knowledge-graph triples: parse ``head<TAB>relation<TAB>tail`` files and index them once.

Pure functions of bytes, no downloads (`kg` does those). The training split defines the
vocabulary: entities and relations are numbered in sorted name order (as PyKEEN does), so the
same train file gives the same ids on every machine, and a validation or test triple naming an
entity or relation the training file never mentions cannot be scored. Those are dropped and
counted, as the literature does (Dettmers et al. filter them from WN18RR's splits); the count
and the first such line are kept in `Triples.dropped` for the run to report.

What is refused, each in one line naming the file and the line: bytes that are not UTF-8, a
line without exactly three tab-separated fields (two, four...), an empty field, a triple that
appears twice (in one split, or in two: a test triple seen in training would be scored as
known), a split with no triple left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mgsparse.errors import DataError

SPLITS = ("train", "valid", "test")
Refuse = Callable[[str], Exception]  # message -> the error to raise (DataError or InputFileError)


@dataclass(frozen=True)
class Triples:
    """One knowledge graph: (n, 3) int64 arrays of (head, relation, tail) ids per split, and the
    names the ids stand for. `dropped[split]` counts validation/test triples removed because
    the training split never names one of their entities or relations; `notes` says where."""

    name: str
    entities: tuple[str, ...]
    relations: tuple[str, ...]
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    dropped: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    def split(self, name: str) -> np.ndarray:
        return {"train": self.train, "valid": self.valid, "val": self.valid,
                "test": self.test}[name]

    def __repr__(self) -> str:
        return (f"Triples({self.name}: {self.num_entities} entities, {self.num_relations} "
                f"relations, {len(self.train)}/{len(self.valid)}/{len(self.test)} triples)")


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_lines(data: bytes, filename: str, refuse: Refuse = DataError) -> tuple[np.ndarray,
                                                                                 np.ndarray]:
    """(names (n, 3) of str, line numbers (n,)) of one split file. Blank lines (a trailing
    newline, a final empty line) are skipped; anything else must be three non-empty fields."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise refuse(f"{filename}:{_line_of(data, err.start)}: not UTF-8 text (byte "
                     f"0x{data[err.start]:02x}); names must be UTF-8") from None
    lines = text.split("\n")
    rows, numbers = [], []
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(f.strip() for f in fields):
            got = (f"{len(fields)} field{'s' * (len(fields) != 1)}" if len(fields) != 3
                   else "an empty field")
            raise refuse(f"{filename}:{number}: expected head<TAB>relation<TAB>tail, got {got}")
        rows.append([f.strip() for f in fields])
        numbers.append(number)
    if not rows:
        raise refuse(f"{filename}: no triples (an empty split)")
    return np.array(rows, dtype=str), np.array(numbers, dtype=np.int64)


def _first_duplicate(keys: np.ndarray) -> tuple[int, int] | None:
    """(first index, repeated index) of the earliest repeated row of `keys` (n, 3), or None."""
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    repeats = np.flatnonzero(first[inverse] != np.arange(len(keys)))
    if not len(repeats):
        return None
    k = int(repeats[0])
    return int(first[inverse[k]]), k


def index_triples(name: str, files: dict[str, bytes], filenames: dict[str, str],
                  refuse: Refuse = DataError) -> Triples:
    """`Triples` from the bytes of the train, valid and test files (`files[split]`), each named
    `filenames[split]` in messages. Ids come from the training split only."""
    names, lines = {}, {}
    for split in SPLITS:
        names[split], lines[split] = read_lines(files[split], filenames[split], refuse)
    _refuse_duplicates(names, lines, filenames, refuse)
    entities = np.unique(names["train"][:, [0, 2]])
    relations = np.unique(names["train"][:, 1])
    ids, dropped, notes = {}, {}, []
    for split in SPLITS:
        ids[split], unseen = _ids(names[split], entities, relations)
        if unseen.any():
            k = int(np.flatnonzero(unseen)[0])
            dropped[split] = int(unseen.sum())
            notes.append(f"{dropped[split]} {split} triple(s) dropped: an entity or relation "
                         f"never seen in training (first: {filenames[split]}:"
                         f"{lines[split][k]})")
            ids[split] = ids[split][~unseen]
            if not len(ids[split]):
                raise refuse(f"{filenames[split]}: no triple left once those naming entities "
                             "or relations never seen in training are dropped (an empty split)")
    return Triples(name, tuple(entities.tolist()), tuple(relations.tolist()), ids["train"],
                   ids["valid"], ids["test"], dropped, tuple(notes))


def _ids(names: np.ndarray, entities: np.ndarray, relations: np.ndarray):
    """(n, 3) int64 ids of `names` by binary search in the sorted vocabularies, and which rows
    name something the vocabulary lacks."""
    out = np.zeros(names.shape, dtype=np.int64)
    unseen = np.zeros(len(names), dtype=bool)
    for col, vocab in ((0, entities), (1, relations), (2, entities)):
        pos = np.clip(np.searchsorted(vocab, names[:, col]), 0, len(vocab) - 1)
        unseen |= vocab[pos] != names[:, col]
        out[:, col] = pos
    return out, unseen


def _refuse_duplicates(names: dict, lines: dict, filenames: dict, refuse: Refuse) -> None:
    """A triple listed twice, in one split or across two, named at its second line."""
    stacked = np.concatenate([names[s] for s in SPLITS])
    where = [(s, int(n)) for s in SPLITS for n in lines[s]]
    pair = _first_duplicate(stacked)
    if pair is None:
        return
    (s1, l1), (s2, l2) = where[pair[0]], where[pair[1]]
    h, r, t = stacked[pair[1]]
    raise refuse(f"{filenames[s2]}:{l2}: duplicate triple ({h}, {r}, {t}), already at "
                 f"{filenames[s1]}:{l1}; each triple must appear once across the splits")
