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
