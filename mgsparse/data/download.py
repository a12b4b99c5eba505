"""Fetch one file by URL or from a mirror folder, verify its SHA-256, rename it into place.

`fetch` knows nothing of any dataset. Its contract, whatever happens:

- the bytes go to a temporary file in the destination's own folder (so the final
  ``os.replace`` is an atomic rename on the same filesystem);
- the file is renamed to ``dest`` only after its SHA-256 matched; every failure path removes
  the temporary file, and a cached ``dest`` whose checksum does not match is deleted first,
  so the folder never holds a partial or unverified file;
- connection errors, timeouts, truncated bodies and 5xx answers are retried with exponential
  backoff; 4xx answers are final (a 404 will not turn into a 200 by asking again);
- at most ``max_bytes`` are written: a mirror streaming an endless body is cut off there;
- SIGTERM (``kill``, ``timeout``, schedulers) removes the temporary file as Ctrl-C does, then
  ends the process as SIGTERM would have (see `sigterm_unwinds`);
- a malformed URL is a ConfigError and a file that cannot be written a DataError, each one
  line naming the URL or path.

Around it, what every downloading source (`mgsparse.data.sources`) needs: its base URL from
argument, variable or default (`resolve_url`), a file's place under a URL or mirror folder
(`source_of`), a hint when the host is unreachable (`mirror_hint`), and trust on first use for
files nobody publishes a checksum of (`fetch_unpinned`, `record_sha256`, `recorded_sha256`).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import ParseResult, urlparse
from urllib.request import url2pathname

from mgsparse.data.atomic import new_temp_file, sigterm_unwinds
from mgsparse.errors import ChecksumError, ConfigError, DataError, DownloadError

if TYPE_CHECKING:  # requests is imported where a download runs: 70 ms of every command's start
    import requests

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


# --- URLs -----------------------------------------------------------------------------------------

def parse_url(text: str) -> ParseResult:
    """``urlparse`` that turns a malformed URL (``http://[::1/``, a port of 99999) into a
    one-line ConfigError instead of a ValueError."""
    try:
        parsed = urlparse(str(text))
        parsed.port  # noqa: B018 -- parsing the port is what validates it
    except ValueError as exc:
        raise ConfigError(f"malformed URL {str(text)!r} ({exc}); give an http(s):// URL, a "
                          "file:// URL or a folder path") from None
    if parsed.scheme in ("http", "https") and not parsed.hostname:
        raise ConfigError(f"malformed URL {str(text)!r} (no host name); give an http(s):// "
                          "URL, a file:// URL or a folder path")
    return parsed


def is_remote(url_or_path: str) -> bool:
    return parse_url(url_or_path).scheme in ("http", "https")


def local_path(url_or_path: str | Path) -> Path:
    """A ``file://`` URL or a plain path, as a Path."""
    text = str(url_or_path)
    parsed = parse_url(text)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise ConfigError(f"unsupported URL scheme {parsed.scheme!r} in {text} "
                          "(use http(s)://, file:// or a folder path)")
    return Path(text)


def resolve_url(url: str | None, env: str, default: str) -> str:
    """A source's base: explicit argument (config ``dataset.url``) > the variable ``env`` >
    ``default``; a malformed one is a ConfigError naming the setting it came from."""
    chosen = url or os.environ.get(env) or default
    try:
        parse_url(chosen)
    except ConfigError as exc:
        setting = "dataset.url (--url)" if url else env
        raise ConfigError(f"{setting}: {exc}") from None
    return chosen


def source_of(base: str, filename: str) -> str:
    """The file's URL under an http(s) base, or its path under a mirror folder."""
    if is_remote(base):
        return base.rstrip("/") + "/" + filename
    return str(local_path(base) / filename)


@contextmanager
def mirror_hint(hint: str, url: str | None = None, env: str | None = None) -> Iterator[None]:
    """A DownloadError that could not reach its host gains ``hint`` (how to use a mirror),
    or, when the host came from a setting (``url``: dataset.url; else the variable ``env``),
    that the setting is set and unreachable: telling a user to set what they have set
    points nowhere."""
    try:
        yield
    except DownloadError as exc:
        if getattr(exc, "unreachable", False):
            raise type(exc)(f"{exc}; {_setting_hint(hint, url, env)}") from exc
        raise


def _setting_hint(hint: str, url: str | None, env: str | None) -> str:
    if url:
        return (f"the host is dataset.url's (--url), set to {url}: check it, or remove it "
                "to download from the dataset's own server")
    if env and os.environ.get(env):
        return (f"the host is {env}'s, set to {os.environ[env]}: check it, or unset it to "
                "download from the dataset's own server")
    return hint


# --- fetch ----------------------------------------------------------------------------------------

def fetch(url_or_path: str | Path, dest: Path, sha256: str, *, progress: Progress | None = None,
          timeout: tuple[float, float] = (5, 30), retries: int = 3,
          backoff: float = 0.5, max_bytes: int | None = None) -> Path:
    """Make ``dest`` a verified copy of ``url_or_path`` and return it.

    ``timeout`` is (connect, read) seconds per attempt; a failed attempt is retried up to
    ``retries`` times, sleeping ``backoff * 2**k`` seconds before retry k+1.
    ``progress(done_bytes, total_bytes_or_None, filename)`` is called as bytes arrive
    (total is None when the server sends no Content-Length). A source announcing or sending
    more than ``max_bytes`` is abandoned at once, with no more than ``max_bytes`` written.
    """
    dest = Path(dest)
    if not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256)):
        raise ChecksumError(f"no valid SHA-256 given for {dest.name} ({sha256!r}): an "
                            "unverifiable file is never fetched")
    remote = is_remote(str(url_or_path))  # a malformed URL fails before the cache is touched
    source = str(url_or_path) if remote else local_path(url_or_path)
    try:
        if dest.is_file():
            if sha256_file(dest) == sha256:
                return dest  # verified cache: no bytes move, so no progress is reported
            dest.unlink()  # stale or tampered: it must not stay beside verified files
        dest.parent.mkdir(parents=True, exist_ok=True)
        with sigterm_unwinds():
            _fetch_to_temp(source, dest, sha256, progress, max_bytes,
                           (timeout, retries, backoff) if remote else None)
    except OSError as exc:  # requests' errors are OSErrors too, but never get this far
        raise DataError(f"cannot write {exc.filename or dest}: {exc.strerror or exc}; check "
                        "that the folder is writable and the disk not full") from None
    return dest


