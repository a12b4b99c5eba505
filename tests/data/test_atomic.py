"""atomic_write: all or nothing, and the file mode open() would give (umask honoured)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from mgsparse.data.atomic import atomic_write


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o027, 0o077])
def test_new_file_mode_is_what_open_would_give(umask, tmp_path):
    previous = os.umask(umask)
    try:
        atomic_write(tmp_path / "a.txt", lambda f: f.write("héllo"))
        atomic_write(tmp_path / "b.npz", lambda f: np.savez(f, x=np.arange(3)), "wb")
        with open(tmp_path / "c.txt", "w") as f:  # the reference
            f.write("x")
    finally:
        os.umask(previous)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"a.txt": 0o666 & ~umask, "b.npz": 0o666 & ~umask,
                     "c.txt": 0o666 & ~umask}
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo"
    with np.load(tmp_path / "b.npz") as z:
        np.testing.assert_array_equal(z["x"], [0, 1, 2])


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt])
def test_failure_keeps_the_old_file_and_leaves_no_temp(failure, tmp_path):
    target = tmp_path / "metrics.json"
    target.write_text("old")

    def half_then_fail(f):
        f.write("new and half")
        raise failure

    with pytest.raises(type(failure) if isinstance(failure, BaseException) else failure):
        atomic_write(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_replaces_an_existing_file_whole(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("a much longer old content")
    assert atomic_write(target, lambda f: f.write("new")) == target
    assert target.read_text() == "new"
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb'"):
        atomic_write(target, lambda f: None, "a")
