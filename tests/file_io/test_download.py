"""`elmo_keras.file_io.download.cached_path` against a loopback HTTP server with injected faults.

Every test is bounded: the server runs on 127.0.0.1 in a thread, a handler never waits longer
than `FileServer.MAX_STALL_S`, and the timeouts set here are fractions of a second.
`FileServer` and `serve_presets` are shared with tests/test_presets.py and tests/cli/.
"""

import hashlib
import http.server
import io
import json
import logging
import pathlib
import socket
import threading
import time

import pytest

from elmo_keras.file_io import download
from elmo_keras.file_io.download import DownloadError, cache_location, cached_path

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "allennlp"
ETAG = '"fixture-v1"'


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves `server.files`; `server.faults[path]` names the misbehaviour for that path."""

    def do_GET(self):
        server, path = self.server, self.path
        entry = {"path": path, "range": self.headers.get("Range")}
        entry["if_range"] = self.headers.get("If-Range")
        with server.lock:
            server.log.append(entry)
            count = sum(1 for e in server.log if e["path"] == path)
        body, fault = server.files.get(path), server.faults.get(path, "")
        if body is None:
            entry["status"] = 404
            self.send_error(404, "Not Found")
            return
        first_time = count == 1
        if fault == "cut" or ("once" in fault and first_time):
            # Announce the whole body, send half of it, then close (or stall, then close).
            entry["status"] = 200
            self._headers(200, len(body))
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if fault == "stall_once":
                server.release.wait(server.MAX_STALL_S)
            self.close_connection = True
            return
        start = _range_start(self.headers.get("Range"))
        if start is None or fault == "drop_once_no_range":
            entry["status"] = 200
            self._headers(200, len(body))
            self.wfile.write(body)
            return
        entry["status"] = 206
        self._headers(206, len(body) - start, f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.wfile.write(body[start:])

    def _headers(self, status, length, content_range=None):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("ETag", ETAG)
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()

    def log_message(self, *args):  # quiet
        pass


def _range_start(header):
    if not header or not header.startswith("bytes="):
        return None
    return int(header.removeprefix("bytes=").partition("-")[0])


class FileServer(http.server.ThreadingHTTPServer):
    """A loopback HTTP server in a thread: `files` {url path: bytes}, `faults`, `log`."""

    daemon_threads = True
    MAX_STALL_S = 5.0

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files, self.faults, self.log = {}, {}, []
        self.lock, self.release = threading.Lock(), threading.Event()
        self.thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def requests(self, path):
        return [e for e in self.log if e["path"] == path]

    def stop(self):
        self.release.set()
        self.shutdown()
        self.server_close()
        self.thread.join(5)


def serve_presets(server, monkeypatch, tmp_path, folder=FIXTURES, pin=True):
    """Serves `folder`'s options.json and lm_weights.hdf5 under every published preset's names,
    with `$ELMO_KERAS_MIRROR` pointing at the server and `$ELMO_KERAS_CACHE` in `tmp_path`.
    With `pin`, each preset's pinned architecture becomes the served files' (else the small
    fixture under the published names is refused as another model)."""
    from elmo_keras.options import read_options
    from elmo_keras.presets import PRESETS, architecture

    options, weights = (
        (folder / "options.json").read_bytes(),
        (folder / "lm_weights.hdf5").read_bytes(),
    )
    for entry in PRESETS.values():
        if "package" not in entry and "efml" not in entry:  # EFML's: tests/test_efml_presets.py
            server.files["/elmo/" + entry["options"]] = options
            server.files["/elmo/" + entry["weights"]] = weights
            if pin:
                served = architecture(read_options(folder / "options.json"))
                monkeypatch.setitem(entry, "architecture", served)
    monkeypatch.setenv("ELMO_KERAS_MIRROR", server.url("/elmo/"))
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    return server


def start_server(monkeypatch, tmp_path):
    """A `FileServer` holding the fixture weights at `WEIGHTS`, the cache in `tmp_path`."""
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ELMO_KERAS_READ_TIMEOUT", "5")
    monkeypatch.setenv("ELMO_KERAS_CONNECT_TIMEOUT", "5")
    served = FileServer()
    served.files["/m/lm_weights.hdf5"] = (FIXTURES / "lm_weights.hdf5").read_bytes()
    return served


@pytest.fixture
def server(monkeypatch, tmp_path):
    served = start_server(monkeypatch, tmp_path)
    yield served
    served.stop()


WEIGHTS = "/m/lm_weights.hdf5"


def _entry_files(url):
    folder = cache_location(url).parent
    return sorted(p.name for p in folder.iterdir() if p.name != ".lock") if folder.is_dir() else []


def test_local_paths_pass_through_and_other_schemes_are_refused(tmp_path):
    path = tmp_path / "options.json"
    assert cached_path(path) is path
    assert cached_path("relative/options.json") == "relative/options.json"
    assert cached_path(f"file://{path}") == path
    with pytest.raises(ValueError, match=r"`url_or_path` must be .* Received: url_or_path='s3://"):
        cached_path("s3://bucket/weights.hdf5")


def test_a_download_is_cached_with_its_size_and_sha256(server, tmp_path):
    url = server.url(WEIGHTS)
    path = cached_path(url)
    body = server.files[WEIGHTS]
    assert path == tmp_path / "cache" / "downloads" / hashlib.sha256(url.encode()).hexdigest() / (
        "lm_weights.hdf5"
    )
    assert path.read_bytes() == body
    record = json.loads(path.with_name("lm_weights.hdf5.json").read_text())
    assert record == {"url": url, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    assert _entry_files(url) == ["lm_weights.hdf5", "lm_weights.hdf5.json"]
    assert cached_path(url) == path and len(server.requests(WEIGHTS)) == 1  # no second request


def test_http_404_is_one_error_naming_the_url_and_leaves_nothing(server):
    url = server.url("/m/missing_weights.hdf5")
    with pytest.raises(DownloadError, match="HTTP 404") as info:
        cached_path(url)
    assert isinstance(info.value, OSError) and url in str(info.value)
    assert _entry_files(url) == []


def test_a_body_cut_short_fails_naming_the_url_and_keeps_nothing_under_the_final_name(server):
    server.faults[WEIGHTS] = "cut"  # Content-Length says more than is sent, then close
    url = server.url(WEIGHTS)
    with pytest.raises(DownloadError, match="connection closed after") as info:
        cached_path(url)
    assert url in str(info.value)
    assert len(server.requests(WEIGHTS)) == 1 + download.RETRIES  # resumed, cut every time
    target = cache_location(url)
    assert not target.exists() and not target.with_name(target.name + ".json").exists()
    assert "lm_weights.hdf5" not in _entry_files(url)


def test_a_dropped_connection_is_resumed_with_a_range_request(server):
    server.faults[WEIGHTS] = "drop_once"
    body = server.files[WEIGHTS]
    path = cached_path(server.url(WEIGHTS))
    first, second = server.requests(WEIGHTS)
    assert (first["range"], first["status"]) == (None, 200)
    assert (second["range"], second["status"]) == (f"bytes={len(body) // 2}-", 206)
    assert second["if_range"] == ETAG
    assert path.read_bytes() == body


def test_a_cut_download_resumes_on_the_next_call(server):
    server.faults[WEIGHTS] = "drop_once"
    url = server.url(WEIGHTS)
    with pytest.raises(DownloadError, match="bytes kept to resume"):
        cached_path(url, retries=0)
    assert _entry_files(url) == ["lm_weights.hdf5.partial", "lm_weights.hdf5.partial.json"]
    path = cached_path(url)
    assert [r["status"] for r in server.requests(WEIGHTS)] == [200, 206]
    assert path.read_bytes() == server.files[WEIGHTS]
    assert _entry_files(url) == ["lm_weights.hdf5", "lm_weights.hdf5.json"]


def test_a_server_that_ignores_range_is_read_again_from_the_start(server):
    server.faults[WEIGHTS] = "drop_once_no_range"
    path = cached_path(server.url(WEIGHTS))
    second = server.requests(WEIGHTS)[1]
    assert second["range"] is not None and second["status"] == 200
    assert path.read_bytes() == server.files[WEIGHTS]


def test_a_stalled_body_times_out_and_is_resumed(server):
    server.faults[WEIGHTS] = "stall_once"  # half the body, then silence
    start = time.monotonic()
    path = cached_path(server.url(WEIGHTS), read_timeout=0.3)
    assert time.monotonic() - start < 3
    assert [r["status"] for r in server.requests(WEIGHTS)] == [200, 206]
    assert path.read_bytes() == server.files[WEIGHTS]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_server_that_never_answers_fails_within_the_read_timeout(how, monkeypatch, tmp_path):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    silent = socket.create_server(("127.0.0.1", 0))  # listens (the kernel accepts), never answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/elmo/weights.hdf5"
    kwargs = {"read_timeout": 0.4} if how == "argument" else {}
    monkeypatch.setenv("ELMO_KERAS_READ_TIMEOUT", "0.4" if how == "environment" else "60")
    start = time.monotonic()
    try:
        with pytest.raises(DownloadError, match=r"no answer within 0.4 s") as info:
            cached_path(url, **kwargs)
    finally:
        silent.close()
    assert time.monotonic() - start < 3
    assert url in str(info.value) and _entry_files(url) == []


def test_a_refused_connection_is_one_error_naming_the_url(monkeypatch, tmp_path):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/weights.hdf5"
    closed.close()
    with pytest.raises(DownloadError, match="could not download http://127.0.0.1:"):
        cached_path(url, connect_timeout=2)


def test_a_corrupted_cache_entry_is_detected_and_fetched_again(server, caplog):
    url = server.url(WEIGHTS)
    path = cached_path(url)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # same size: only the sha256 can tell
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="elmo_keras.file_io.download"):
        assert cached_path(url) == path
    assert "does not match its recorded size and sha256" in caplog.text and url in caplog.text
    assert len(server.requests(WEIGHTS)) == 2
    assert path.read_bytes() == server.files[WEIGHTS]
    path.with_name("lm_weights.hdf5.json").unlink()  # a file without its record is not trusted
    assert cached_path(url).read_bytes() == server.files[WEIGHTS]
    assert len(server.requests(WEIGHTS)) == 3


def test_timeouts_are_checked(monkeypatch):
    monkeypatch.setenv("ELMO_KERAS_READ_TIMEOUT", "soon")
    with pytest.raises(ValueError, match=r"`read_timeout` .* Received: ELMO_KERAS_READ_TIMEOUT="):
        cached_path("http://127.0.0.1:9/weights.hdf5")
    with pytest.raises(ValueError, match=r"Received: connect_timeout=0"):
        cached_path("http://127.0.0.1:9/weights.hdf5", connect_timeout=0, read_timeout=1)
    # Too large overflowed the socket layer (a 62-line OverflowError; issue 30, point 9).
    for value in ("1e300", "inf", "nan", "86401"):
        monkeypatch.setenv("ELMO_KERAS_CONNECT_TIMEOUT", value)
        message = r"`connect_timeout` must be a number of seconds in \(0, 86400\]. Received: "
        with pytest.raises(ValueError, match=message + rf"ELMO_KERAS_CONNECT_TIMEOUT='{value}'"):
            cached_path("http://127.0.0.1:9/weights.hdf5", read_timeout=1)


def test_the_progress_bar_shows_on_a_terminal_only(server, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    cached_path(server.url(WEIGHTS))
    assert "lm_weights.hdf5: [" in terminal.getvalue() and terminal.getvalue().endswith("\n")
    quiet = Terminal()
    monkeypatch.setattr("sys.stderr", quiet)
    server.files["/other/lm_weights.hdf5"] = server.files[WEIGHTS]
    cached_path(server.url("/other/lm_weights.hdf5"), progress=False)
    assert quiet.getvalue() == ""
