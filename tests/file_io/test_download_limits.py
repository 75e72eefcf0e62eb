"""Downloads are bounded and only trusted when their end can be checked (issue 30, points 8,
10 and 12): an overall deadline, no body without a length or a hash, a size cap and a
free-space check before writing, redirects to http(s) only, one-line errors, checked limits.

A loopback server on 127.0.0.1 in a thread misbehaves per path; every trickle stops after
`MAX_TRICKLE_S` (or when the test ends), and the deadlines set here are 1 s.
"""

import contextlib
import hashlib
import http.server
import shutil
import threading
import time

import pytest

from elmo_keras.file_io import download
from elmo_keras.file_io.download import DownloadError, cache_location, cached_path
from tests.file_io.test_download import FIXTURES

BODY = (FIXTURES / "lm_weights.hdf5").read_bytes()
MAX_TRICKLE_S = 4.0


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path, stop = self.path, self.server.stop
        if path in ("/to-ftp", "/loop"):
            self.send_response(302)
            self.send_header("Location", "ftp://127.0.0.1:9/w.hdf5" if path == "/to-ftp" else path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/trickle-headers":  # the status line, then a header one byte at a time
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        else:
            self.send_response(200)
            if path == "/trickle-body":
                self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()  # /no-length*: HTTP/1.0, the body ends when the connection does
        if path.startswith("/trickle"):
            end = time.monotonic() + MAX_TRICKLE_S
            with contextlib.suppress(OSError):  # the client hung up
                while time.monotonic() < end and not stop.wait(0.05):
                    self.wfile.write(b"x")
                    self.wfile.flush()
            return
        self.wfile.write(BODY[: len(BODY) // 2] if path == "/no-length-cut" else BODY)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    served.daemon_threads, served.stop = True, threading.Event()
    thread = threading.Thread(target=served.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    served.url = lambda path: f"http://127.0.0.1:{served.server_address[1]}{path}"
    yield served
    served.stop.set()
    served.shutdown()
    served.server_close()
    thread.join(5)


@pytest.mark.parametrize("path", ["/trickle-headers", "/trickle-body"])
def test_a_server_sending_a_byte_at_a_time_is_stopped_by_the_deadline(path, server, monkeypatch):
    monkeypatch.setenv("ELMO_KERAS_READ_TIMEOUT", "5")  # every read gets a byte within 0.05 s
    monkeypatch.setenv("ELMO_KERAS_DOWNLOAD_DEADLINE", "1")
    url = server.url(path)
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"not finished within 1 s \(\d+ bytes kept") as info:
        cached_path(url)
    assert time.monotonic() - start < 2.5  # before: until the server gave up (12 s here)
    assert url in str(info.value) and "\n" not in str(info.value)
    assert not cache_location(url).exists()


def test_a_body_without_a_length_is_not_cached_as_complete(server):
    url = server.url("/no-length-cut")
    with pytest.raises(DownloadError, match="the server sent no Content-Length"):
        cached_path(url)  # before: half the file cached as the whole, for good
    assert not cache_location(url).exists()
    with pytest.raises(DownloadError, match=r"its sha256 is \w+, expected "):
        cached_path(url, sha256=hashlib.sha256(BODY).hexdigest())
    assert not cache_location(url).exists()
    whole = server.url("/no-length")  # with the file's sha256 the end can be checked
    assert cached_path(whole, sha256=hashlib.sha256(BODY).hexdigest()).read_bytes() == BODY


def test_a_file_over_the_size_limit_is_refused_before_writing(server, monkeypatch):
    monkeypatch.setenv("ELMO_KERAS_MAX_DOWNLOAD_MB", "0.1")
    url = server.url("/trickle-body")  # announces 450896 bytes
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"0.5 MB, over the limit of 0.1 MB .*_MAX_DOWNLOAD_MB"):
        cached_path(url)
    assert time.monotonic() - start < 1.5
    assert sorted(p.name for p in cache_location(url).parent.iterdir()) == [".lock"]


def test_a_file_larger_than_the_free_space_is_refused_before_writing(server, monkeypatch):
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=1000))
    url = server.url("/trickle-body")
    with pytest.raises(DownloadError, match=r"needs 0.5 MB in .*, where 0.0 MB are free"):
        cached_path(url)  # before: written until the disk was full
    assert sorted(p.name for p in cache_location(url).parent.iterdir()) == [".lock"]


def test_a_redirect_to_another_scheme_is_refused(server):
    url = server.url("/to-ftp")
    with pytest.raises(DownloadError) as info:
        cached_path(url)  # before: followed to the ftp:// URL
    assert str(info.value) == (
        f"could not download {url}: redirected (HTTP 302) to ftp://127.0.0.1:9/w.hdf5; only "
        "http:// and https:// are followed"
    )


def test_a_redirect_loop_is_one_line(server):
    url = server.url("/loop")
    with pytest.raises(DownloadError, match=r"a redirect loop \(HTTP 302 after \d+ redirects") as i:
        cached_path(url)
    assert "\n" not in str(i.value)  # before: three lines


@pytest.mark.parametrize(
    ("variable", "value", "limit"),
    [
        ("ELMO_KERAS_DOWNLOAD_DEADLINE", "1e300", "seconds in (0, 86400]"),
        ("ELMO_KERAS_DOWNLOAD_DEADLINE", "soon", "seconds in (0, 86400]"),
        ("ELMO_KERAS_MAX_DOWNLOAD_MB", "-1", "MB in (0, 1e+06]"),
        ("ELMO_KERAS_MAX_DOWNLOAD_MB", "nan", "MB in (0, 1e+06]"),
    ],
)
def test_the_download_limits_are_checked(variable, value, limit, monkeypatch):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as info:
        cached_path("http://127.0.0.1:9/weights.hdf5")
    assert str(info.value).endswith(f"a number of {limit}. Received: {variable}='{value}'")
    assert download.DEADLINE == 3600 and download.MAX_MB == 4096
