"""Reading SDF (V2000 molfiles joined by ``$$$$``): pure parsing, plain Python and numpy.

One record, as RDKit and most tools write it (fixed columns, lines counted from 1)::

    n-pentane                                  title (the molecule's name)
         RDKit          2D                     program line
                                               comment line
      5  4  0  0  0  0  0  0  0  0999 V2000    counts: atoms (cols 1-3), bonds (cols 4-6)
        0.2606    0.1503    0.0000 C   0  0    atom: x y z, symbol (cols 32-34), mass
    ...                                        difference, charge code (cols 37-39)
      1  2  1  0                               bond: atom, atom (1-based), order, stereo
    M  CHG  2  11   1  12  -1                  charges: count, then (atom, charge) pairs
    M  END
    >  <SOL>  (1)                              a data item: its name between < and >,
    -3.18                                      its value the lines up to a blank one
                                               (several lines join with a newline)
    $$$$

What is read: element symbols; charges (``M  CHG`` lines, which replace every atom-block
charge when present, as the format says; else the atom block's code: 1, 2, 3 = +3, +2, +1 and
5, 6, 7 = −1, −2, −3); bond orders 1, 2, 3 and 4 (aromatic) and the stereo field; the data
items as strings. Line endings may be LF or CRLF. Other ``M`` lines (isotopes, radicals) are
skipped.

What is refused, with one line naming the file, the molecule (counted from 1) and the line
(`DataError`; the caller makes it an `InputFileError` when the file is the user's): a counts
line that cannot be read or that disagrees with the blocks below it, a V3000 record, an atom
or bond line that cannot be read, a bond to an atom outside its molecule (or to itself, or a
pair bonded twice), a bond order other than 1-4 (the query orders 5-8 included), a record
without ``M  END``, a molecule without atoms, a file without molecules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mgsparse.errors import DataError

BOND_ORDERS = (1, 2, 3, 4)  # single, double, triple, aromatic: the one-hot's columns
CHARGE_CODES = {0: 0, 1: 3, 2: 2, 3: 1, 4: 0, 5: -1, 6: -2, 7: -3}  # 4: doublet radical


@dataclass
class SdfRecord:
    """One molecule as the file gives it: atom ids and bond ends from 0."""

    title: str
    line: int  # the record's first line in the file (from 1)
    symbols: list[str]
    charges: np.ndarray  # (A,) int64
    bonds: np.ndarray  # (B, 2) int64, atom ids from 0
    orders: np.ndarray  # (B,) int64 in BOND_ORDERS
    stereo: np.ndarray  # (B,) int64, the stereo field as written (0: none)
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The NAME data item where there is one, else the title line."""
        return self.properties.get("NAME", self.title)


