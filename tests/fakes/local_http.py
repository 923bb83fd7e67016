"""What every fake's HTTP side shares: a threaded server on 127.0.0.1 that keeps track
of its open connections (so stopping it shuts kept-alive ones at once, nothing waited
for), a request handler that logs nothing, one way to write an answer, and the three
things every platform's API has and each fake used to write by hand: a route table
(`routes`, `match`), a body decoder (`decode_body`, `form_parts`) and an error answer
built from the platform's shape of one (`ErrorShape`)."""

from __future__ import annotations

import binascii
import email.message
import email.parser
import email.policy
import email.utils
import json
import quopri
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs
from python_multipart.multipart import MultipartParser


def shut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung client never holds up the test process
    block_on_close = False  # stop() wakes every handler itself; nothing to join
    request_queue_size = 1024  # the listen backlog: bursts of connections wait, not fail

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], port: int = 0, host: str = "127.0.0.1"
    ) -> None:
        super().__init__((host, port), handler)
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


# -- routes ---------------------------------------------------------------------------


@attrs.frozen
class Route:
    """One entry of a route table: a verb ("*": any), a path pattern, the name of the
    fake's method that answers it."""

    verb: str
    pattern: re.Pattern[str]
    handler: str


def routes(*table: tuple[str, str, str]) -> tuple[Route, ...]:
    """A route table from (verb, pattern, handler) rows, first match first. In a pattern
    `{name}` takes one path segment, maybe empty (or the rest of one: `/bot{token}`),
    `{name:a|b}` what that regex matches, `{name*}` the rest of the path; each is handed to
    the handler unquoted, as a keyword argument."""

    def compiled(pattern: str) -> re.Pattern[str]:
        regex, at = "", 0
        for found in re.finditer(r"\{(\w+)(\*|:[^}]+)?\}", pattern):
            takes = {None: "[^/]*", "*": ".+"}.get(found[2]) or found[2][1:]
            regex += re.escape(pattern[at : found.start()]) + f"(?P<{found[1]}>{takes})"
            at = found.end()
        return re.compile(regex + re.escape(pattern[at:]))

    return tuple(Route(verb, compiled(pattern), handler) for verb, pattern, handler in table)


def match(table: tuple[Route, ...], verb: str, path: str) -> tuple[str, dict[str, str]] | int:
    """The handler and path parameters of the first route `verb path` takes, else 405
    (a route has that path, with another verb) or 404."""
    status = 404
    for route in table:
        found = route.pattern.fullmatch(path)
        if found is None:
            continue
        if route.verb not in ("*", verb):
            status = 405
            continue
        return route.handler, {k: unquote(v) for k, v in found.groupdict().items()}
    return status


def query(path: str) -> dict[str, str]:
    """A request target's query parameters (the last value of a repeated one)."""
    return dict(parse_qsl(urlsplit(path).query, keep_blank_values=True))


def bearer(headers: Any) -> str | None:
    """The token of an `Authorization: Bearer ...` header; None without one."""
    auth = str(headers.get("authorization", ""))
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


# -- bodies ---------------------------------------------------------------------------


@attrs.frozen(eq=False)
class Part:
    """One part of a multipart/form-data body: its name, its filename (None: a field,
    not a file), its Content-Type as given (None: none) and its bytes as sent."""

    name: str | None
    filename: str | None
    content_type: str | None
    data: bytes

    @property
    def mime_type(self) -> str | None:
        """Its content type without parameters, lowercased; None when it gave none."""
        base = (self.content_type or "").split(";")[0].strip().lower()
        return base or None

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    def info(self) -> dict[str, Any]:
        """What a record keeps of an uploaded file (not its bytes)."""
        return {"file_name": self.filename, "mime_type": self.mime_type, "size": len(self.data)}


