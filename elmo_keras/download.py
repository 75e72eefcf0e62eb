"""Model files by URL: `cached_path` downloads an `http(s)://` file once and reuses it.

Standard library only (no TensorFlow). A URL's file is cached as `<cache>/downloads/<sha256 of
the URL>/<its name>` (`<cache>`: `$ELMO_KERAS_CACHE`, else `~/.cache/elmo-keras`) beside a JSON
sidecar holding its URL, size and sha256, checked on every later use (a damaged copy is logged
and fetched again). The body is written to `<name>.partial` and renamed only once its length
matches `Content-Length`, so a cut or failed download leaves nothing under the final name. A
connection that drops mid-body is resumed with a `Range` request (`If-Range` guards against a
changed remote file; a server that answers 200 instead of 206 is read again from the start), up
to `retries` times in one call and again on a later call. Connecting and every wait for data are
bounded (defaults 10 s and 30 s; `$ELMO_KERAS_CONNECT_TIMEOUT`, `$ELMO_KERAS_READ_TIMEOUT`).
Every failure is one `DownloadError` (an `OSError`) whose message names the URL.
"""

import contextlib
import hashlib
import http.client
import json
import logging
import os
import pathlib
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from elmo_keras.files import write_text

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
# The longest timeout taken (a day): larger values (1e300) overflow the socket layer.
MAX_TIMEOUT = 86400.0
RETRIES = 2
CHUNK_BYTES = 1 << 20
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
logger = logging.getLogger(__name__)


class DownloadError(OSError):
    """A download failed; the message names the URL and why."""


def is_url(value):
    """True for an `http://` or `https://` URL given as a string."""
    return isinstance(value, str) and urllib.parse.urlsplit(value).scheme.lower() in (
        "http",
        "https",
    )


def default_cache_dir():
    """`$ELMO_KERAS_CACHE`, else `~/.cache/elmo-keras`."""
    configured = os.environ.get("ELMO_KERAS_CACHE")
    return pathlib.Path(configured or pathlib.Path.home() / ".cache" / "elmo-keras").expanduser()


