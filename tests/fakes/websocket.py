"""One WebSocket server loop over wsproto for the fakes that speak a protocol over a
WebSocket (Slack's Socket Mode, Discord's Gateway), on the fake's HTTP port.

A GET on one of the fake's `_socket_paths` is upgraded on its HTTP handler's thread,
which then reads the socket; a writer thread per socket sends what the fake puts in the
socket's `outbox` (JSON text frames, each with an optional record marked `written` once
it went out) and closes it when `close_now` is set: with a close frame of `close_code`,
or cut without one (`cut`). A `half_open` socket is silent both ways: nothing is sent
on it, what comes is counted and never read. Every text frame is recorded in
`received` (parsed JSON, or the raw text). The fake's part, holding its lock unless
said: `_ws_refusal` (the answer to a handshake refused), `_ws_admit` (refuse one),
`_ws_opened` (hello), `_on_frame` (a text frame), `_on_binary` (without the lock),
`_on_client_close`, `_ws_written`, `_ws_ended`.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import traceback
from typing import Any, ClassVar
from urllib.parse import urlsplit

import attrs
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from tests.fakes.kit import Fake, infos, observed
from tests.fakes.local_http import Reply, TrackedHandler, shut


@attrs.define(eq=False, kw_only=True)
class WebSocket:
    id: int
    conn: socket.socket
    ws: WSConnection
    target: str  # the request target of the handshake (path and query)
    opened_at: float
    lock: threading.Lock = attrs.Factory(threading.Lock)  # the wsproto state and sends
    outbox: list[tuple[str, dict[str, Any] | None]] = attrs.Factory(list)
    close_now: bool = False  # the writer closes it once the outbox is out
    close_code: int = 1001
    close_reason: str = ""
    cut: bool = False  # close without a close frame
    half_open: bool = False
    closed_at: float | None = None
    closed_by: str | None = None  # "fake" | "client" (close frame) | "eof"
    client_close_code: int | None = None
    pings: int = 0
    frames_in: int = 0
    ignored_bytes: int = 0  # read while half-open, never looked at
    partial: str = ""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path.rstrip("/")

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id, "opened_at": self.opened_at, "closed_at": self.closed_at,
            "open": self.closed_at is None, "closed_by": self.closed_by,
            "client_close_code": self.client_close_code, "frames_in": self.frames_in,
        }  # fmt: skip


def _open_count(sockets: list[WebSocket]) -> int:
    return sum(1 for s in sockets if s.closed_at is None)


class WebSocketFake(Fake):
    _socket_class: ClassVar[type[WebSocket]] = WebSocket

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self._socket_ids = itertools.count(1)
        self._sockets: list[Any] = []  # every socket ever opened, in order
        self._received: list[dict[str, Any]] = []

    received = observed("_received", """Every text frame a client sent on a socket not
        half-open: `socket`, `frame` (parsed JSON, or the raw text), `at`.""")  # fmt: skip
    sockets = observed("_sockets", "Every socket opened, in order.", infos)
    open_sockets = observed("_sockets", "Sockets open now.", _open_count)

    def wait_connections(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until `count` WebSocket connections were opened in the fake's life."""
        self._wait(lambda: len(self._sockets) >= count, timeout, f"{count} socket(s) opened")

    def wait_open_sockets(self, count: int, timeout: float = 10.0) -> None:
        """Until exactly `count` sockets are open now (0: all closed)."""

        self._wait(lambda: _open_count(self._sockets) == count, timeout,
                   f"exactly {count} open socket(s)")  # fmt: skip

    # -- the fake's part --------------------------------------------------------------------

    def _ws_refusal(self, status: int, why: str) -> Reply:
        """The answer to a handshake refused: `why` is "websocket upgrade required",
        "stopping" or "bad websocket handshake"."""
        raise NotImplementedError

    def _ws_admit(self, request: TrackedHandler) -> Reply | None:
        """A refusal of this handshake, or None."""
        return None

    def _ws_opened(self, sock: Any) -> None:
        """A socket is open (and in `_sockets`): its first frames go in its outbox."""

    def _on_frame(self, sock: Any, frame: Any, now: float) -> None:
        """A text frame the client sent: parsed JSON, or the raw text."""
        raise NotImplementedError

    def _on_binary(self, sock: Any) -> None:
        """Called without the lock."""

    def _on_client_close(self, sock: Any, code: int | None, first: bool) -> None:
        """The client's close frame (code 1006: the connection ended without one);
        `first`: the socket was not closed yet."""

    def _ws_written(self, sock: Any, record: dict[str, Any]) -> None:
        """A frame with a record went out."""

    def _ws_ended(self, sock: Any) -> None:
        """The socket is closed."""

    # -- one handler thread reads a socket, one writer thread writes it ---------------------

    def _serve_socket(self, request: TrackedHandler) -> Reply | None:
        """Run one WebSocket from its handshake to its end (on its HTTP handler's
        thread); a reply instead when the handshake is refused."""
        if request.headers.get("upgrade", "").lower() != "websocket":
            return self._ws_refusal(400, "websocket upgrade required")
        with self._cond:
            if self._closing:
                return self._ws_refusal(503, "stopping")
            refused = self._ws_admit(request)
            if refused is not None:
                return refused
        ws = WSConnection(ConnectionType.SERVER)
        lines = [request.requestline, *(f"{k}: {v}" for k, v in request.headers.items())]
        try:
            ws.receive_data(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            handshake = any(isinstance(e, Request) for e in ws.events())
        except RemoteProtocolError:
            handshake = False
        if not handshake:
            return self._ws_refusal(400, "bad websocket handshake")
        conn: socket.socket = request.connection
        try:
            conn.sendall(ws.send(AcceptConnection()))
        except OSError:
            return None
        with self._cond:
            sock = self._socket_class(id=next(self._socket_ids), conn=conn, ws=ws,
                                      target=request.path, opened_at=time.monotonic())  # fmt: skip
            self._sockets.append(sock)
            self._ws_opened(sock)
            self._cond.notify_all()
        writer = threading.Thread(target=self._write_loop, args=(sock,), daemon=True)
        writer.start()
        try:
            self._read_loop(sock, request)
        except Exception:  # a bug of the fake: record, end this socket
            self._record_internal_error(traceback.format_exc())
        finally:
            shut(conn)
            with self._cond:
                if sock.closed_at is None:
                    sock.closed_at = time.monotonic()
                    sock.closed_by = sock.closed_by or "eof"
                self._ws_ended(sock)
                self._cond.notify_all()
        return None

    def _read_loop(self, sock: WebSocket, request: TrackedHandler) -> None:
        while True:
            try:
                data = request.rfile.read1(65536)
            except OSError:
                data = b""
            with self._cond:
                if self._closing:
                    return
                if sock.half_open:  # deaf: the bytes are never looked at
                    sock.ignored_bytes += len(data)
                    self._cond.notify_all()
                    if not data:
                        return
                    continue
            with sock.lock:
                try:
                    sock.ws.receive_data(data or None)
                    events = list(sock.ws.events())
                except (RemoteProtocolError, LocalProtocolError):
                    return
            for event in events:
                if isinstance(event, TextMessage):
                    sock.partial += event.data
                    if event.message_finished:
                        text, sock.partial = sock.partial, ""
                        self._on_text(sock, text)
                elif isinstance(event, BytesMessage):
                    self._on_binary(sock)
                elif isinstance(event, Ping):
                    with self._cond:
                        sock.pings += 1
                        self._cond.notify_all()
                    if not self._send(sock, event.response()):
                        return
                elif isinstance(event, Pong):
                    pass
                elif isinstance(event, CloseConnection):
                    with self._cond:
                        first = sock.closed_by is None
                        if first:  # 1006: no close frame, wsproto's word for EOF
                            sock.closed_by = "eof" if event.code == 1006 else "client"
                        self._on_client_close(sock, event.code, first)
                        self._cond.notify_all()
                    if sock.ws.state == ConnectionState.REMOTE_CLOSING:
                        self._send(sock, event.response())
                    return
            if not data or sock.ws.state == ConnectionState.CLOSED:
                return

    def _on_text(self, sock: WebSocket, text: str) -> None:
        now = time.monotonic()
        try:
            frame: Any = json.loads(text)
        except ValueError:
            frame = text
        with self._cond:
            sock.frames_in += 1
            self._received.append({"socket": sock.id, "frame": frame, "at": now})
            self._on_frame(sock, frame, now)
            self._cond.notify_all()

    def _send(self, sock: WebSocket, event: Any) -> bool:
        """Send one wsproto event on `sock`; False if the connection is gone."""
        with sock.lock:
            try:
                data = sock.ws.send(event)
                sock.conn.sendall(data)
            except (OSError, LocalProtocolError):
                return False
        return True

    def _write_loop(self, sock: WebSocket) -> None:
        try:
            self._write(sock)
        except Exception:  # a bug of the fake: record, cut this socket
            self._record_internal_error(traceback.format_exc())
            shut(sock.conn)

    def _write(self, sock: WebSocket) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closing or sock.closed_at is not None:
                        return
                    if sock.half_open:
                        sock.outbox.clear()  # never written: lost with the socket
                        if sock.close_now:
                            break
                    elif sock.outbox or sock.close_now:
                        break
                    self._cond.wait()
                cut = sock.half_open or sock.cut
                frames = [] if cut else sock.outbox[:]
                sock.outbox.clear()  # a cut socket's frames are lost with it
                close = sock.close_now and not frames
            for text, record in frames:
                if not self._send(sock, TextMessage(data=text)):
                    return
                if record is not None:
                    with self._cond:
                        record["written"] = True
                        self._ws_written(sock, record)
                        self._cond.notify_all()
            if not close:
                continue
            with self._cond:
                sock.closed_by = sock.closed_by or "fake"
            if not cut:
                self._send(sock, CloseConnection(code=sock.close_code, reason=sock.close_reason))
                with self._cond:  # the client's close reply, briefly
                    self._cond.wait_for(
                        lambda: sock.closed_at is not None or self._closing, timeout=1.0
                    )
            shut(sock.conn)
            return