class BodyError(ValueError):
    """A body that is not what its content type says: `kind` "not_json", "not_object"
    (JSON, but not an object) or "not_form"; a fake words its own refusal of each."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def _param(headers: email.message.Message, key: str) -> str | None:
    value = headers.get_param(key, header="content-disposition")
    return None if value is None else str(email.utils.collapse_rfc2231_value(value))


def media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def form_parts(content_type: str, raw: bytes) -> list[Part]:
    """The parts of a multipart/form-data body (RFC 7578), in order (a preamble before
    the first boundary skipped); BodyError "not_form" for a body that is not one. The
    body is split by python-multipart, each part's headers read by the stdlib's email
    parser (RFC 2231 names, a Content-Transfer-Encoding)."""
    header = email.message.Message()
    header["content-type"] = content_type
    boundary = header.get_boundary()
    if media_type(content_type) != "multipart/form-data" or not boundary:
        raise BodyError("not_form", "not multipart/form-data with a boundary")
    opening = b"--" + boundary.encode("latin-1")
    if not raw.startswith(opening):
        first = raw.find(b"\r\n" + opening)
        raw = raw[first + 2 :] if first >= 0 else raw
    parts: list[Part] = []
    head: list[bytes] = []
    data: list[bytes] = []
    ended: list[bool] = []

    def part_end() -> None:
        headers = email.parser.BytesHeaderParser(policy=email.policy.HTTP).parsebytes(
            b"".join(head) + b"\r\n"
        )
        body = b"".join(data)
        encoding = str(headers.get("content-transfer-encoding", "")).strip().lower()
        if encoding == "base64":
            body = binascii.a2b_base64(body)
        elif encoding == "quoted-printable":
            body = quopri.decodestring(body)
        name, filename = (_param(headers, key) for key in ("name", "filename"))
        given = headers.get("content-type")
        parts.append(Part(name, filename, None if given is None else str(given).strip(), body))
        head.clear()
        data.clear()

    callbacks: Any = {
        "on_header_field": lambda d, s, e: head.append(d[s:e] + b": "),
        "on_header_value": lambda d, s, e: head.append(d[s:e]),
        "on_header_end": lambda: head.append(b"\r\n"),
        "on_part_data": lambda d, s, e: data.append(d[s:e]),
        "on_part_end": part_end,
        "on_end": lambda: ended.append(True),
    }
    parser = MultipartParser(boundary, callbacks)
    try:
        parser.write(raw)
        parser.finalize()
    except ValueError as exc:
        raise BodyError("not_form", f"can't parse the multipart body: {exc}") from None
    if not ended:
        raise BodyError("not_form", "a part without a boundary after it")
    return parts


def decode_body(content_type: str, raw: bytes, default: str = "application/json") -> Any:
    """The fields of a request body by its content type (`default` when it names none
    of these): a JSON value (BodyError "not_json" if it is not JSON), a urlencoded
    form's fields (the last of a repeated name), or a multipart form's (a part with a
    filename as its `Part`, any other as text). No body: {}."""
    if not raw:
        return {}
    kind = media_type(content_type)
    if kind not in ("application/x-www-form-urlencoded", "multipart/form-data"):
        kind = kind if kind == "application/json" else default
    if kind == "multipart/form-data":
        parts = form_parts(content_type, raw)
        return {p.name: p if p.filename is not None else p.text() for p in parts if p.name}
    if kind == "application/x-www-form-urlencoded":
        return dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    try:
        return json.loads(raw)
    except ValueError:
        raise BodyError("not_json", "the body is not JSON") from None


def decode_object(
    content_type: str, raw: bytes, default: str = "application/json"
) -> dict[str, Any]:
    """`decode_body`, and BodyError "not_object" for JSON that is not an object."""
    body = decode_body(content_type, raw, default)
    if not isinstance(body, dict):
        raise BodyError("not_object", "the body must be a JSON object")
    return body


# -- errors ---------------------------------------------------------------------------


@attrs.frozen
class ErrorShape:
    """How a platform words an error, as data: the key of its message, of its own error
    code and of a copy of the HTTP status (None: it has none), and the keys every error
    carries (`{"ok": false}`). Telegram's, Slack's, Discord's and Matrix's are one each;
    WhatsApp's nested Graph API error keeps its own table-driven `graph_error`."""

    message: str
    code: str | None = None
    status: str | None = None
    fixed: dict[str, Any] = attrs.Factory(dict)

    def reply(
        self,
        status: int,
        message: str,
        code: Any = None,
        *,
        retry_after: float | None = None,
        **extra: Any,
    ) -> Reply:
        """The answer: `status`, the body in this shape (with `extra` keys), and a
        Retry-After header when `retry_after` is given."""
        body: dict[str, Any] = dict(self.fixed)
        if self.status is not None:
            body[self.status] = status
        if self.code is not None:
            body[self.code] = code
        body[self.message] = message
        body.update(extra)
        headers = [] if retry_after is None else [("Retry-After", f"{retry_after:g}")]
        return Reply(status, body, headers)
