"""What every fake's HTTP side shares: a threaded server on 127.0.0.1 that keeps track
of its open connections (so stopping it shuts kept-alive ones at once, nothing waited
for), a request handler that logs nothing, and one way to write an answer."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


def shut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung client never holds up the test process
    block_on_close = False  # stop() wakes every handler itself; nothing to join
    request_queue_size = 1024  # the listen backlog: bursts of connections wait, not fail

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


@attrs.define
class Reply:
    """An answer: `body` a JSON value, raw bytes, or None (no body, no content type);
    `content_type` None: the fake's JSON type."""

    status: int
    body: Any = None
    headers: list[tuple[str, str]] = attrs.Factory(list)
    content_type: str | None = None


PIECE = 256 * 1024  # a Blob is written in pieces of this size
_ZEROS = bytes(PIECE)


@attrs.frozen
class Blob:
    """A file's body (a fake's download), written in pieces: `content`, then zeros up to
    `size` (a large file without storing it), with no copy of either made."""

    content: bytes
    size: int

    def pieces(self) -> Iterator[memoryview]:
        view = memoryview(self.content)
        for start in range(0, len(view), PIECE):
            yield view[start : start + PIECE]
        left = self.size - len(view)
        while left > 0:
            yield memoryview(_ZEROS)[: min(left, PIECE)]
            left -= PIECE


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

    def _answer(
        self,
        reply: Reply,
        *,
        closing: bool = False,
        json_type: str = "application/json",
        ascii_json: bool = False,
    ) -> None:
        """Write `reply` (`closing`: with `connection: close`, as when the client asked
        for it); a client gone meanwhile is nobody to answer. A Blob goes in pieces."""
        if isinstance(reply.body, Blob):
            data = b""
        elif isinstance(reply.body, bytes):
            data = reply.body
        elif reply.body is None:
            data = b""
        else:
            data = json.dumps(reply.body, ensure_ascii=ascii_json).encode()
        try:
            self.send_response(reply.status)
            if reply.body is not None:
                self.send_header("content-type", reply.content_type or json_type)
            size = reply.body.size if isinstance(reply.body, Blob) else len(data)
            self.send_header("content-length", str(size))
            for name, value in reply.headers:
                self.send_header(name, value)
            if closing or self.close_connection:
                self.send_header("connection", "close")
                self.close_connection = True
            self.end_headers()
            for piece in reply.body.pieces() if isinstance(reply.body, Blob) else [data]:
                self.wfile.write(piece)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
