"""A tiny HTTP server on 127.0.0.1 for image-fetch tests and fixture recording.

Routes (the same in the recorder and in the tests, so recorded outcomes replay):
  /img/NAME           the input file NAME from the fixture inputs, with Content-Length
  /status/CODE        an empty answer with that status
  /redirect/N/NAME    N chained 302 redirects, then /img/NAME
  /nolength/NAME      the body without Content-Length (closed connection ends it)
  /nolength/NAME      the body without Content-Length (the closed connection ends it)
  /nolocation         a 302 without Location
Every request is appended to `server.hits` as the path.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path


def serve(inputs: Path):
    """Start a server in a daemon thread; return it (`.base` is its URL, `.hits` the paths)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def _body(self, name: str) -> bytes | None:
            p = inputs / name
            return p.read_bytes() if p.is_file() else None

        def do_GET(self):
            server.hits.append(self.path)
            parts = self.path.strip("/").split("/")
            head = parts[0]
            if head == "status":
                self.send_response(int(parts[1]))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if head == "redirect":
                n = int(parts[1])
                target = f"/redirect/{n - 1}/{parts[2]}" if n > 1 else f"/img/{parts[2]}"
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if head == "nolocation":
                self.send_response(302)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = self._body(parts[1]) if len(parts) > 1 else None
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            if head == "img":
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.hits = []
    server.base = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
