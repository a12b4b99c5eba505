"""fetch(): retries, timeouts, truncation, checksums, mirrors -- and never a partial file."""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from mgsparse.data.download import fetch, local_path, sha256_file
from mgsparse.errors import ChecksumError, ConfigError, DataError, DownloadError
from tests.conftest import REPO_ROOT

BODY = bytes(range(256)) * 300  # 76,800 bytes: several 64 KiB chunks
DIGEST = hashlib.sha256(BODY).hexdigest()
QUICK = {"timeout": (1.0, 0.3), "retries": 2, "backoff": 0.01}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_download_verifies_and_renames_into_place(scripted_server, tmp_path, only_verified):
    base, log = scripted_server({"f.bin": [("ok", BODY)]})
    calls = []
    dest = fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, progress=lambda *a: calls.append(a),
                 **QUICK)
    assert dest.read_bytes() == BODY
    assert log == ["f.bin"]
    assert calls[-1] == (len(BODY), len(BODY), "f.bin")
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)  # done only grows
    only_verified(tmp_path, {"f.bin": DIGEST})


def test_verified_cache_is_not_fetched_again(scripted_server, tmp_path):
    base, log = scripted_server({"f.bin": [("ok", BODY)]})
    fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert log == ["f.bin"]


def test_cached_file_with_wrong_checksum_is_replaced(scripted_server, tmp_path):
    (tmp_path / "f.bin").write_bytes(b"stale or tampered")
    base, log = scripted_server({"f.bin": [("ok", BODY)]})
    fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert (tmp_path / "f.bin").read_bytes() == BODY
    assert log == ["f.bin"]


def test_404_is_final_and_names_url_and_status(scripted_server, tmp_path, only_verified):
    base, log = scripted_server({})
    with pytest.raises(DownloadError, match=r"f\.bin.*HTTP 404") as info:
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert base + "f.bin" in str(info.value)
    assert log == ["f.bin"]  # not retried
    only_verified(tmp_path, {})


def test_500_then_success_is_retried(scripted_server, tmp_path):
    base, log = scripted_server({"f.bin": [("status", 500), ("status", 503), ("ok", BODY)]})
    fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert log == ["f.bin"] * 3
    assert (tmp_path / "f.bin").read_bytes() == BODY


def test_500_forever_gives_up_after_retries(scripted_server, tmp_path, only_verified):
    base, log = scripted_server({"f.bin": [("status", 500)]})
    with pytest.raises(DownloadError, match=r"HTTP 500.*3 attempts"):
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert len(log) == 3
    only_verified(tmp_path, {})


def test_truncated_body_is_an_error_and_leaves_nothing(scripted_server, tmp_path, only_verified):
    base, log = scripted_server({"f.bin": [("truncate", BODY)]})
    with pytest.raises(DownloadError, match="truncated"):
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert len(log) == 3  # a network fault: retried
    only_verified(tmp_path, {})


def test_truncated_once_then_complete_succeeds(scripted_server, tmp_path):
    base, _ = scripted_server({"f.bin": [("truncate", BODY), ("ok", BODY)]})
    fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert sha256_file(tmp_path / "f.bin") == DIGEST


def test_wrong_checksum_raises_and_discards(scripted_server, tmp_path, only_verified):
    base, log = scripted_server({"f.bin": [("ok", BODY + b"!")]})
    with pytest.raises(ChecksumError, match=r"f\.bin .*SHA-256 .*expected"):
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, **QUICK)
    assert log == ["f.bin"]  # same bytes would come again: not retried
    only_verified(tmp_path, {})


def test_slow_server_times_out_quickly(scripted_server, tmp_path, only_verified):
    base, log = scripted_server({"f.bin": [("slow", 5.0, BODY)]})
    start = time.perf_counter()
    with pytest.raises(DownloadError, match="timed out"):
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, timeout=(1.0, 0.2), retries=1,
              backoff=0.01)
    assert time.perf_counter() - start < 2.0
    assert len(log) == 2
    only_verified(tmp_path, {})


def test_unreachable_host_says_so(tmp_path, only_verified):
    url = f"http://127.0.0.1:{closed_port()}/f.bin"
    with pytest.raises(DownloadError, match="unreachable") as info:
        fetch(url, tmp_path / "f.bin", DIGEST, retries=0, backoff=0)
    assert info.value.unreachable is True
    assert "\n" not in str(info.value)
    only_verified(tmp_path, {})


def test_failure_inside_progress_callback_leaves_no_partial_file(scripted_server, tmp_path,
                                                                only_verified):
    base, _ = scripted_server({"f.bin": [("ok", BODY)]})

    def interrupt(done, total, name):
        if done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, progress=interrupt, **QUICK)
    only_verified(tmp_path, {})


# --- local mirrors --------------------------------------------------------------------------------

def test_folder_mirror_is_copied_and_verified(tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "f.bin").write_bytes(BODY)
    fetch(tmp_path / "mirror" / "f.bin", tmp_path / "cache" / "f.bin", DIGEST)
    fetch((tmp_path / "mirror" / "f.bin").as_uri(), tmp_path / "cache2" / "f.bin", DIGEST)
    assert (tmp_path / "cache" / "f.bin").read_bytes() == BODY
    assert (tmp_path / "cache2" / "f.bin").read_bytes() == BODY


