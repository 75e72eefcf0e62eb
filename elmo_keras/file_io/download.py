"""Model files by URL: `cached_path` downloads an `http(s)://` file once and reuses it.

Standard library only (no TensorFlow). A URL's file is cached as `<cache>/downloads/<sha256 of
the URL>/<its name>` (`<cache>`: `$ELMO_KERAS_CACHE`, else `~/.cache/elmo-keras`) beside a JSON
sidecar holding its URL, size and sha256, checked on every later use (a damaged copy is logged
and fetched again). The body is written to `<name>.partial` and renamed only once its length
matches `Content-Length` (or its chunked encoding ended, or its sha256 matches the one given):
a body whose end cannot be checked is refused, so a cut download is never taken as complete. A
connection that drops mid-body is resumed with a `Range` request (`If-Range` guards against a
changed remote file; a server that answers 200 instead of 206 is read again from the start), up
to `retries` times in one call and again on a later call. Connecting and every wait for data are
bounded (defaults 10 s and 30 s; `$ELMO_KERAS_CONNECT_TIMEOUT`, `$ELMO_KERAS_READ_TIMEOUT`), and
so is the whole download (3600 s, `$ELMO_KERAS_DOWNLOAD_DEADLINE`; `elmo_keras.file_io.deadline`).
Redirects go to `http(s)://` only. A file over `$ELMO_KERAS_MAX_DOWNLOAD_MB` (4096) or larger
than the free disk space is refused before it is written. The cache's folders are the user's
own, 0700, and no file in them is opened through a link (`elmo_keras.file_io.cache_folder`). Every
failure is one `DownloadError` (an `OSError`) whose message names the URL.
"""

import collections
import hashlib
import http.client
import logging
import os
import pathlib
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request