def read_text(path: Path) -> list[str]:
    """The file's lines without their LF or CRLF endings; a file that is not UTF-8 text is
    refused naming the byte."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return [line.rstrip("\r") for line in text.split("\n")]


def read_sdf(path: str | Path) -> list[SdfRecord]:
    """Every record of the SDF file `path`, in order (see the module docstring)."""
    path = Path(path)
    lines = read_text(path)
    records, start = [], 0
    for i, line in enumerate(lines):
        if line.strip() == "$$$$":
            records.append(_record(path, lines, start, i, len(records) + 1))
            start = i + 1
    if any(line.strip() for line in lines[start:]):  # a last record without its $$$$
        records.append(_record(path, lines, start, len(lines), len(records) + 1))
    if not records:
        raise DataError(f"{path}: no molecules (no record ending in $$$$)")
    return records


class _Where:
    """`at(line)`: the prefix of every message about one record."""

    def __init__(self, path: Path, number: int):
        self.path, self.number = path, number

    def __call__(self, index: int) -> str:
        return f"{self.path}: molecule {self.number} (line {index + 1})"


def _record(path: Path, lines: list[str], start: int, end: int, number: int) -> SdfRecord:
    """The record in lines[start:end] (its $$$$ excluded)."""
    at = _Where(path, number)
    if end - start < 4:
        raise DataError(f"{at(start)}: {end - start} lines before $$$$, expected a header, "
                        "a counts line and the blocks")
    n_atoms, n_bonds = _counts(lines[start + 3], at(start + 3))
    if n_atoms == 0:
        raise DataError(f"{at(start + 3)}: an empty molecule (the counts line gives 0 atoms)")
    atoms_at, bonds_at, props_at = start + 4, start + 4 + n_atoms, start + 4 + n_atoms + n_bonds
    if props_at > end:
        raise DataError(f"{at(start + 3)}: the counts line gives {n_atoms} atoms and {n_bonds} "
                        f"bonds, but the record has {end - atoms_at} lines below it")
    symbols, charges = _atoms(lines, atoms_at, n_atoms, at)
    bonds, orders, stereo = _bonds(lines, bonds_at, n_bonds, n_atoms, at)
    m_end = _properties_block(lines, props_at, end, n_atoms, n_bonds, charges, at)
    return SdfRecord(lines[start].strip(), start + 1, symbols, charges, bonds, orders, stereo,
                     _data_items(lines, m_end + 1, end))


def _counts(line: str, where: str) -> tuple[int, int]:
    if "V3000" in line:
        raise DataError(f"{where}: a V3000 record; only V2000 molfiles are read")
    try:
        n_atoms, n_bonds = int(line[0:3]), int(line[3:6])
    except ValueError:
        n_atoms = n_bonds = -1
    if n_atoms < 0 or n_bonds < 0 or len(line) < 6:
        raise DataError(f"{where}: counts line {line.strip()!r} does not start with the atom "
                        "and bond counts (aaabbb..., 3 columns each)")
    return n_atoms, n_bonds


def _atoms(lines: list[str], first: int, count: int, at: _Where
           ) -> tuple[list[str], np.ndarray]:
    symbols, charges = [], np.zeros(count, dtype=np.int64)
    for k in range(count):
        line = lines[first + k]
        symbol, code = line[31:34].strip(), 0
        try:
            [float(line[c:c + 10]) for c in (0, 10, 20)]
            code = int(line[36:39]) if line[36:39].strip() else 0
        except ValueError:
            symbol = ""
        if not symbol or not symbol[0].isalpha() or code not in CHARGE_CODES:
            raise DataError(f"{at(first + k)}: atom {k + 1} of {count} (the counts line's): "
                            f"{line.strip()!r} is not an atom line (x y z symbol ...)")
        symbols.append(symbol)
        charges[k] = CHARGE_CODES[code]
    return symbols, charges


def _bonds(lines: list[str], first: int, count: int, n_atoms: int, at: _Where
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = np.zeros((count, 4), dtype=np.int64)
    seen: set[tuple[int, int]] = set()
    for k in range(count):
        line = lines[first + k]
        try:
            rows[k] = [int(line[0:3]), int(line[3:6]), int(line[6:9]),
                       int(line[9:12]) if line[9:12].strip() else 0]
        except ValueError:
            raise DataError(f"{at(first + k)}: bond {k + 1} of {count} (the counts line's): "
                            f"{line.strip()!r} is not a bond line (atom atom order stereo)"
                            ) from None
        a, b, order = rows[k, :3]
        if not (1 <= a <= n_atoms and 1 <= b <= n_atoms):
            bad = a if not 1 <= a <= n_atoms else b
            raise DataError(f"{at(first + k)}: bond {k + 1} joins atom {bad}, outside the "
                            f"molecule's atoms 1..{n_atoms}")
        if a == b or (min(a, b), max(a, b)) in seen:
            what = "an atom to itself" if a == b else f"atoms {a} and {b} a second time"
            raise DataError(f"{at(first + k)}: bond {k + 1} joins {what}")
        seen.add((min(a, b), max(a, b)))
        if order not in BOND_ORDERS:
            raise DataError(f"{at(first + k)}: bond {k + 1} has order {order}, not one of "
                            "1 (single), 2 (double), 3 (triple), 4 (aromatic)")
    return rows[:, :2] - 1, rows[:, 2].copy(), rows[:, 3].copy()


def _properties_block(lines: list[str], first: int, end: int, n_atoms: int, n_bonds: int,
                      charges: np.ndarray, at: _Where) -> int:
    """Read the ``M  CHG`` lines into `charges` (in place: this record's own array) up to
    ``M  END``; return that line's index."""
    if first < end and lines[first][:3].strip().isdigit():
        raise DataError(f"{at(first)}: {lines[first].strip()!r} follows the counts line's "
                        f"{n_atoms} atoms and {n_bonds} bonds: the counts line is wrong")
    charged = False
    for i in range(first, end):
        line = lines[i]
        if line.startswith("M  END"):
            return i
        if line.startswith("M  CHG"):
            if not charged:
                charges[:] = 0  # M CHG lines replace every atom-block charge
                charged = True
            _charge_line(line, i, n_atoms, charges, at)
    raise DataError(f"{at(first)}: no 'M  END' line before the record ends (line {end + 1})")


def _charge_line(line: str, i: int, n_atoms: int, charges: np.ndarray, at: _Where) -> None:
    try:
        values = [int(v) for v in line[6:].split()]
    except ValueError:
        values = []
    if not values or len(values) != 1 + 2 * values[0]:
        raise DataError(f"{at(i)}: {line.strip()!r} is not 'M  CHG n' and n (atom, charge) "
                        "pairs")
    for atom, charge in zip(values[1::2], values[2::2]):
        if not 1 <= atom <= n_atoms:
            raise DataError(f"{at(i)}: charge on atom {atom}, outside the molecule's atoms "
                            f"1..{n_atoms}")
        charges[atom - 1] = charge


def _data_items(lines: list[str], first: int, end: int) -> dict[str, str]:
    """``> <NAME>`` items: the name between the first < and the next >, the value the lines
    up to a blank one."""
    items, i = {}, first
    while i < end:
        line = lines[i]
        if line.startswith(">") and "<" in line and ">" in line[line.index("<"):]:
            name = line[line.index("<") + 1:line.index(">", line.index("<"))]
            value, i = [], i + 1
            while i < end and lines[i].strip():
                value.append(lines[i].strip())
                i += 1
            items[name] = "\n".join(value)
        i += 1
    return items


# --- features ------------------------------------------------------------------------------------

_PERIODIC_TABLE = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As "
    "Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd "
    "Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am "
    "Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og")
