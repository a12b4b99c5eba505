"""Fetch one file by URL or from a mirror folder, verify its SHA-256, rename it into place.

`fetch` knows nothing of any dataset. Its contract, whatever happens:

- the bytes go to a temporary file in the destination's own folder (so the final
  ``os.replace`` is an atomic rename on the same filesystem);
- the file is renamed to ``dest`` only after its SHA-256 matched; every failure path removes
  the temporary file, and a cached ``dest`` whose checksum does not match is deleted first,
  so the folder never holds a partial or unverified file;
- connection errors, timeouts, truncated bodies and 5xx answers are retried with exponential
  backoff; 4xx answers are final (a 404 will not turn into a 200 by asking again).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import requests

from mgsparse.errors import ChecksumError, DownloadError

Progress = Callable[[int, "int | None", str], None]
CHUNK_BYTES = 1 << 16


class _Transient(Exception):
    """An attempt that failed in a way a later attempt may not (network, 5xx, truncation)."""

    def __init__(self, reason: str, unreachable: bool = False):
        super().__init__(reason)
        self.unreachable = unreachable


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def is_remote(url_or_path: str) -> bool:
    return urlparse(str(url_or_path)).scheme in ("http", "https")


def local_path(url_or_path: str | Path) -> Path:
    """A ``file://`` URL or a plain path, as a Path."""
    text = str(url_or_path)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise DownloadError(f"unsupported URL scheme {parsed.scheme!r} in {text} "
                            "(use http(s)://, file:// or a folder path)")
    return Path(text)


def fetch(url_or_path: str | Path, dest: Path, sha256: str, *, progress: Progress | None = None,
          timeout: tuple[float, float] = (5, 30), retries: int = 3,
          backoff: float = 0.5) -> Path:
    """Make ``dest`` a verified copy of ``url_or_path`` and return it.

    ``timeout`` is (connect, read) seconds per attempt; a failed attempt is retried up to
    ``retries`` times, sleeping ``backoff * 2**k`` seconds before retry k+1.
    ``progress(done_bytes, total_bytes_or_None, filename)`` is called as bytes arrive
    (total is None when the server sends no Content-Length).
    """
    dest = Path(dest)
    if not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256)):
        raise ChecksumError(f"no valid SHA-256 given for {dest.name} ({sha256!r}): an "
                            "unverifiable file is never fetched")
    if dest.is_file():
        if sha256_file(dest) == sha256:
            return dest  # verified cache: no bytes move, so no progress is reported
        dest.unlink()  # stale or tampered: it must not stay beside verified files
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if is_remote(str(url_or_path)):
            digest = _download(str(url_or_path), tmp, dest.name, progress, timeout, retries,
                               backoff)
        else:
            digest = _copy(local_path(url_or_path), tmp, dest.name, progress)
        if digest != sha256:
            raise ChecksumError(f"{dest.name} from {url_or_path} has SHA-256 {digest[:16]}..., "
                                f"expected {sha256[:16]}...; the file was discarded")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def probe(url_or_path: str, timeout: tuple[float, float] = (5, 30)) -> bool:
    """Whether the source has the file (HTTP HEAD, or a stat for a folder mirror)."""
    if not is_remote(url_or_path):
        return local_path(url_or_path).is_file()
    try:
        response = requests.head(url_or_path, timeout=timeout, allow_redirects=True)
    except requests.RequestException as exc:
        error = DownloadError(f"cannot reach {_host(url_or_path)}: {_reason(exc)[0]}")
        error.unreachable = True
        raise error from exc
    if response.status_code in (404, 410):
        return False
    if response.status_code >= 400:
        raise DownloadError(f"{url_or_path}: HTTP {response.status_code} {response.reason}")
    return True


# --- local mirror -----------------------------------------------------------------------------

def _copy(source: Path, tmp: Path, name: str, progress: Progress | None) -> str:
    if not source.is_file():
        raise DownloadError(f"{name} not found in mirror folder {source.parent}")
    total = source.stat().st_size
    digest, done = hashlib.sha256(), 0
    with open(source, "rb") as src, open(tmp, "wb") as out:
        while chunk := src.read(CHUNK_BYTES):
            out.write(chunk)
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total, name)
    return digest.hexdigest()


# --- HTTP ---------------------------------------------------------------------------------------

def _download(url: str, tmp: Path, name: str, progress: Progress | None,
              timeout: tuple[float, float], retries: int, backoff: float) -> str:
    last: _Transient | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            return _download_once(url, tmp, name, progress, timeout)
        except _Transient as exc:
            last = exc
    assert last is not None
    attempts = f"{retries + 1} attempt{'s' if retries else ''}"
    if last.unreachable:
        error = DownloadError(f"cannot download {name}: {_host(url)} is unreachable "
                              f"({last}; {attempts}) -- network down or host wrong")
    else:
        error = DownloadError(f"cannot download {name} from {url}: {last} ({attempts})")
    error.unreachable = last.unreachable  # lets a caller add how to use a mirror instead
    raise error from last


def _download_once(url: str, tmp: Path, name: str, progress: Progress | None,
                   timeout: tuple[float, float]) -> str:
    # identity encoding: Content-Length then counts the very bytes we hash and store.
    headers = {"Accept-Encoding": "identity"}
    try:
        with requests.get(url, stream=True, timeout=timeout, headers=headers) as response:
            if response.status_code >= 500:
                raise _Transient(f"HTTP {response.status_code} {response.reason}")
            if response.status_code != 200:
                raise DownloadError(f"cannot download {name}: {url} answered HTTP "
                                    f"{response.status_code} {response.reason}")
            total = _content_length(response)
            digest, done = hashlib.sha256(), 0
            with open(tmp, "wb") as out:
                for chunk in response.iter_content(CHUNK_BYTES):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total, name)
    except requests.RequestException as exc:
        reason, unreachable = _reason(exc)
        raise _Transient(reason, unreachable) from exc
    if total is not None and done != total:
        raise _Transient(f"truncated body: {done} of {total} bytes")
    return digest.hexdigest()


def _content_length(response: requests.Response) -> int | None:
    if response.headers.get("Content-Encoding", "identity") != "identity":
        return None
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _reason(exc: requests.RequestException) -> tuple[str, bool]:
    """A short human reason, and whether the host could not be reached at all."""
    text = str(exc)
    if isinstance(exc, requests.ConnectTimeout):
        return "connection timed out", True
    if isinstance(exc, requests.Timeout) or "Read timed out" in text:
        return "read timed out", False
    if isinstance(exc, requests.exceptions.ChunkedEncodingError) or "IncompleteRead" in text:
        return "truncated body (connection closed early)", False
    if isinstance(exc, requests.ConnectionError):
        return "connection failed", True
    return type(exc).__name__, False


def _host(url: str) -> str:
    return urlparse(url).netloc or url
