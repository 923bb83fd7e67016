"""What every fake platform's HTTP side shares: a threaded server on 127.0.0.1 that
keeps track of its open connections (so stopping it shuts kept-alive ones at once,
nothing waited for) and a request handler that logs nothing."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def shut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung client never holds up the test process
    block_on_close = False  # stop() wakes every handler itself; nothing to join
    request_queue_size = 128

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.connections: set[socket.socket] = set()
        self.lock = threading.Lock()
        # A short poll interval: stop() returns at once.
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)  # fmt: skip

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Stop serving, shut every open connection (handlers waiting for a kept-alive
        client's next request wake), close the socket."""
        if self.thread.is_alive():
            self.shutdown()
        with self.lock:
            connections = list(self.connections)
        for conn in connections:
            shut(conn)
        self.server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops a connection is not worth a traceback."""


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON-like records (the caller may keep and change it)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


class TrackedHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no logging, and its connection known to the server. A POST's
    body goes to `_serve(raw)`, which a fake's handler defines."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: LocalServer

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        try:
            length = int(self.headers.get("content-length", 0) or 0)
            raw = self.rfile.read(length) if length else b""
        except (OSError, ValueError):
            self.close_connection = True
            return
        self._serve(raw)

    def _serve(self, raw: bytes) -> None:
        raise NotImplementedError
