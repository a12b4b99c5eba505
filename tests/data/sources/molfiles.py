"""Small SDF and SMILES files the molecule tests write: fixed V2000 columns, as RDKit writes."""

from __future__ import annotations

from pathlib import Path


def atom_line(symbol: str, code: int = 0) -> str:
    """x y z (10 columns each), the symbol in columns 32-34, the charge code in 37-39."""
    return f"{0.0:10.4f}{0.0:10.4f}{0.0:10.4f} {symbol:<3} 0{code:3d}" + "  0" * 10


def bond_line(a: int, b: int, order: int = 1, stereo: int = 0) -> str:
    return f"{a:3d}{b:3d}{order:3d}{stereo:3d}"


def record(title: str, symbols: list[str], bonds: list[tuple], props: dict[str, str],
           m_lines: tuple[str, ...] = (), counts: tuple[int, int] | None = None,
           codes: dict[int, int] | None = None) -> list[str]:
    """One molfile and its data items, ending in $$$$; `counts` overrides the counts line."""
    na, nb = counts if counts is not None else (len(symbols), len(bonds))
    lines = [title, "     RDKit          2D", "",
             f"{na:3d}{nb:3d}  0  0  0  0  0  0  0  0999 V2000"]
    lines += [atom_line(s, (codes or {}).get(k, 0)) for k, s in enumerate(symbols)]
    lines += [bond_line(*b) for b in bonds]
    lines += [*m_lines, "M  END"]
    for k, (name, value) in enumerate(props.items()):
        lines += [f">  <{name}>  ({k + 1}) ", value, ""]
    return [*lines, "$$$$"]


ETHANOL = ("ethanol", ["C", "C", "O"], [(1, 2, 1), (2, 3, 1)], {"NAME": "ethanol", "SOL": "1.1",
                                                               "CLS": "(C) high"})
ACETATE = ("acetate", ["C", "C", "O", "O"], [(1, 2, 1), (2, 3, 2), (2, 4, 1)],
           {"NAME": "acetate", "SOL": "0.5", "CLS": "(B) medium"})
ETHYNE = ("ethyne", ["C", "C", "Cl"], [(1, 2, 3, 0), (2, 3, 1, 0)],
          {"NAME": "chloroethyne", "SOL": "-1.25", "CLS": "(A) low"})


def write_sdf(path: Path, records: list[list[str]], newline: str = "\n") -> Path:
    path.write_bytes(newline.join(line for r in records for line in r).encode() +
                     newline.encode())
    return path


def three_molecules(path: Path, newline: str = "\n") -> Path:
    """Ethanol, acetate (its O⁻ charged by M  CHG), chloroethyne: 10 atoms, 7 bonds."""
    return write_sdf(path, [record(*ETHANOL),
                            record(*ACETATE, m_lines=("M  CHG  1   4  -1",)),
                            record(*ETHYNE)], newline)


def toy_molecules(path: Path, count: int, seed: int = 0) -> Path:
    """`count` random chains of 3-12 atoms (C, N, O, some double bonds) whose property Y is a
    sum over their atoms (0.3 per C, -0.2 per N, -0.8 per O) plus a little noise: a target
    a GIN readout can learn."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weight = {"C": 0.3, "N": -0.2, "O": -0.8}
    records = []
    for k in range(count):
        symbols = list(rng.choice(["C", "C", "N", "O"], int(rng.integers(3, 13))))
        bonds = [(i + 1, i + 2, int(rng.choice([1, 1, 2]))) for i in range(len(symbols) - 1)]
        y = sum(weight[s] for s in symbols) + rng.normal(0, 0.05)
        records.append(record(f"m{k}", symbols, bonds, {"Y": f"{y:.4f}"}))
    return write_sdf(path, records)
