"""A download's overall deadline: a timer that shuts its sockets when the time is up.

A per-read timeout alone never stops a server that sends one byte a second, in its headers or
its body. `Deadline(seconds)` starts a timer; `Deadline.opener(read_timeout)` is urllib's usual
opener (proxies from the environment, redirects) whose every socket waits at most
`read_timeout` for data and is `watch`ed: when the time is up each is shut down, so whatever
waits on it (the status line, a header, the body) returns at once and the download sees
`expired`. Its redirects go to `http://` and `https://` only, at every hop (urllib alone also
follows `ftp://`), and a redirect loop is one short reason.

Standard library only.
"""

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


class Deadline:
    """The end of a download's time, enforced on its sockets.

    Args:
        seconds: float. The time allowed from now.

    Example:
    >>> deadline = Deadline(60)
    >>> deadline.expired, 0 < deadline.left() <= 60
    (False, True)
    >>> deadline.cancel()
    """

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds
        self.expired = False
        self._sockets = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self):
        """The seconds left (0 when the time is up)."""
        return max(self.end - time.monotonic(), 0.0)

    def watch(self, sock):
        """Shuts `sock` down when the time is up (at once if it already is)."""
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def opener(self, read_timeout):
        """An opener whose sockets wait at most `read_timeout` for data (the `timeout` given
        to `open` then bounds the connect only), are shut at the deadline, and whose redirects
        stay on http(s)."""
        handlers = [_HTTPHandler(), _HTTPSHandler(), _Redirects()]
        for handler in handlers[:2]:
            handler.read_timeout, handler.deadline = read_timeout, self
        return urllib.request.build_opener(*handlers)

    def cancel(self):
        """Stops the timer (the download is over)."""
        self._timer.cancel()
        with self._lock:
            self._sockets.clear()

    def _expire(self):
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock):
    # The plain socket's shutdown, also under TLS: a blocked read returns, no TLS alert is sent.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _watched(connection_class, read_timeout, deadline):
    class Connection(connection_class):
        def connect(self):
            super().connect()
            self.sock.settimeout(read_timeout)
            deadline.watch(self.sock)

    return Connection


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        connection = _watched(http.client.HTTPConnection, self.read_timeout, self.deadline)
        return self.do_open(connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        connection = _watched(http.client.HTTPSConnection, self.read_timeout, self.deadline)
        return self.do_open(connection, req, context=self._context)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect to http(s) only; a loop or too many hops is one line."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        scheme = urllib.parse.urlsplit(newurl).scheme.lower()
        if scheme not in ("http", "https"):
            raise urllib.error.URLError(
                f"redirected (HTTP {code}) to {newurl}; only http:// and https:// are followed"
            )
        visited = getattr(req, "redirect_dict", {})
        if visited.get(newurl, 0) >= self.max_repeats or len(visited) >= self.max_redirections:
            raise urllib.error.URLError(
                f"a redirect loop (HTTP {code} after {len(visited)} redirects, last to {newurl})"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)
