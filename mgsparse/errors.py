"""The project's exception types: the library raises these, the CLI renders them once."""


class MgsparseError(Exception):
    """Base of every error mgsparse raises on purpose; ``exit_code`` is what the CLI returns."""

    exit_code = 1


class ShapeError(MgsparseError, ValueError):
    """Operands whose shapes (or dtypes) do not fit the operation."""


class GradcheckError(MgsparseError):
    """An analytic gradient disagrees with its oracle."""


class ConfigError(MgsparseError):
    """A bad config file, key, value or command-line option (usage error: exit 2)."""

    exit_code = 2


class DataError(MgsparseError):
    """A dataset file that is missing, malformed or unsafe."""


class InputFileError(DataError):
    """A malformed file the user named themselves (their own edge list, features, labels):
    a usage error (exit 2) like a bad config value, where a damaged download is a runtime one."""

    exit_code = 2


class DownloadError(DataError):
    """A download that failed: network, HTTP status, timeout, truncated body."""


class ChecksumError(DownloadError):
    """A file whose SHA-256 is not the one the project expects."""


class TrainingError(MgsparseError):
    """A run that could not go on (a non-finite loss or gradient)."""


class MemoryBudgetError(MgsparseError):
    """A run whose estimated or measured memory does not fit `monitor.memory_budget_mb`."""


class HyperparameterError(MgsparseError, ValueError):
    """A layer or optimizer argument out of range (lr <= 0, dropout p outside [0, 1), ...).

    A usage error like a bad config value (exit 2), and a ValueError as PyTorch raises; not a
    ConfigError, which names a config key and file line the library does not know.
    """

    exit_code = 2


class DistributedError(MgsparseError):
    """A multi-process run that cannot go on: a rank died, hangs, or MPI is missing."""


# --- the one close-match suggester every "unknown name" message uses ---------------------------

def closest(word: object, options) -> str | None:
    """The known name a user most likely meant by ``word``, or None when none is close.

    Case is ignored. A name is close when difflib's ratio is at least 0.6 or it is one edit
    away (a typo in a short name); among close names the fewest edits (insert, delete,
    substitute, swap two neighbours) win, then a name of the typed length (``gcm`` is a
    mistyped ``gcn``, not ``sgc``), then difflib's ratio, then the order of ``options``.
    """
    import difflib

    text, names = str(word).lower(), list(options)
    lowered = [name.lower() for name in names]
    if text in lowered:
        return names[lowered.index(text)]
    ranked = []
    for index, name in enumerate(lowered):
        ratio = difflib.SequenceMatcher(None, text, name).ratio()
        edits = _edits(text, name)
        if ratio >= 0.6 or (edits == 1 and len(text) >= 2):
            ranked.append((edits, len(name) != len(text), -ratio, index))
    return names[min(ranked)[3]] if ranked else None


def did_you_mean(word: object, options) -> str:
    """``"; did you mean 'gcn'?"`` for the closest known name (`closest`), else ``""``."""
    near = closest(word, options)
    return f"; did you mean {near!r}?" if near is not None else ""


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance (Damerau-Levenshtein without repeated edits of one
    substring): short names only, so the quadratic table is a few hundred cells."""
    before, row = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (ca != cb))
            if before is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        before, row = row, current
    return row[-1]
