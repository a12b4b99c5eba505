"""Fixtures shared by the whole suite: a seeded generator, float64 tensor factories, config
factories, the one CLI fixture every command test uses, and a loopback HTTP server over the
real Planetoid files (MGSPARSE_PLANETOID_URL, ../shared/planetoid or the public files) and
the real TU zips (`require_real_tu`)."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
from contextlib import ExitStack, contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from mgsparse import Tensor


@pytest.fixture
def rng() -> np.random.Generator:
    """A freshly seeded generator per test, so results never depend on test order."""
    return np.random.default_rng(0)


@pytest.fixture
def tensor64(rng):
    """Factory for float64 Tensors (the precision gradient checks need), uniform in [low, high)."""

    def make(*shape, low=-1.0, high=1.0, requires_grad=True) -> Tensor:
        return Tensor(rng.uniform(low, high, shape), requires_grad=requires_grad)

    return make


REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_PLANETOID = REPO_ROOT.parent / "shared" / "planetoid"
# read once at start-up: tests set MGSPARSE_PLANETOID_URL to their own mirrors later on
USER_PLANETOID = os.environ.get("MGSPARSE_PLANETOID_URL")
_real_folder: list[Path | None] = []  # resolved once per session


def _download_real_planetoid(source: str) -> Path | None:
    """The real Planetoid files fetched from `source` (a URL or folder) by mgsparse's own
    verified download into a folder of this session; None when the source cannot give them."""
    from mgsparse.data.download import fetch, source_of
    from mgsparse.data.sources import planetoid
    from mgsparse.errors import MgsparseError

    root = Path(tempfile.mkdtemp(prefix="mgsparse-real-planetoid-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    flat = root / "real"  # one folder, as ../shared/planetoid is
    for name in ("cora", "citeseer", "pubmed"):
        for filename, sha256 in planetoid.known_checksums(name).items():
            try:
                fetch(source_of(source, filename), flat / filename, sha256,
                      max_bytes=planetoid.max_download_bytes(filename), retries=1)
            except MgsparseError:
                if name != "pubmed":  # a mirror may lack PubMed's large allx, as ../shared does
                    return None
    return flat


def _find_real_planetoid() -> Path | None:
    """MGSPARSE_PLANETOID_URL (a folder or a URL), then ../shared/planetoid, then the public
    Planetoid files when they can be reached: the first that holds the real files."""
    if USER_PLANETOID:
        folder = Path(USER_PLANETOID)
        if (folder / "ind.cora.x").is_file():
            return folder
        got = _download_real_planetoid(USER_PLANETOID)
        if got is not None:
            return got
    if (SHARED_PLANETOID / "ind.cora.x").is_file():
        return SHARED_PLANETOID
    from mgsparse.data.sources.planetoid import DEFAULT_URL

    return _download_real_planetoid(DEFAULT_URL)


def require_real_data() -> Path:
    """A folder of the real Planetoid files (see `_find_real_planetoid`); skip without one,
    unless MGSPARSE_REQUIRE_REAL_DATA=1 (CI), where its absence is a failure."""
    if not _real_folder:
        _real_folder.append(_find_real_planetoid())
    if _real_folder[0] is not None:
        return _real_folder[0]
    message = ("real Planetoid files not found (MGSPARSE_PLANETOID_URL, "
               f"{SHARED_PLANETOID}, the public Planetoid files)")
    if os.environ.get("MGSPARSE_REQUIRE_REAL_DATA") == "1":
        pytest.fail(message + " (MGSPARSE_REQUIRE_REAL_DATA=1)")
    pytest.skip(message)


SHARED_TU = REPO_ROOT.parent / "shared" / "tudataset"
USER_TU = os.environ.get("MGSPARSE_TU_URL")  # read at start-up, as USER_PLANETOID
REAL_TU_ZIPS = ("MUTAG.zip", "NCI1.zip", "NCI109.zip")
_real_tu: list[Path | None] = []  # resolved once per session


def _download_real_tu(source: str) -> Path | None:
    """The three real TU zips fetched from `source` (a URL or folder) by mgsparse's own
    capped, atomic download into a folder of this session; None when it cannot give them."""
    from mgsparse.data.download import fetch_unpinned, source_of
    from mgsparse.data.sources import tu
    from mgsparse.errors import MgsparseError

    root = Path(tempfile.mkdtemp(prefix="mgsparse-real-tu-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for name in REAL_TU_ZIPS:
        spec = tu.check_name(name.removesuffix(".zip"))
        try:
            fetch_unpinned(source_of(source, name), root / name, spec.max_bytes,
                           timeout=(5.0, 30.0), retries=1, backoff=0.5)
        except MgsparseError:
            return None
    return root


def _find_real_tu() -> Path | None:
    """MGSPARSE_TU_URL (a folder or a URL), then ../shared/tudataset, then the TU collection's
    server when it can be reached: the first that holds MUTAG, NCI1 and NCI109."""
    if USER_TU:
        folder = Path(USER_TU)
        if all((folder / name).is_file() for name in REAL_TU_ZIPS):
            return folder
        got = _download_real_tu(USER_TU)
        if got is not None:
            return got
    if all((SHARED_TU / name).is_file() for name in REAL_TU_ZIPS):
        return SHARED_TU
    from mgsparse.data.sources.tu import DEFAULT_URL

    return _download_real_tu(DEFAULT_URL)


def require_real_tu() -> Path:
    """A folder of the real MUTAG, NCI1 and NCI109 zips (see `_find_real_tu`); skip without
    one, unless MGSPARSE_REQUIRE_REAL_DATA=1 (CI), where its absence is a failure."""
    if not _real_tu:
        _real_tu.append(_find_real_tu())
    if _real_tu[0] is not None:
        return _real_tu[0]
    message = f"real TU zips not found (MGSPARSE_TU_URL, {SHARED_TU}, the TU server)"
    if os.environ.get("MGSPARSE_REQUIRE_REAL_DATA") == "1":
        pytest.fail(message + " (MGSPARSE_REQUIRE_REAL_DATA=1)")
    pytest.skip(message)


SHARED_MOLECULES = REPO_ROOT.parent / "shared" / "molecules"
USER_MOLECULES = os.environ.get("MGSPARSE_MOLECULES_URL")  # read at start-up, as USER_TU
REAL_MOLECULE_FILES = ("solubility.train.sdf", "solubility.test.sdf", "freesolv.csv")


def require_real_molecules() -> Path:
    """A folder of the real solubility SDF files and FreeSolv's CSV: MGSPARSE_MOLECULES_URL
    (a folder), else ../shared/molecules; skip without one, unless MGSPARSE_REQUIRE_REAL_DATA=1
    (CI), where its absence is a failure."""
    for folder in filter(None, (USER_MOLECULES and Path(USER_MOLECULES), SHARED_MOLECULES)):
        if all((folder / name).is_file() for name in REAL_MOLECULE_FILES):
            return folder
    message = f"real molecule files not found (MGSPARSE_MOLECULES_URL, {SHARED_MOLECULES})"
    if os.environ.get("MGSPARSE_REQUIRE_REAL_DATA") == "1":
        pytest.fail(message + " (MGSPARSE_REQUIRE_REAL_DATA=1)")
    pytest.skip(message)


# --- loopback servers ---------------------------------------------------------------------------

@contextmanager
def serve(handler_class):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def serve_folder():
    """Factory: serve a folder over loopback HTTP; returns (base_url, request_log)."""
    with ExitStack() as stack:
        def start(folder: Path):
            log: list[str] = []

            class Handler(SimpleHTTPRequestHandler):
                def __init__(self, *args, **kwargs):
                    super().__init__(*args, directory=str(folder), **kwargs)

                def do_GET(self):
                    log.append(self.path)
                    super().do_GET()

                def log_message(self, *args):
                    pass

            return stack.enter_context(serve(Handler)), log

        yield start


@pytest.fixture
def real_planetoid() -> Path:
    """The folder of real Planetoid files (skip, or fail under MGSPARSE_REQUIRE_REAL_DATA=1)."""
    return require_real_data()


@pytest.fixture
def planetoid_mirror(serve_folder):
    """The real ../shared/planetoid over loopback HTTP: (base_url, request_log)."""
    return serve_folder(require_real_data())


@pytest.fixture
def mirror_env(planetoid_mirror, monkeypatch, tmp_path_factory):
    """MGSPARSE_PLANETOID_URL pointing at the loopback mirror, and a fresh download cache."""
    url, _ = planetoid_mirror
    monkeypatch.setenv("MGSPARSE_PLANETOID_URL", url)
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path_factory.mktemp("datasets")))
    return url


@pytest.fixture
def skewed_dense_adjacency(monkeypatch):
    """Negative control for the dense-vs-sparse check: the dense Â is scaled by 1.01."""
    import importlib

    from mgsparse import Tensor

    dense_vs_sparse = importlib.import_module("mgsparse.bench.dense_vs_sparse")
    place = dense_vs_sparse.place

    def skewed(base, representation):
        task = place(base, representation)
        if representation == "dense" and not dense_vs_sparse.field_of(base):  # whole graph
            task = task.with_operands(task.features, Tensor(task.operand.data * 1.01))
        return task

    monkeypatch.setattr(dense_vs_sparse, "place", skewed)


# --- configs ------------------------------------------------------------------------------------

CONFIGS = REPO_ROOT / "configs"


def make_config(base: str = "karate", **sections):
    """A config from the defaults for dataset `base`, each keyword a section's overrides:
    make_config(model={"kind": "gat"}, train={"epochs": 3}). Memory tracing is off (it slows
    every allocation) and patience is off unless a section says otherwise."""
    from mgsparse.config import config_from_dict

    raw = {"dataset": {"name": base}, "train": {"patience": None},
           "monitor": {"memory": False}}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return config_from_dict(raw)


def moons_config(*overrides: str):
    """configs/moons.yaml with `--set` style overrides; tracemalloc off (it slows the many tiny
    steps ~10x)."""
    from mgsparse.config import load_config

    return load_config(CONFIGS / "moons.yaml", ["monitor.memory=false", *overrides])


# --- the CLI ------------------------------------------------------------------------------------

@pytest.fixture
def cli():
    """Invoke the `mgsparse` app as a user would: cli("train", path, "--epochs", 3). Arguments
    may be paths or numbers; returns typer's Result (exit_code, stdout, stderr, output)."""
    from typer.testing import CliRunner

    from mgsparse.cli import app

    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def gradcheck_sizes() -> list:
    """Every gradcheck size as a test parameter, the medium sweep over every op marked slow
    (about 3 s a sweep: the whole suite runs it; the fast part checks a few ops at medium)."""
    from mgsparse.checks import SIZES

    return [pytest.param(s, marks=pytest.mark.slow) if s == "medium" else s for s in SIZES]


