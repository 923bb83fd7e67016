"""What every fake shares beside its protocol: waiting for what a client did, faults
injected by a test, records read under the fake's lock, the remote control of a fake in
its own process, and the lifecycle of its server.

A fake platform is a `Fake`: its state under one condition (`_cond`, notified on every
change), its HTTP server (`LocalServer`) handing each request to `_handle(request,
raw)`, which by default follows the fake's route table (`_ROUTES`). A test drives it
from its own thread; the `wait_*` helpers block on the condition (no sleeping) and raise
TimeoutError naming what they waited for.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Self, TypeVar
from urllib.parse import urlsplit

import attrs

from tests.fakes.local_http import LocalServer, Reply, Route, TrackedHandler, copy_json, match

T = TypeVar("T")


def wait(
    cond: threading.Condition,
    ready: Callable[[], bool],
    timeout: float,
    what: str | Callable[[], str],
) -> None:
    """Block on `cond` until `ready()` (checked on each notify), else TimeoutError with
    `what` (a callable: called then, to tell how far it got)."""
    with cond:
        if not cond.wait_for(ready, timeout):
            raise TimeoutError(what() if callable(what) else what)


@attrs.define(eq=False)
class _Entry(Generic[T]):
    fault: T
    method: str  # "*": any
    target: Any  # None: any
    times: int | None  # matches left; None: every match from now on


class Faults(Generic[T]):
    """Faults injected by a test, in order: each call takes the first that matches (its
    method, or "*"; its target, a channel or chat, if the fault names one) and uses it
    up after `times` calls. Not locked: the fake holds its own lock."""

    def __init__(self) -> None:
        self._entries: list[_Entry[T]] = []

    def add(self, fault: T, method: str = "*", target: Any = None, times: int | None = 1) -> None:
        self._entries.append(_Entry(fault, method, target, times))

    def take(
        self, method: str = "*", target: Any = None, *, matches: Callable[[Any], bool] | None = None
    ) -> T | None:
        """The first fault for this call, counted (`matches(target)` instead of equality
        when given)."""
        for entry in self._entries:
            if entry.method not in ("*", method):
                continue
            if matches is not None:
                if not matches(entry.target):
                    continue
            elif entry.target is not None and entry.target != target:
                continue
            if entry.times is not None:
                entry.times -= 1
                if entry.times <= 0:
                    self._entries.remove(entry)
            return entry.fault
        return None

    def clear(self) -> None:
        self._entries.clear()


def observed(attr: str, doc: str | None = None, read: Callable[[Any], Any] = copy_json) -> Any:
    """A read-only property: `read` (by default a copy) of the fake's `attr`, under its
    lock."""

    def get(fake: Fake) -> Any:
        with fake._cond:
            return read(getattr(fake, attr))

    return property(get, doc=doc)


def infos(records: list[Any]) -> list[dict[str, Any]]:
    """A reader for `observed`: the `info()` of each record."""
    return [r.info() for r in records]


class FakeHandler(TrackedHandler):
    """A fake's request handler: GET and POST (and `_other_verbs`) go to the fake's
    `_route` (`/_fake/...` to its controls, the rest to its `_handle`); a GET on one of
    its `_socket_paths` to its `_serve_socket`."""

    fake: Fake

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        fake = self.fake
        if urlsplit(self.path).path.rstrip("/") not in fake._socket_paths:
            self._serve(b"")
            return
        self.close_connection = True
        try:
            reply = fake._serve_socket(self)
        except Exception:  # a bug of the fake: record, keep serving
            fake._record_internal_error(traceback.format_exc())
            return
        if reply is not None:
            self._reply(reply)

    def _serve(self, raw: bytes) -> None:
        fake = self.fake
        try:
            reply = fake._route(self, raw)
        except Exception:  # a bug of the fake: answer, record, keep serving
            fake._record_internal_error(traceback.format_exc())
            reply = fake._internal_error()
        if reply is None:  # nothing to answer (the client went away): the connection ends
            self.close_connection = True
        else:
            self._reply(reply)

    def _reply(self, reply: Reply) -> None:
        fake = self.fake
        self._answer(reply, closing=fake._closing, json_type=fake._json_type,
                     ascii_json=fake._ascii_json)  # fmt: skip


class Fake:
    """The part of a fake platform that is not its protocol. A subclass names itself
    (`name`, for TimeoutErrors), declares its routes (`_ROUTES`, from `routes()`: each
    names a method taking `(request, raw, **path_parameters)`, answering a Reply or None:
    nothing to answer) and its answer when none matches (`_no_route(request, status)`,
    404 or 405), `_internal_error()` (its answer to a bug of its own), the
    controls another process may call (`_CONTROLS`) and the properties `_STATE` lists
    for `GET /_fake/state`. It records the messages a client sent in `_sent`, each naming
    its channel in `_channel_field`."""

    name: ClassVar[str] = "platform"
    _json_type: ClassVar[str] = "application/json"
    _ascii_json: ClassVar[bool] = False
    _other_verbs: ClassVar[tuple[str, ...]] = ()  # e.g. "PUT": read like a POST
    _socket_paths: ClassVar[frozenset[str]] = frozenset()
    _CONTROLS: ClassVar[frozenset[str]] = frozenset()
    _STATE: ClassVar[tuple[str, ...]] = ()
    _channel_field: ClassVar[str] = "channel"  # where a record of `_sent` names its channel
    _ROUTES: ClassVar[tuple[Route, ...]] = ()

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self._cond = threading.Condition()
        self._closing = False
        self._faults: Faults[Any] = Faults()
        self._internal_errors: list[str] = []
        self._sent: list[dict[str, Any]] = []  # the messages the client sent, as recorded
        handler: dict[str, Any] = {"fake": self}
        for verb in self._other_verbs:
            handler[f"do_{verb}"] = TrackedHandler.do_POST
        self.server = LocalServer(type("Handler", (FakeHandler,), handler), port, host)

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> Self:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        """Stop serving: every connection is shut at once, and nothing is waited for."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        self.server.stop()

    def _route(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        segments = urlsplit(request.path).path.split("/")
        if len(segments) >= 3 and segments[1] == "_fake":
            return self._control(request.command, segments[2], raw)
        return self._handle(request, raw)

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        """The answer of the method the first route the request takes names."""
        found = match(self._ROUTES, request.command, urlsplit(request.path).path)
        if isinstance(found, int):
            return self._no_route(request, found)
        handler, params = found
        return getattr(self, handler)(request, raw, **params)

    def _no_route(self, request: TrackedHandler, status: int) -> Reply | None:
        return Reply(status)

    def _internal_error(self) -> Reply:
        raise NotImplementedError

    def _serve_socket(self, request: TrackedHandler) -> Reply | None:
        raise NotImplementedError

    def _record_internal_error(self, text: str) -> None:
        with self._cond:
            self._internal_errors.append(text)
            self._cond.notify_all()

    internal_errors = observed(
        "_internal_errors", "Tracebacks of the fake's own failures; a test may assert none."
    )

    def clear_faults(self) -> None:
        """Forget the faults not yet taken."""
        with self._cond:
            self._faults.clear()

    def _change(self, **values: Any) -> None:
        """Set the fake's attributes and wake whoever waits on its state."""
        with self._cond:
            for name, value in values.items():
                setattr(self, name, value)
            self._cond.notify_all()

    # -- waiting --------------------------------------------------------------------------

    def wait_until(
        self, ready: Callable[[Self], bool], timeout: float = 10.0, what: str = "it"
    ) -> None:
        """Until `ready(fake)` is true (checked on every change of the fake's state;
        it may read the fake's properties)."""
        self._wait(lambda: ready(self), timeout, what)

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        wait(self._cond, ready, timeout, f"the fake {self.name} saw no {what} within {timeout:g} s")

    def sent_to(self, channel: str) -> list[dict[str, Any]]:
        """The messages sent to one channel."""
        with self._cond:
            return copy_json([s for s in self._sent if s[self._channel_field] == channel])

    def wait_sent(
        self, count: int = 1, timeout: float = 10.0, *, channel: str | None = None
    ) -> list[dict[str, Any]]:
        """The messages sent (to `channel` if given), once at least `count` were."""
        where = "" if channel is None else f" in {channel}"
        return self._wait_records("_sent", count, timeout, f"{count} message(s) sent{where}",
                                  lambda s: channel in (None, s[self._channel_field]))  # fmt: skip

    def _wait_records(
        self,
        attr: str,
        count: int,
        timeout: float,
        what: str,
        mine: Callable[[Any], bool] = lambda record: True,
    ) -> list[Any]:
        """The records in the fake's list `attr` for which `mine(record)`, once at least
        `count` are."""

        def records() -> list[Any]:
            return [r for r in getattr(self, attr) if mine(r)]

        self._wait(lambda: len(records()) >= count, timeout, what)
        with self._cond:
            return copy_json(records())

    # -- driving from another process -----------------------------------------------------

    def _control(self, verb: str, name: str, raw: bytes) -> Reply:
        """`GET /_fake/state`: the `_STATE` properties (bytes as base64); `POST
        /_fake/<name>` with a JSON object of keyword arguments: calls a control (`{"ok":
        true, "result": ...}`)."""
        if verb == "GET" and name == "state":
            with self._cond:
                state = {key: _as_json(getattr(self, key)) for key in self._STATE}
            return Reply(200, {"ok": True, "result": state})
        if verb != "POST" or name not in self._CONTROLS:
            return self._control_error(404, None)
        try:
            kwargs = json.loads(raw or b"{}")
            if not isinstance(kwargs, dict):
                raise ValueError("the body must be a JSON object")
            result = getattr(self, name)(**kwargs)
        except (TypeError, ValueError, LookupError) as exc:
            return self._control_error(400, exc)
        return Reply(200, {"ok": True, "result": result})

    def _control_error(self, status: int, exc: Exception | None) -> Reply:
        error = "unknown_control" if exc is None else f"{type(exc).__name__}: {exc}"
        return Reply(status, {"ok": False, "error": error})


def _as_json(value: Any) -> Any:
    """A state value JSON can carry: bytes under a key `k` (an upload's `content`) become
    base64 text under `k_base64`."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, bytes | bytearray):
                out[f"{key}_base64"] = base64.b64encode(item).decode()
            else:
                out[key] = _as_json(item)
        return out
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    return value


def serve_until_killed(fake: Any) -> None:
    """Serve `fake` in this process: print its URL on one line, serve until killed
    (SIGTERM or Ctrl-C) and stop it."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with fake:
        print(fake.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            fake.server.thread.join()
