"""A tiny HTTP server on 127.0.0.1 for image-fetch tests and fixture recording.

Routes (the same in the recorder and in the tests, so recorded outcomes replay):
  /img/NAME           the input file NAME from the fixture inputs, with Content-Length
  /status/CODE        an empty answer with that status
  /redirect/N/NAME    N chained 302 redirects, then /img/NAME
  /redirect-status/N/CODE  N chained 302 redirects, then /status/CODE
  /nolength/NAME      the body without Content-Length (the closed connection ends it)
  /nolocation         a 302 without Location
  /moved/CODE/TARGET  a CODE answer with Location TARGET (percent-decoded)
  /flaky/N/NAME       503 for the first N requests of this path, then /img/NAME
  /truncated/NAME     a Content-Length 10 bytes longer than the body, then the connection closes
  /zeros/N            N zero bytes with Content-Length; /zeros-nolength/N without it
  /hang               reads the request and closes the connection without answering
A query string is ignored by the routing. Every request is appended to `server.hits` as the path, and its arrival time
(`time.monotonic()`) to `server.hit_times`.

`proxy()` starts a recording forward proxy on 127.0.0.1 (see there).
"""

from __future__ import annotations

import http.client
import http.server
import threading
import time
import urllib.parse
from pathlib import Path


def serve(inputs: Path):
    """Start a server in a daemon thread; return it (`.base` is its URL, `.hits` the paths,
    `.proxy` a recording forward proxy started with it)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def _body(self, name: str) -> bytes | None:
            p = inputs / name
            return p.read_bytes() if p.is_file() else None

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            server.hits.append(self.path)
            server.hit_times.append(time.monotonic())
            parts = self.path.split("?")[0].strip("/").split("/")
            head = parts[0]
            if head == "flaky":
                seen = server.counts.get(self.path, 0)
                server.counts[self.path] = seen + 1
                if seen < int(parts[1]):
                    self._empty(503)
                    return
                head, parts = "img", ["img", parts[2]]
            if head == "hang":
                self.close_connection = True
                return
            if head in ("zeros", "zeros-nolength"):
                n = int(parts[1])
                self.send_response(200)
                if head == "zeros":
                    self.send_header("Content-Length", str(n))
                self.end_headers()
                chunk = bytes(65536)
                try:
                    while n > 0:
                        self.wfile.write(chunk[:n])
                        n -= len(chunk)
                except OSError:  # the client stopped reading at its size limit
                    pass
                return
            if head == "truncated":
                body = self._body(parts[1]) or b""
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + 10))
                self.end_headers()
                self.wfile.write(body)
                return
            if head == "status":
                self._empty(int(parts[1]))
                return
            if head in ("redirect", "redirect-status"):
                n = int(parts[1])
                last = "/img" if head == "redirect" else "/status"
                target = f"/{head}/{n - 1}/{parts[2]}" if n > 1 else f"{last}/{parts[2]}"
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if head == "moved":
                self.send_response(int(parts[1]))
                self.send_header("Location", urllib.parse.unquote(self.path.split("/", 3)[3]))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if head == "nolocation":
                self._empty(302)
                return
            body = self._body(parts[1]) if len(parts) > 1 else None
            if body is None:
                self._empty(404)
                return
            self.send_response(200)
            if head == "img":
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.hits = []
    server.hit_times = []
    server.counts = {}
    server.base = f"http://127.0.0.1:{server.server_port}"
    server.proxy = proxy()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def proxy():
    """Start a recording forward proxy in a daemon thread (`.url`, `.hits` as [method, target]).

    A plain request (absolute URL) is forwarded to its origin without a proxy and the answer
    relayed unchanged (redirects included, so each hop comes back through the proxy); a
    CONNECT is refused with 403 (enough to see that a client tunnelled).
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def do_GET(self):
            server.hits.append(["GET", self.path])
            target = urllib.parse.urlsplit(self.path)
            conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=10)
            try:
                conn.request("GET", target.path or "/")
                answer = conn.getresponse()
                body = answer.read()
            except OSError:
                self.send_response(502)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            finally:
                conn.close()
            self.send_response(answer.status)
            location = answer.getheader("Location")
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_CONNECT(self):
            server.hits.append(["CONNECT", self.path])
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.hits = []
    server.url = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
