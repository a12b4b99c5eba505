"""Bounded readers for OGB's archives: a zip whose declared sizes are capped, and gzipped CSV
members read as streams that stop at a row and a byte bound.

OGB's members are ``.csv.gz`` inside a ``.zip``, so a hostile archive can be a bomb twice over:
a zip member declaring gigabytes, or a small gzip that inflates to gigabytes of rows (or of
one line). The bounds come from the documented facts (rows, columns), so the work and the
memory a member can cost are known before it is opened.
"""

from __future__ import annotations

import gzip
import io
import re
import warnings
import zipfile
import zlib

import numpy as np

from mgsparse.errors import DataError

# A CSV row of W fields is read only up to W * MAX_FIELD_CHARS + 2 bytes on average: OGB's
# longest field is a float such as "-1.2345678901234567e-05" (23 characters).
MAX_FIELD_CHARS = 32
# ... and never below this, so a short member with too many rows is told by its row count.
MIN_BYTES = 1 << 16


class TooLarge(Exception):
    """A member, or a stream read from one, larger than its bound (the message says which)."""


def check_declared_sizes(archive: zipfile.ZipFile, limit: int) -> None:
    """Refuse before `testzip` inflates it: zipfile stops each member at its declared size,
    so bounding the declared sizes bounds the work."""
    total = 0
    for info in archive.infolist():
        total += info.file_size
        if total > limit:
            raise TooLarge(f"{info.filename} takes the unzipped size past {limit:,} bytes")


class BoundedReader(io.RawIOBase):
    """A binary stream that raises `TooLarge` once more than `limit` bytes came through."""

    def __init__(self, stream, limit: int):
        self.stream, self.limit, self.count = stream, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.stream.readinto(buffer)
        self.count += n
        if self.count > self.limit:
            raise TooLarge(f"decompresses to more than {self.limit:,} bytes")
        return n


_NOT_CONVERTED = re.compile(r"could not convert string (.*) to (\w+) at row (\d+), column (\d+)")
_COLUMNS_CHANGED = re.compile(r"number of columns changed from (\d+) to (\d+) at row (\d+)")


def _loadtxt_message(exc: ValueError) -> str:
    """numpy's loadtxt message with the line it means (its conversion errors count rows from
    0, its column errors from 1); anything else as numpy says it."""
    text = str(exc)
    if m := _NOT_CONVERTED.search(text):
        return f"line {int(m[3]) + 1}, column {m[4]}: {m[1]} is not a {m[2]} number"
    if m := _COLUMNS_CHANGED.search(text):
        return f"line {m[3]}: {m[2]} columns, expected {m[1]} like the lines before"
    return text.splitlines()[0] if text else type(exc).__name__


def read_csv_gz(archive: zipfile.ZipFile, member: str, dtype, width: int,
                rows: int | None, where: str, limit: int | None = None) -> np.ndarray:
    """One gzipped CSV member as a (rows, width) array; any damage is a one-line DataError.

    Streamed with bounds: at most ``limit`` + 1 rows (``limit`` defaults to ``rows``) and
    (``limit`` + 1) * (``width`` * MAX_FIELD_CHARS + 2) unzipped bytes (at least MIN_BYTES)
    are read, so the cost of a member is set by the documented facts, not by what the
    archive holds."""
    limit = rows if limit is None else limit
    max_bytes = max((limit + 1) * (width * MAX_FIELD_CHARS + 2), MIN_BYTES)
    try:
        with (archive.open(member) as raw, gzip.open(raw, "rb") as unzipped,
              io.TextIOWrapper(io.BufferedReader(BoundedReader(unzipped, max_bytes)),
                               encoding="ascii") as text,
              warnings.catch_warnings()):
            warnings.simplefilter("ignore")  # "input contained no data": the row count says it
            table = np.loadtxt(text, delimiter=",", dtype=dtype, ndmin=2, max_rows=limit + 1)
    except TooLarge as exc:
        raise DataError(f"{where}: {exc}, more than {limit:,} rows can take (a gzip "
                        "bomb?)") from None
    except UnicodeDecodeError:
        raise DataError(f"{where}: not ASCII text once unzipped") from None
    except ValueError as exc:
        raise DataError(f"{where} {_loadtxt_message(exc)}") from None
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise DataError(f"{where}: damaged gzip data ({exc})") from None
    if table.shape[0] > limit:
        raise DataError(f"{where}: more than {limit:,} rows, expected "
                        f"{'' if rows is None else 'exactly '}{limit:,}")
    if rows is not None and table.shape[0] != rows:
        raise DataError(f"{where}: {table.shape[0]:,} rows, expected {rows:,}")
    if table.shape[0] and table.shape[1] != width:
        raise DataError(f"{where}: {table.shape[1]} columns, expected {width}")
    return table.reshape(-1, width)