def one_line_error(result, code: int, *needles: str) -> str:
    """The command exited with `code` and printed exactly one `error:` line holding every needle
    (and no traceback). Returns that line."""
    assert result.exit_code == code, result.output
    text = result.output.strip()
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), text
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def row_scans(monkeypatch):
    """run(build, loss, record) -> (how many times `kernels.sparse_rows` read a whole
    gradient, the gradients of the parameters of the model `build()` makes, after
    `loss(model).backward()`), with the ops' row records (`kernels.mark_rows`) on or off."""
    from mgsparse import kernels

    def run(build, loss, record: bool) -> tuple[int, list]:
        scans, plain = [0], kernels.run_blocks

        def watched(fn, blocks, here=False):
            scans[0] += fn.__qualname__ == "sparse_rows.<locals>.block"
            return plain(fn, blocks, here)
        with monkeypatch.context() as m:
            m.setattr(kernels.pool, "run_blocks", watched)
            if not record:
                m.setattr(kernels, "mark_rows", lambda g, rows: g)
                m.setattr(kernels.rows, "mark_rows", lambda g, rows: g)
            model = build()
            loss(model).backward()
        return scans[0], [p.grad for p in model.parameters()]
    return run


def pytest_configure(config):
    """A runner started in the background (`pytest &`, nohup, some CI shells) ignores SIGINT,
    and every process it starts inherits SIG_IGN: the tests that press Ctrl-C on a child
    (training, downloads, MPI ranks) would see it ignored and time out. Start from what a
    terminal gives: Python's own KeyboardInterrupt handler, which a child's exec resets."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session):
    """What collection built (every test module, ~3,300 test items, numpy, scipy, rich) lives
    to the end: freeze it out of the cycle collector's scans, so a `gc.collect()` (a memory
    measurement's first step) costs what the test made, not 70 ms of the suite's own heap."""
    import gc

    gc.freeze()