def _fetch_to_temp(source: str | Path, dest: Path, sha256: str, progress: Progress | None,
                   max_bytes: int | None, http: tuple | None) -> None:
    """Bytes into ``.<name>.*.part`` beside ``dest``, renamed only once the SHA-256 matched;
    the temporary file is removed on every way out (exceptions, Ctrl-C, SIGTERM)."""
    tmp = None
    try:
        fd, tmp = new_temp_file(dest.parent, f".{dest.name}.", ".part")
        with os.fdopen(fd, "wb") as out:
            if http is not None:
                digest = _download(str(source), out, dest.name, progress, max_bytes, *http)
            else:
                digest = _copy(Path(source), out, dest.name, progress, max_bytes)
        if digest != sha256:
            raise ChecksumError(f"{dest.name} from {source} has SHA-256 {digest[:16]}..., "
                                f"expected {sha256[:16]}...; the file was discarded")
        os.replace(tmp, dest)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def fetch_unpinned(url_or_path: str, dest: Path, max_bytes: int,
                   progress: Progress | None = None, *, timeout: tuple[float, float] = (5, 30),
                   retries: int = 3, backoff: float = 0.5) -> Path:
    """`fetch` for a file whose checksum nobody knows yet (trust on first use): the same
    retries, timeouts, size cap, progress, SIGTERM cleanup and atomic rename, without the
    comparison. The caller checks the file's content, then `record_sha256` pins it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temp_file(dest.parent, f".{dest.name}.", ".part")
    try:
        with sigterm_unwinds(), os.fdopen(fd, "wb") as out:
            if is_remote(url_or_path):
                _download(url_or_path, out, dest.name, progress, max_bytes, timeout, retries,
                          backoff)
            else:
                _copy(local_path(url_or_path), out, dest.name, progress, max_bytes)
        os.replace(tmp, dest)
    except OSError as exc:
        raise DataError(f"cannot write {exc.filename or dest}: {exc.strerror or exc}; check "
                        "that the folder is writable and the disk not full") from None
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def recorded_sha256(path: Path) -> str | None:
    """The SHA-256 recorded on first use beside ``path`` (``sha256sum`` format), or None."""
    record = path.with_name(path.name + ".sha256")
    try:
        text = record.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    return text[0] if text and re.fullmatch(r"[0-9a-f]{64}", text[0]) else None


def record_sha256(path: Path) -> None:
    """Pin ``path``'s SHA-256 in ``<path>.sha256``: later fetches must match it."""
    record = path.with_name(path.name + ".sha256")
    try:
        record.write_text(f"{sha256_file(path)}  {path.name}\n", encoding="ascii")
    except OSError as exc:
        raise DataError(f"cannot record the checksum in {record}: {exc.strerror or exc}; "
                        "check that the folder is writable") from None


