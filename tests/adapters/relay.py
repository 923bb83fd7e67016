"""A TCP relay in front of a fake platform that can hold a request on its way in: for the
tests that need a send in flight at the platform with no answer yet (serve killed under
it, a send whose answer never comes). The fakes take a send and answer at once; none of
them can keep one waiting, so the relay does it on the wire.

`hold(marker)`: from now on, a request whose bytes contain `marker` (b"/sendMessage") is
kept once it has all come (its headers and its Content-Length of body), and so is what
follows it on that connection; other requests and connections (the poll) flow.
`release()` lets it through: the fake takes it then and answers whoever is still
connected (nobody, once serve was killed). `silence()`: every connection open now goes
silent both ways, as behind a dead network path (an IMAP session that stops answering);
later connections flow. Real sockets on 127.0.0.1, one thread per
direction of each connection; `wait_held` blocks on a condition, never sleeps.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit


class HeldRelay:
    def __init__(self, target_url: str) -> None:
        target = urlsplit(target_url)
        self.target = (target.hostname or "127.0.0.1", target.port or 80)
        self._cond = threading.Condition()
        self._marker: bytes | None = None
        self._held: list[bytes] = []  # the chunks held, in the order they came
        self._closing = False
        self._sockets: list[socket.socket] = []
        self._silenced: set[int] = set()  # ids of the sockets whose bytes are dropped
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> HeldRelay:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop relaying: every connection is shut at once, held chunks are dropped."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            sockets = [self._listener, *self._sockets]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(5)

    def hold(self, marker: bytes) -> None:
        with self._cond:
            self._marker = marker

    def silence(self) -> None:
        """Every connection open now passes nothing more, either way, and stays open."""
        with self._cond:
            self._silenced.update(id(sock) for sock in self._sockets)

    def _silent(self, sock: socket.socket) -> bool:
        with self._cond:
            return id(sock) in self._silenced

    def release(self) -> None:
        with self._cond:
            self._marker = None
            self._cond.notify_all()

    def wait_held(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until `count` whole requests are held (released ones included)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._held) >= count, timeout):
                raise TimeoutError(f"the relay held no {count} request(s) within {timeout:g} s")

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return  # closed
            with self._cond:
                if self._closing:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
                pumps = [
                    threading.Thread(target=self._inbound, args=(client, upstream), daemon=True),
                    threading.Thread(target=self._outbound, args=(upstream, client), daemon=True),
                ]
                self._threads += pumps
            for pump in pumps:
                pump.start()

    def _inbound(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client to platform, until either ends; a marked request is kept, whole."""
        pending = b""  # a marked request, coming or kept
        try:
            while True:
                data = client.recv(65536)
                eof = not data
                if data and self._silent(client):
                    continue
                if pending or (not eof and self._marked(data)):
                    pending += data
                    if not eof and not _whole(pending):
                        continue  # the rest of it is on its way
                    if not self._keep(pending):
                        return
                    data, pending = pending, b""
                if data:
                    upstream.sendall(data)
                if eof:
                    upstream.shutdown(socket.SHUT_WR)  # the client said all it had to say
                    return
        except OSError:
            _shut(upstream)

    def _outbound(self, upstream: socket.socket, client: socket.socket) -> None:
        """Platform to client, until either ends."""
        try:
            while data := upstream.recv(65536):
                if not self._silent(client):
                    client.sendall(data)
            client.shutdown(socket.SHUT_WR)
        except OSError:
            _shut(client)

    def _marked(self, data: bytes) -> bool:
        with self._cond:
            return self._marker is not None and self._marker in data

    def _keep(self, request: bytes) -> bool:
        """Hold `request` until released; False when the relay closed meanwhile."""
        with self._cond:
            self._held.append(request)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._marker is None or self._closing)
            return not self._closing


def _whole(request: bytes) -> bool:
    """Whether `request` holds its headers and all of its body (by its Content-Length)."""
    head, found, body = request.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
