"""Fixtures for the data tests: loopback HTTP servers (honest and misbehaving), tiny
Planetoid-format files, and the real Planetoid files in ../shared/planetoid."""

from __future__ import annotations

import collections
import hashlib
import io
import pickle
import struct
import threading
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import scipy.sparse as sp

from mgsparse.data.sources import planetoid
from tests.conftest import SHARED_PLANETOID, require_real_data, serve  # noqa: F401


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_only_verified(folder: Path, expected: dict[str, str]) -> None:
    """The folder holds no temp file and nothing whose SHA-256 is not the expected one."""
    if not folder.exists():
        return
    for path in folder.iterdir():
        assert path.name in expected, f"unexpected file left behind: {path.name}"
        assert sha256(path.read_bytes()) == expected[path.name], f"unverified: {path.name}"


@pytest.fixture
def only_verified():
    """``only_verified(folder, {name: sha256})``: assert no partial or unverified file."""
    return assert_only_verified


# Scripted misbehaviour: each route is a list of steps, consumed one per request (the last
# one repeats). A step is ("ok", body) | ("status", code) | ("truncate", body)
# | ("slow", seconds, body) | ("endless", announced_length_or_None): 32 MiB in 64 KiB chunks
# | ("stall", body): announces twice len(body), sends body, then waits until the test ends.

@pytest.fixture
def scripted_server():
    stop = threading.Event()
    with ExitStack() as stack:
        def start(routes: dict[str, list]):
            log: list[str] = []
            scripts = {name: list(steps) for name, steps in routes.items()}

            class Handler(BaseHTTPRequestHandler):
                def do_GET(self):
                    name = self.path.lstrip("/")
                    log.append(name)
                    steps = scripts.get(name)
                    if not steps:
                        self.send_error(404)
                        return
                    step = steps.pop(0) if len(steps) > 1 else steps[0]
                    _play(self, step, stop)

                def log_message(self, *args):
                    pass

            return stack.enter_context(serve(Handler)), log

        yield start
        stop.set()  # wake sleeping handlers so the server shuts down at once


def _play(handler: BaseHTTPRequestHandler, step: tuple, stop: threading.Event) -> None:
    kind = step[0]
    if kind == "status":
        handler.send_error(step[1])
        return
    if kind in ("endless", "stall"):
        _play_unending(handler, step, stop)
        return
    if kind == "slow":
        if stop.wait(step[1]):
            return
        body = step[2]
    else:
        body = step[1]
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    try:
        handler.wfile.write(body[: len(body) // 2] if kind == "truncate" else body)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (timeout test)
    handler.close_connection = True


ENDLESS_CHUNK = b"\0" * (1 << 16)
ENDLESS_CHUNKS = 512  # 32 MiB: what the issue saw a mirror write for a 22 KB file


def _play_unending(handler: BaseHTTPRequestHandler, step: tuple, stop: threading.Event) -> None:
    """A body that never ends: endless chunks, or a first part and then silence."""
    kind, arg = step
    length = arg if kind == "endless" else 2 * len(arg)
    handler.send_response(200)
    if length is not None:
        handler.send_header("Content-Length", str(length))
    handler.end_headers()
    handler.close_connection = True
    try:
        if kind == "stall":
            handler.wfile.write(arg)
            handler.wfile.flush()
            stop.wait(30)
            return
        for _ in range(ENDLESS_CHUNKS):  # a bound, so that a client without a cap fails, not hangs
            if stop.is_set():
                return
            handler.wfile.write(ENDLESS_CHUNK)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client stopped reading: what a capped download does


@pytest.fixture
def fast_fetch(monkeypatch):
    """Make planetoid's downloads give up quickly (tests of failures stay fast)."""
    monkeypatch.setattr(planetoid, "FETCH_OPTIONS",
                        {"timeout": (1.0, 0.3), "retries": 1, "backoff": 0.01})


# --- tiny Planetoid-format files --------------------------------------------------------------

class Py2Pickler(pickle._Pickler):
    """Writes byte strings as Python 2 ``str`` opcodes, as the real Planetoid files do
    (a Python 3 pickler would route them through ``_codecs.encode``)."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def py2_pickle(obj) -> bytes:
    buffer = io.BytesIO()
    Py2Pickler(buffer, protocol=2).dump(obj)
    return buffer.getvalue()


def onehot(labels, num_classes: int) -> np.ndarray:
    return np.eye(num_classes, dtype=np.int32)[labels]


TINY_TEST_INDEX = [5, 4, 7]  # node 6 is missing: CiteSeer-style gap, padded in parsing


def tiny_planetoid_files() -> dict[str, bytes]:
    """A hand-checkable Planetoid dataset named 'tiny': 8 nodes, 3 classes, 3 features.

    allx holds nodes 0-3 (x/y: the first 2, the training nodes); tx holds the test nodes in
    test.index order 5, 4, 7; node 6 lies in the gap of the test index. Edges: 0-1, 0-2,
    3-4 (listed twice), 5-7, plus a self loop on 2.
    """
    allx = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=np.float32)
    tx = np.array([[5, 0, 0], [4, 0, 0], [7, 0, 0]], dtype=np.float32)  # rows of 5, 4, 7
    ally = onehot([0, 1, 2, 0], 3)
    ty = onehot([2, 1, 0], 3)  # labels of nodes 5, 4, 7
    graph = collections.defaultdict(list, {0: [1, 2], 1: [0], 2: [0, 2], 3: [4, 4],
                                           4: [3], 5: [7], 6: [], 7: [5]})
    objects = {"x": sp.csr_matrix(allx[:2]), "tx": sp.csr_matrix(tx),
               "allx": sp.csr_matrix(allx), "y": ally[:2], "ty": ty, "ally": ally,
               "graph": graph}
    files = {f"ind.tiny.{key}": py2_pickle(obj) for key, obj in objects.items()}
    files["ind.tiny.test.index"] = "".join(f"{i}\n" for i in TINY_TEST_INDEX).encode()
    return files


@pytest.fixture
def tiny_dataset(tmp_path, monkeypatch):
    """The 'tiny' files in a mirror folder, registered as a Planetoid recipe for this test:
    (mirror_folder, {filename: sha256})."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    files = tiny_planetoid_files()
    for name, data in files.items():
        (mirror / name).write_bytes(data)
    checksums = {name: sha256(data) for name, data in files.items()}
    monkeypatch.setitem(planetoid.NAMES, "tiny", "Tiny")
    for name, digest in checksums.items():
        monkeypatch.setitem(planetoid.CHECKSUMS, name, digest)
        monkeypatch.setitem(planetoid.SIZES, name, len(files[name]))
    return mirror, checksums
