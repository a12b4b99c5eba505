"""Write a file so that readers see the old file or the whole new one, never half of either.

`atomic_write` writes into a temporary file beside the target and renames it into place.
The temporary file is created with ``os.open(..., 0o666)``, so the kernel applies the umask
exactly as it does for ``open(path, "w")``: a shared cache or run folder stays readable to
the group when the umask says so (``tempfile.mkstemp`` would force 0600 whatever the umask,
and reading the umask with ``os.umask`` briefly changes it for every thread).
`sigterm_unwinds` makes SIGTERM remove the temporary file as Ctrl-C does.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def new_temp_file(folder: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """(fd, path) of a new, empty file in ``folder`` with the mode ``open()`` would give it
    (0o666 minus the umask); ``O_EXCL`` makes a clash with another file impossible."""
    for _ in range(100):
        path = Path(folder) / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(path, _NEW_FILE, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")  # pragma: no cover


def atomic_write(path: str | Path, write_fn: Callable[[IO[Any]], object],
                 mode: str = "w") -> Path:
    """Call ``write_fn(f)`` on a temporary file opened with ``mode`` ("w" text, "wb" bytes),
    then rename it to ``path``, whose mode is then what ``open(path, mode)`` would have given
    a new file. On any failure (an exception, Ctrl-C, SIGTERM) the temporary file is removed
    and ``path`` is untouched; an OSError propagates as it is, so the caller decides how to
    report a full disk or a read-only folder."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    path = Path(path)
    with sigterm_unwinds():
        fd, tmp = new_temp_file(path.parent, f".{path.name}.", ".tmp")
        try:
            with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
                write_fn(f)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return path


class _Terminated(BaseException):
    """SIGTERM arrived inside `sigterm_unwinds` (a BaseException, like KeyboardInterrupt, so
    that no ``except Exception`` on the way swallows it)."""


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """While inside, SIGTERM unwinds the stack like Ctrl-C (so ``finally`` blocks remove
    temporary files), and then ends the process by SIGTERM, as it would have anyway.

    Only in the main thread (the one Python runs signal handlers in) and only while SIGTERM
    has its default action: an application that handles SIGTERM itself keeps its handler,
    and one that ignores it keeps ignoring it.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def terminate(signum, frame):
        raise _Terminated

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # the default action: the process ends here
        raise SystemExit(128 + signal.SIGTERM) from None  # only if the signal was delayed
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