def test_folder_mirror_with_bad_file_leaves_nothing(tmp_path, only_verified):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "f.bin").write_bytes(b"tampered")
    with pytest.raises(ChecksumError):
        fetch(tmp_path / "mirror" / "f.bin", tmp_path / "cache" / "f.bin", DIGEST)
    with pytest.raises(DownloadError, match=r"g\.bin not found in mirror folder"):
        fetch(tmp_path / "mirror" / "g.bin", tmp_path / "cache" / "g.bin", DIGEST)
    only_verified(tmp_path / "cache", {})


def test_missing_or_malformed_checksum_refuses_before_touching_anything(tmp_path):
    (tmp_path / "f.bin").write_bytes(BODY)
    for bad in (None, "", DIGEST.upper()[:10]):
        with pytest.raises(ChecksumError, match=r"no valid SHA-256 given for f\.bin"):
            fetch("http://127.0.0.1:1/f.bin", tmp_path / "f.bin", bad)
    assert (tmp_path / "f.bin").read_bytes() == BODY  # the cached copy was not deleted


def test_unsupported_scheme_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="unsupported URL scheme 'ftp'"):
        fetch("ftp://example.org/f.bin", tmp_path / "f.bin", DIGEST)
    assert local_path("file:///tmp/x").as_posix() == "/tmp/x"


# --- hostile mirrors ------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://[::1/f.bin", "http://127.0.0.1:99999/f.bin",
                                 "http:///f.bin"])
def test_malformed_url_is_one_line_and_touches_nothing(url, tmp_path):
    (tmp_path / "f.bin").write_bytes(b"stale")
    with pytest.raises(ConfigError, match="malformed URL") as info:
        fetch(url, tmp_path / "f.bin", DIGEST, **QUICK)
    assert url in str(info.value) and "\n" not in str(info.value)
    assert (tmp_path / "f.bin").read_bytes() == b"stale"  # refused before the cache check


@pytest.mark.parametrize("announced", [None, 1 << 40], ids=["no-length", "huge-length"])
def test_endless_body_is_cut_off_at_the_cap(announced, scripted_server, tmp_path,
                                            only_verified):
    base, log = scripted_server({"f.bin": [("endless", announced)]})
    cap = 3 * 65536 + 100
    written = [0]

    def track(done, total, name):
        written[0] = done

    with pytest.raises(DownloadError, match=rf"f\.bin from .* larger than the {cap:,} bytes"):
        fetch(base + "f.bin", tmp_path / "f.bin", DIGEST, progress=track, max_bytes=cap,
              **QUICK)
    assert log == ["f.bin"]  # a body that is too big is final: not retried
    if announced is None:
        assert 2 * 65536 <= written[0] <= cap  # it streamed, and stopped before the cap
    else:
        assert written[0] == 0  # the announced length alone was enough to refuse
    only_verified(tmp_path, {})


def test_mirror_folder_file_beyond_the_cap_is_not_copied(tmp_path, only_verified):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "f.bin").write_bytes(BODY)
    with pytest.raises(DownloadError, match=r"larger than the 1,000 bytes"):
        fetch(tmp_path / "mirror" / "f.bin", tmp_path / "cache" / "f.bin", DIGEST,
              max_bytes=1000)
    only_verified(tmp_path / "cache", {})


def test_unwritable_destination_is_one_line_naming_it(tmp_path):
    (tmp_path / "blocker").write_text("a file where a folder should be")
    with pytest.raises(DataError, match=r"cannot write .*blocker") as info:
        fetch(tmp_path / "mirror" / "f.bin", tmp_path / "blocker" / "f.bin", DIGEST)
    assert "\n" not in str(info.value)


# SIGTERM (kill, timeout, schedulers) must clean up like Ctrl-C. A child process downloads from
# a server that sends part of the body and stalls; once bytes are on disk, the test signals it.
_CHILD = """
import signal, sys
from pathlib import Path
from mgsparse.data.download import fetch
if sys.argv[3] == "app-handler":
    def handler(signum, frame):
        raise SystemExit(143)
    signal.signal(signal.SIGTERM, handler)
fetch(sys.argv[1], Path(sys.argv[2]), "0" * 64, timeout=(5, 30), retries=0)
"""


@pytest.mark.parametrize("signum, setup, returncode", [
    (signal.SIGTERM, "default", -signal.SIGTERM),  # cleaned up, then ended by SIGTERM itself
    pytest.param(signal.SIGTERM, "app-handler", 143,  # an application's own handler is kept
                 marks=pytest.mark.slow),
    pytest.param(signal.SIGINT, "default", -signal.SIGINT,  # Ctrl-C: KeyboardInterrupt
                 marks=pytest.mark.slow),
])
def test_signal_mid_download_leaves_no_part_file(signum, setup, returncode, scripted_server,
                                                 tmp_path):
    base, _ = scripted_server({"f.bin": [("stall", BODY)]})
    child = subprocess.Popen([sys.executable, "-c", _CHILD, base + "f.bin",
                              str(tmp_path / "f.bin"), setup], cwd=REPO_ROOT,
                             stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not any(p.stat().st_size for p in tmp_path.glob("*.part")):
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the download never started"
            time.sleep(0.02)
        child.send_signal(signum)
        assert child.wait(timeout=20) == returncode
    finally:
        child.kill()
        child.wait()
    assert list(tmp_path.iterdir()) == []