def cache_location(url, cache_dir=None):
    """Where `url`'s file is (or will be) cached: `downloads/<sha256 of url>/<file name>`."""
    name = pathlib.PurePosixPath(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name
    if name in ("", ".", ".."):
        name = "download"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()
    return pathlib.Path(cache_dir or default_cache_dir()) / "downloads" / key / name


def cached_path(
    url_or_path,
    cache_dir=None,
    progress=True,
    connect_timeout=None,
    read_timeout=None,
    retries=RETRIES,
):
    """A local path for a model file: a local path as it is, a URL through the cache.

    Args:
        url_or_path: str or path-like. A local path (returned unchanged) or an `http://` /
            `https://` URL (downloaded into the cache unless a verified copy is there).
        cache_dir: path or None. Defaults to `default_cache_dir()`.
        progress: bool. Show a progress bar on stderr when stderr is a terminal. Defaults to
            `True`.
        connect_timeout, read_timeout: float seconds or None (the environment variables
            `ELMO_KERAS_CONNECT_TIMEOUT` / `ELMO_KERAS_READ_TIMEOUT`, else 10 and 30).
        retries: int. Resumptions after a connection drops mid-body, in this call. Defaults
            to `2`.

    Returns:
        `url_or_path` itself for a local path; the cached file's `pathlib.Path` for a URL.

    Raises:
        DownloadError: the download failed (HTTP error, timeout, cut body); names the URL.
        ValueError: a URL with another scheme (`ftp://`, `s3://`, ...), or a bad timeout.

    Example:
    >>> cached_path("elmo_keras/assets/tiny_allennlp/options.json")
    'elmo_keras/assets/tiny_allennlp/options.json'
    """
    if not is_url(url_or_path):
        return _local_path(url_or_path)
    timeouts = (
        _timeout(connect_timeout, "connect_timeout", "ELMO_KERAS_CONNECT_TIMEOUT", CONNECT_TIMEOUT),
        _timeout(read_timeout, "read_timeout", "ELMO_KERAS_READ_TIMEOUT", READ_TIMEOUT),
    )
    target = cache_location(url_or_path, cache_dir)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DownloadError(f"cannot create the cache folder for {url_or_path}: {error}") from None
    with _locked(target.parent):
        if _verified(target, url_or_path):
            return target
        _fetch(url_or_path, target, timeouts, retries, progress)
    return target


def _local_path(value):
    """A local path unchanged; a `file://` URL as its path; any other URL is an error."""
    if not isinstance(value, str) or not URL_SCHEME.match(value):
        return value
    parts = urllib.parse.urlsplit(value)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        return pathlib.Path(urllib.request.url2pathname(parts.path))
    raise ValueError(
        "`url_or_path` must be a local path or an http://, https:// or file:// URL. "
        f"Received: url_or_path={value!r}"
    )


def _timeout(value, name, variable, default):
    source = f"{name}={value!r}"
    if value is None:
        value = os.environ.get(variable, default)
        source = f"{variable}={value!r}"
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError(
            f"`{name}` must be a number of seconds in (0, {MAX_TIMEOUT:g}]. Received: {source}"
        )
    return seconds


def file_sha256(path):
    """The sha256 of a file's bytes, as 64 hex digits (read in blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _sidecar(target):
    return target.with_name(target.name + ".json")


def _verified(target, url):
    """True when `target` exists and matches its sidecar; a damaged entry is removed."""
    if not target.is_file():
        return False
    record = _read_json(_sidecar(target)) or {}
    if (
        record.get("url") == url
        and record.get("size") == target.stat().st_size
        and record.get("sha256") == file_sha256(target)
    ):
        return True
    logger.warning(
        "The cached copy of %s (%s) does not match its recorded size and sha256; "
        "downloading it again.",
        url,
        target,
    )
    target.unlink(missing_ok=True)
    _sidecar(target).unlink(missing_ok=True)
    return False


@contextlib.contextmanager
def _locked(folder):
    """An exclusive lock on `folder/.lock` (POSIX), so two processes never write one entry."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(folder / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Interrupted(Exception):
    """The body stopped early (a cut, a reset, a stalled read, a bad resume)."""

    def __init__(self, reason, resumable):
        super().__init__(reason)
        self.resumable = resumable


def _fetch(url, target, timeouts, retries, progress):
    """Downloads `url` to `target` through `<name>.partial`, resuming after interruptions."""
    partial = target.with_name(target.name + ".partial")
    resume_file = target.with_name(target.name + ".partial.json")
    state = _read_json(resume_file) or {}
    if not partial.is_file() or state.get("url") != url:
        state = {"url": url}
        partial.unlink(missing_ok=True)
    for attempt in range(retries + 1):
        try:
            size = _transfer(url, partial, (state, resume_file), timeouts, progress)
            break
        except _Interrupted as cut:
            write_text(resume_file, json.dumps(state))
            if not cut.resumable or attempt == retries:
                kept = partial.stat().st_size if partial.is_file() else 0
                raise DownloadError(
                    f"could not download {url}: {cut} ({kept} bytes kept to resume)"
                ) from None
        except DownloadError:
            partial.unlink(missing_ok=True)
            resume_file.unlink(missing_ok=True)
            raise
    # The sidecar first: a file under the final name always has one.
    record = {"url": url, "size": size, "sha256": file_sha256(partial)}
    write_text(_sidecar(target), json.dumps(record, indent=2) + "\n")
    os.replace(partial, target)
    resume_file.unlink(missing_ok=True)


def _transfer(url, partial, resume, timeouts, progress):
    """One request, appended to `partial` from its current size; returns the complete size.

    `resume` is `(state, resume_file)`: what a later call needs to resume (the validator and the
    total size), written as soon as the answer's headers are in, so an interrupt can resume too.
    """
    state, resume_file = resume
    offset = partial.stat().st_size if partial.is_file() else 0
    if offset and offset == state.get("total"):
        return offset  # complete on an earlier call, not yet renamed
    headers = {"User-Agent": "elmo-keras", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if state.get("validator"):
            headers["If-Range"] = state["validator"]
    response = _open(url, headers, timeouts, partial)
    with response:
        if response.status == 206 and offset:
            start, total = _content_range(response.headers.get("Content-Range"))
            if start != offset or state.get("total", total) != total:
                partial.unlink(missing_ok=True)
                raise _Interrupted("the server resumed at another byte", resumable=True)
        else:  # a whole answer, also to a Range request that the server ignored
            offset = 0
            length = response.headers.get("Content-Length", "")
            total = int(length) if length.isdigit() else None
            answer = response.headers
            state["validator"] = answer.get("ETag") or answer.get("Last-Modified")
        state["total"] = total
        write_text(resume_file, json.dumps(state))
        received = _copy(response, partial, offset, total, timeouts[1], progress)
    if total is not None and offset + received != total:
        raise _Interrupted(
            f"the connection closed after {offset + received} of {total} bytes",
            resumable=received > 0,
        )
    return offset + received


def _open(url, headers, timeouts, partial):
    """The HTTP response; an HTTP error, a refused connection or a timeout is a DownloadError."""
    connect_timeout, read_timeout = timeouts
    request = urllib.request.Request(url, headers=headers)
    try:
        return _opener(read_timeout).open(request, timeout=connect_timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and "Range" in headers:  # the partial file no longer fits
            partial.unlink(missing_ok=True)
            raise _Interrupted("the server refused to resume (HTTP 416)", resumable=True) from None
        reason = f"HTTP {error.code} {error.reason}"
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, TimeoutError):
            reason = f"no connection within {connect_timeout:g} s"
    except TimeoutError:
        reason = f"no answer within {read_timeout:g} s"
    except (OSError, http.client.HTTPException) as error:
        reason = error
    raise DownloadError(f"could not download {url}: {reason}")


def _copy(response, partial, offset, total, read_timeout, progress):
    """Appends the body to `partial` (from `offset`); returns the number of bytes received."""
    received = 0
    bar = _Progress(partial.name.removesuffix(".partial"), total, offset, progress)
    try:
        with open(partial, "ab" if offset else "wb") as handle:
            while True:
                try:
                    block = response.read1(CHUNK_BYTES)
                except TimeoutError:
                    raise _Interrupted(f"no data for {read_timeout:g} s", received > 0) from None
                except (OSError, http.client.HTTPException) as error:
                    raise _Interrupted(f"connection lost ({error})", received > 0) from None
                if not block:
                    return received
                handle.write(block)
                received += len(block)
                bar.update(offset + received)
    finally:
        bar.close()


def _content_range(header):
    """`bytes START-END/TOTAL` -> (START, TOTAL or None); (None, None) when malformed."""
    unit, _, spec = (header or "").partition(" ")
    span, _, total = spec.partition("/")
    try:
        start = int(span.partition("-")[0])
        return (start, None if total == "*" else int(total)) if unit == "bytes" else (None, None)
    except ValueError:
        return None, None


def _with_read_timeout(connection_class, read_timeout):
    """`connection_class` whose socket, once connected, waits at most `read_timeout` for data
    (the connection's own `timeout` then bounds the connect only)."""

    class Connection(connection_class):
        def connect(self):
            super().connect()
            self.sock.settimeout(read_timeout)

    return Connection


class _HTTPHandler(urllib.request.HTTPHandler):
    read_timeout = READ_TIMEOUT

    def http_open(self, req):
        connection = _with_read_timeout(http.client.HTTPConnection, self.read_timeout)
        return self.do_open(connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    read_timeout = READ_TIMEOUT

    def https_open(self, req):
        connection = _with_read_timeout(http.client.HTTPSConnection, self.read_timeout)
        return self.do_open(connection, req, context=self._context)


def _opener(read_timeout):
    """urllib's usual opener (proxies from the environment, redirects) with a read timeout."""
    handlers = [_HTTPHandler(), _HTTPSHandler()]
    for handler in handlers:
        handler.read_timeout = read_timeout
    return urllib.request.build_opener(*handlers)


class _Progress:
    """Bytes received, on one stderr line; silent unless enabled and stderr is a terminal."""

    def __init__(self, name, total, done, enabled):
        self.enabled = bool(enabled) and sys.stderr.isatty()
        self.name, self.total, self.first = name, total, done
        self.start = self.last = time.monotonic()
        self.shown = False

    def update(self, done):
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and done != self.total):
            return
        self.last, self.shown = now, True
        rate = (done - self.first) / max(now - self.start, 1e-9) / 1e6
        text = f"{done / 1e6:.1f} MB"
        if self.total:
            filled = int(30 * done / self.total)
            text = f"[{'#' * filled}{'-' * (30 - filled)}] {text} of {self.total / 1e6:.1f} MB"
        sys.stderr.write(f"\r{self.name}: {text}, {rate:.1f} MB/s")
        sys.stderr.flush()

    def close(self):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