ELEMENTS = tuple(_PERIODIC_TABLE.split())
ATOMIC_NUMBER = {symbol: z for z, symbol in enumerate(ELEMENTS, start=1)}
MAX_DEGREE = 5  # degree one-hot: 0, 1, 2, 3, 4 and "5 or more"


def element_vocabulary(records: list[SdfRecord]) -> tuple[str, ...]:
    """The elements of `records` (the training file), in order of atomic number (symbols
    that are no element, such as R# or *, last, alphabetically)."""
    found = {s for r in records for s in r.symbols}
    return tuple(sorted(found, key=lambda s: (ATOMIC_NUMBER.get(s, 999), s)))


def atom_features(records: list[SdfRecord], vocabulary: tuple[str, ...]) -> np.ndarray:
    """(N, V + 1 + 1 + 6) float32, every atom of every record in order:

    - one-hot element over `vocabulary` (V columns), then one column for an element outside
      it (a test molecule's rare element);
    - the formal charge, as a number;
    - one-hot heavy-atom degree (bonds in the file): 0, 1, 2, 3, 4, 5 or more.
    """
    column = {s: k for k, s in enumerate(vocabulary)}
    v = len(vocabulary)
    symbols = [s for r in records for s in r.symbols]
    element = np.fromiter((column.get(s, v) for s in symbols), dtype=np.int64,
                          count=len(symbols))
    charges = np.concatenate([r.charges for r in records]).astype(np.float32)
    degree = np.concatenate([np.bincount(r.bonds.ravel(), minlength=len(r.symbols))
                             for r in records])
    x = np.zeros((len(symbols), v + 2 + MAX_DEGREE + 1), dtype=np.float32)
    rows = np.arange(len(symbols))
    x[rows, element] = 1.0
    x[:, v + 1] = charges
    x[rows, v + 2 + np.minimum(degree, MAX_DEGREE)] = 1.0
    return x


def bond_features(orders: np.ndarray) -> np.ndarray:
    """(B, 4) float32: one-hot bond order (single, double, triple, aromatic)."""
    out = np.zeros((orders.size, len(BOND_ORDERS)), dtype=np.float32)
    out[np.arange(orders.size), np.searchsorted(BOND_ORDERS, orders)] = 1.0
    return out