def probe(url_or_path: str, timeout: tuple[float, float] = (5, 30)) -> bool:
    """Whether the source has the file (HTTP HEAD, or a stat for a folder mirror)."""
    if not is_remote(url_or_path):
        return local_path(url_or_path).is_file()
    import requests

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


def _write_capped(chunks: Iterable[bytes], out, name: str, source: str | Path,
                  total: int | None, progress: Progress | None,
                  max_bytes: int | None) -> tuple[str, int]:
    """(SHA-256, bytes written) of the chunks written to ``out``. A source announcing, or
    sending, more than ``max_bytes`` is refused before the byte beyond the cap is written."""
    limit = max_bytes if max_bytes is not None else float("inf")
    digest, done = hashlib.sha256(), 0
    if total is not None and total > limit:
        raise _too_big(name, source, max_bytes)
    for chunk in chunks:
        if done + len(chunk) > limit:
            raise _too_big(name, source, max_bytes)
        out.write(chunk)
        digest.update(chunk)
        done += len(chunk)
        if progress is not None:
            progress(done, total, name)
    return digest.hexdigest(), done


def _too_big(name: str, source: str | Path, max_bytes: int) -> DownloadError:
    return DownloadError(f"{name} from {source} is larger than the {max_bytes:,} bytes it can "
                         "be; the download was stopped and nothing kept (wrong or hostile "
                         "mirror?)")


# --- local mirror -----------------------------------------------------------------------------

def _copy(source: Path, out, name: str, progress: Progress | None,
          max_bytes: int | None) -> str:
    if not source.is_file():
        raise DownloadError(f"{name} not found in mirror folder {source.parent}")
    try:
        src = open(source, "rb")  # noqa: SIM115 -- closed by the `with src` below
    except OSError as exc:
        raise DownloadError(f"cannot read {source}: {exc.strerror or exc}") from None
    with src:
        chunks = iter(lambda: src.read(CHUNK_BYTES), b"")
        digest, _ = _write_capped(chunks, out, name, source, source.stat().st_size, progress,
                                  max_bytes)
    return digest


# --- HTTP ---------------------------------------------------------------------------------------

def _download(url: str, out, name: str, progress: Progress | None, max_bytes: int | None,
              timeout: tuple[float, float], retries: int, backoff: float) -> str:
    last: _Transient | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        out.seek(0)
        out.truncate()  # a retry starts from an empty file
        try:
            return _download_once(url, out, name, progress, timeout, max_bytes)
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


def _download_once(url: str, out, name: str, progress: Progress | None,
                   timeout: tuple[float, float], max_bytes: int | None) -> str:
    # identity encoding: Content-Length then counts the very bytes we hash and store.
    headers = {"Accept-Encoding": "identity"}
    import requests

    try:
        with requests.get(url, stream=True, timeout=timeout, headers=headers) as response:
            if response.status_code >= 500:
                raise _Transient(f"HTTP {response.status_code} {response.reason}")
            if response.status_code != 200:
                raise DownloadError(f"cannot download {name}: {url} answered HTTP "
                                    f"{response.status_code} {response.reason}")
            total = _content_length(response)
            digest, done = _write_capped(response.iter_content(CHUNK_BYTES), out, name, url,
                                         total, progress, max_bytes)
    except requests.exceptions.InvalidURL as exc:
        raise ConfigError(f"malformed URL {url!r} ({exc})") from None
    except requests.RequestException as exc:
        reason, unreachable = _reason(exc)
        raise _Transient(reason, unreachable) from exc
    if total is not None and done != total:
        raise _Transient(f"truncated body: {done} of {total} bytes")
    return digest


def _content_length(response: requests.Response) -> int | None:
    if response.headers.get("Content-Encoding", "identity") != "identity":
        return None
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _reason(exc: requests.RequestException) -> tuple[str, bool]:
    """A short human reason, and whether the host could not be reached at all."""
    import requests

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
