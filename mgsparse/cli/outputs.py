"""Every path a command writes follows one rule, checked before any work starts.

The rule (docs/training-and-memory.md, "Output paths"): folders on the way that do not exist
yet are created when the output is written, as `mkdir -p` would (and as PyTorch Lightning's
`default_root_dir` or TensorBoard's `log_dir` are); whatever would make the write fail at the
end is refused at the start, in one line with exit 2 (a usage error), before a dataset is
loaded or an epoch trained: a file path that is an existing folder, a folder path that is an
existing file, a path below a file, a place where no file can be created (read-only, no
permission), a picture format matplotlib cannot write, and two outputs of one command on the
same path. Checking creates nothing, so a command refused later leaves nothing behind. A write
that still fails at the end (a full disk) is a runtime failure: exit 1, after the summary.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from mgsparse.data.atomic import atomic_write
from mgsparse.errors import ConfigError, DataError

PICTURES = (".png", ".svg", ".pdf")  # what matplotlib's savefig writes without extra backends


def check_output(path: Path | None, option: str, folder: bool = False,
                 suffixes: tuple[str, ...] = (), taken: dict[Path, str] | None = None) -> None:
    """Refuse now, with a `ConfigError` naming `option`, a `path` the command could not write
    at its end (see the module docstring). `folder`: the path is a folder the command fills
    (train --out), else a file. `taken`: the paths other outputs of the command write, by
    the option that writes them; a clash with one is refused, and `path` is added."""
    if path is None:
        return
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise ConfigError(f"{option} {path}: must end in {', '.join(suffixes)}")
    if path.is_dir() and not folder:
        raise ConfigError(f"{option} {path}: is a folder; name a file in it")
    if path.exists() and folder and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, not a folder")
    candidates = (path, *path.parents) if folder else path.parents
    existing = next((p for p in candidates if p.exists()), Path("."))
    if not existing.is_dir():
        raise ConfigError(f"{option} {path}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise ConfigError(f"{option} {path}: cannot write into {existing}: "
                          f"{e.strerror or e}") from None
    if taken is not None:
        key = path.resolve()
        if key in taken:
            raise ConfigError(f"{option} {path}: {taken[key]} writes that path too")
        taken[key] = option


RUN_FOLDER_FILES = ("metrics.json", "epochs.csv", "checkpoint.npz", "checkpoint.jsonl")
PARAMS = re.compile(r"params_run(0|[1-9][0-9]*)\.npz")


class RunFolderPaths(dict):
    """The paths `train --out` writes, for `check_output`'s `taken`: the folder itself, its
    fixed files and one params_run<i>.npz per run, the last matched by pattern, so that
    `--runs 1000000000` costs no more to check than `--runs 1`. Paths other outputs add are
    kept as in a plain dict."""

    def __init__(self, out_dir: Path, runs: int):
        super().__init__()
        self.folder, self.runs = Path(out_dir).resolve(), runs

    def _written(self, path: object) -> bool:
        if not isinstance(path, Path):
            return False
        if path == self.folder:
            return True
        if path.parent != self.folder:
            return False
        match = PARAMS.fullmatch(path.name)
        return path.name in RUN_FOLDER_FILES or (match is not None
                                                 and int(match.group(1)) < self.runs)

    def __contains__(self, path: object) -> bool:
        return super().__contains__(path) or self._written(path)

    def __missing__(self, path: Path) -> str:
        if self._written(path):
            return "--out"
        raise KeyError(path)


def make_parents(path: Path) -> list[Path]:
    """Create the folders above `path` that do not exist yet (the rule's `mkdir -p`); returns
    them, deepest first, for `remove_empty` when the command fails after all."""
    missing = [p for p in Path(path).parents if not p.exists()]
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create the folder of {path}: {e.strerror or e}") from None
    return missing


def remove_empty(folders: list[Path]) -> None:
    """Remove the folders `make_parents` created, deepest first, while they are empty: a
    command that fails leaves nothing behind."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def write_json(path: Path, data: Any) -> Path:
    """`data` as indented JSON at `path`, its folders created, written atomically (a reader
    sees the old file or the whole new one); a failure is one `DataError` line (exit 1)."""
    text = json.dumps(data, indent=2) + "\n"
    make_parents(path)
    try:
        return atomic_write(path, lambda f: f.write(text))
    except OSError as e:
        raise DataError(f"cannot write {path}: {e.strerror or e}") from None