from elmo_keras.file_io.cache_folder import LOCK_FILE, CacheFolder
from elmo_keras.file_io.deadline import Deadline
from elmo_keras.file_io.download_progress import DownloadProgress

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
DEADLINE = 3600.0  # a whole download; what arrived is kept, and the next call resumes it
MAX_MB = 4096.0  # the largest download (the published ELMo weights are under 400 MB)
CONNECT_VARIABLE = "ELMO_KERAS_CONNECT_TIMEOUT"
READ_VARIABLE = "ELMO_KERAS_READ_TIMEOUT"
DEADLINE_VARIABLE = "ELMO_KERAS_DOWNLOAD_DEADLINE"
MAX_MB_VARIABLE = "ELMO_KERAS_MAX_DOWNLOAD_MB"
# The longest timeout taken (a day): larger values (1e300) overflow the socket layer.
MAX_TIMEOUT = 86400.0
RETRIES = 2
CHUNK_BYTES = 1 << 20
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
logger = logging.getLogger(__name__)
_Plan = collections.namedtuple("_Plan", "connect read deadline max_bytes sha256 progress")


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
    """Where `url`'s file is (or will be) cached: `downloads/<sha256 of url>/<file name>`; a
    name that cannot be a file's, or is the folder's lock file's (`.lock`), is `download`."""
    name = pathlib.PurePosixPath(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name
    if name in ("", ".", "..", LOCK_FILE):
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
    deadline=None,
    sha256=None,
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
        deadline: float seconds or None. The whole download, headers and body, resumptions
            included (`ELMO_KERAS_DOWNLOAD_DEADLINE`, else 3600); what arrived is kept to resume.
        sha256: str or None. The file's known sha256: a download that does not match it is
            deleted, and a server that sends no length can then be trusted.

    Returns:
        `url_or_path` itself for a local path; the cached file's `pathlib.Path` for a URL.

    Raises:
        DownloadError: the download failed (HTTP error, timeout, cut body, too large, a cache
            folder that holds links or another user's files); names the URL.
        ValueError: a URL with another scheme (`ftp://`, `s3://`, ...), or a bad limit.

    Example:
    >>> cached_path("elmo_keras/assets/tiny_allennlp/options.json")
    'elmo_keras/assets/tiny_allennlp/options.json'
    """
    if not is_url(url_or_path):
        return _local_path(url_or_path)
    plan = _Plan(
        _number(connect_timeout, "connect_timeout", CONNECT_VARIABLE, CONNECT_TIMEOUT),
        _number(read_timeout, "read_timeout", READ_VARIABLE, READ_TIMEOUT),
        _number(deadline, "deadline", DEADLINE_VARIABLE, DEADLINE),
        int(_number(None, "max_download_mb", MAX_MB_VARIABLE, MAX_MB, 1e6, "MB") * 1e6),
        sha256,
        progress,
    )
    target = cache_location(url_or_path, cache_dir)
    folder = CacheFolder(target.parents[2], ("downloads", target.parent.name))
    try:
        with folder, folder.locked():
            if not _verified(folder, target.name, url_or_path, sha256):
                _fetch(url_or_path, folder, target.name, plan, retries)
    except DownloadError:
        raise
    except OSError as error:  # the cache folder itself (permissions, links, a full disk)
        raise DownloadError(f"cannot use the cache for {url_or_path}: {error}") from None
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


def _number(value, name, variable, default, limit=MAX_TIMEOUT, unit="seconds"):
    """`value`, else `$variable`, else `default`, as a float in (0, limit]; anything else is
    one `ValueError` naming the argument or the variable, the limit and the value."""
    source = f"{name}={value!r}"
    if value is None:
        value = os.environ.get(variable, default)
        source = f"{variable}={value!r}"
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not 0 < number <= limit:
        raise ValueError(
            f"`{name}` must be a number of {unit} in (0, {limit:g}]. Received: {source}"
        )
    return number


def file_sha256(path):
    """The sha256 of a file's bytes, as 64 hex digits (read in blocks)."""
    with open(path, "rb") as handle:
        return handle_sha256(handle)


def handle_sha256(handle):
    """The sha256 of what is left to read in a binary file object, as 64 hex digits."""
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
        digest.update(block)
    return digest.hexdigest()


def _verified(folder, name, url, sha256):
    """True when `name` exists and matches its sidecar (and `sha256` when given); a damaged
    entry is removed."""
    size = folder.size(name)
    if size is None:
        return False
    record = folder.read_json(name + ".json") or {}
    with folder.open(name) as handle:
        digest = handle_sha256(handle)
    if (
        record.get("url") == url
        and record.get("size") == size
        and record.get("sha256") == digest
        and sha256 in (None, digest)
    ):
        return True
    logger.warning(
        "The cached copy of %s (%s) does not match its recorded size and sha256; "
        "downloading it again.",
        url,
        folder.file(name),
    )
    folder.unlink(name)
    folder.unlink(name + ".json")
    return False


class _Interrupted(Exception):
    """The body stopped early (a cut, a reset, a stalled read, a bad resume, the deadline)."""

    def __init__(self, reason, resumable):
        super().__init__(reason)
        self.resumable = resumable


def _fetch(url, folder, name, plan, retries):
    """Downloads `url` to `name` through `<name>.partial`, resuming after interruptions."""
    partial, resume_file = name + ".partial", name + ".partial.json"
    state = folder.read_json(resume_file) or {}
    if folder.size(partial) is None or state.get("url") != url:
        state = {"url": url}
        folder.unlink(partial)
    deadline = Deadline(plan.deadline)
    try:
        for attempt in range(retries + 1):
            try:
                size = _transfer(url, (folder, partial), (state, resume_file), plan, deadline)
                break
            except _Interrupted as cut:
                folder.write_json(resume_file, state)
                kept = folder.size(partial) or 0
                if deadline.expired:
                    raise DownloadError(
                        f"could not download {url}: not finished within {plan.deadline:g} s "
                        f"({kept} bytes kept to resume; `deadline`, ${DEADLINE_VARIABLE})"
                    ) from None
                if not cut.resumable or attempt == retries:
                    raise DownloadError(
                        f"could not download {url}: {cut} ({kept} bytes kept to resume)"
                    ) from None
            except DownloadError:
                folder.unlink(partial)
                folder.unlink(resume_file)
                raise
    finally:
        deadline.cancel()
    with folder.open(partial) as handle:
        digest = handle_sha256(handle)
    if plan.sha256 is not None and digest != plan.sha256:
        folder.unlink(partial)
        folder.unlink(resume_file)
        raise DownloadError(
            f"could not download {url}: its sha256 is {digest}, expected {plan.sha256} (deleted)"
        )
    # The sidecar first: a file under the final name always has one.
    folder.write_json(name + ".json", {"url": url, "size": size, "sha256": digest})
    folder.replace(partial, name)
    folder.unlink(resume_file)


def _transfer(url, files, resume, plan, deadline):
    """One request, appended to the partial file from its current size; returns the complete
    size. `files` is `(folder, partial name)`; `resume` is `(state, resume_file)`: what a later
    call needs to resume (the validator and the total size), written as soon as the answer's
    headers are in, so an interrupt can resume too.
    """
    (folder, partial), (state, resume_file) = files, resume
    offset = folder.size(partial) or 0
    if offset and offset == state.get("total"):
        return offset  # complete on an earlier call, not yet renamed
    headers = {"User-Agent": "elmo-keras", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if state.get("validator"):
            headers["If-Range"] = state["validator"]
    response = _open(url, headers, plan, deadline, files)
    with response:
        if response.status == 206 and offset:
            start, total = _content_range(response.headers.get("Content-Range"))
            if start != offset or state.get("total", total) != total:
                folder.unlink(partial)
                raise _Interrupted("the server resumed at another byte", resumable=True)
        else:  # a whole answer, also to a Range request that the server ignored
            offset = 0
            length = response.headers.get("Content-Length", "")
            total = int(length) if length.isdigit() else None
            answer = response.headers
            state["validator"] = answer.get("ETag") or answer.get("Last-Modified")
        _check_size(url, total, offset, response.chunked, plan, folder)
        state["total"] = total
        folder.write_json(resume_file, state)
        received = _copy(response, (url, folder, partial), offset, total, plan, deadline)
    if total is not None and offset + received != total:
        raise _Interrupted(
            f"the connection closed after {offset + received} of {total} bytes",
            resumable=received > 0,
        )
    return offset + received


def _check_size(url, total, offset, chunked, plan, folder):
    """Refuses, before a byte is written, a body whose end cannot be checked, one over the
    size limit, or one the disk has no room for."""
    if total is None and not chunked and plan.sha256 is None:
        raise DownloadError(
            f"could not download {url}: the server sent no Content-Length, so a cut body "
            "could not be told from a complete one (use a server or mirror that sends it)"
        )
    if total is not None and total > plan.max_bytes:
        raise DownloadError(
            f"could not download {url}: it is {total / 1e6:.1f} MB, over the limit of "
            f"{plan.max_bytes / 1e6:g} MB (${MAX_MB_VARIABLE})"
        )
    free = shutil.disk_usage(folder.path).free
    if total is not None and total - offset > free:
        raise DownloadError(
            f"could not download {url}: it needs {(total - offset) / 1e6:.1f} MB in "
            f"{folder.path}, where {free / 1e6:.1f} MB are free"
        )


def _open(url, headers, plan, deadline, files):
    """The HTTP response; an HTTP error, a refused connection or a timeout is a DownloadError,
    the deadline an `_Interrupted` (what arrived is kept)."""
    request = urllib.request.Request(url, headers=headers)
    if deadline.expired:
        raise _Interrupted("the deadline passed", resumable=False)
    connect_timeout = max(min(plan.connect, deadline.left()), 1e-3)
    try:
        response = deadline.opener(plan.read).open(request, timeout=connect_timeout)
        if not deadline.expired:
            return response
        response.close()  # the headers were cut short at the deadline
    except urllib.error.HTTPError as error:
        error.close()
        if error.code == 416 and "Range" in headers:  # the partial file no longer fits
            files[0].unlink(files[1])
            raise _Interrupted("the server refused to resume (HTTP 416)", resumable=True) from None
        reason = f"HTTP {error.code} {error.reason}"
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, TimeoutError):
            reason = f"no connection within {connect_timeout:g} s"
    except TimeoutError:
        reason = f"no answer within {plan.read:g} s"
    except (OSError, http.client.HTTPException) as error:
        reason = error
    if deadline.expired:  # what stopped the answer
        raise _Interrupted("the deadline passed", resumable=False)
    raise DownloadError(f"could not download {url}: {' '.join(str(reason).split())}")


def _copy(response, where, offset, total, plan, deadline):
    """Appends the body to the partial file (from `offset`); returns the bytes received."""
    url, folder, partial = where
    received = 0
    bar = DownloadProgress(partial.removesuffix(".partial"), total, offset, plan.progress)
    try:
        with folder.open(partial, "ab" if offset else "wb") as handle:
            while True:
                try:
                    block = response.read1(CHUNK_BYTES)
                except TimeoutError:
                    raise _Interrupted(f"no data for {plan.read:g} s", received > 0) from None
                except (OSError, http.client.HTTPException) as error:
                    raise _Interrupted(f"connection lost ({error})", received > 0) from None
                if not block:
                    return received
                if offset + received + len(block) > plan.max_bytes:
                    raise DownloadError(
                        f"could not download {url}: it is over the limit of "
                        f"{plan.max_bytes / 1e6:g} MB (${MAX_MB_VARIABLE})"
                    )
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
