"""The OpenAI-compatible API: `POST /v1/chat/completions` (streamed or not) and
`GET /v1/models` on a port of its own, served by hypercorn's Trio worker
(hermes.adapters.listening).

A request is a chat message like any platform's. Its bearer key names its user
(`platforms.api.keys`, compared in constant time, before the body is read); the
adapter picks the conversation at its edge (the `X-Hermes-Session` header, else the
`user` field, else a new one) as a thread of that user's chat, so a key reaches only
its own user's conversations; it admits the event and holds the request open for the
turn's steps, as the local endpoint does: the final step is the answer; streamed,
the text goes out as `chat.completion.chunk` events as it comes.

A client that sends `Idempotency-Key` names its request: the event id derives from it
(per key user), so the same request sent again (after a lost connection, a killed
serve) is a duplicate to admission, and gets the answer of the one turn that ran (or
runs, resumed after the restart) instead of a second turn.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
import secrets
from typing import Any

import trio

from hermes.actors.clock import Clock
from hermes.actors.errors import PortInUse
from hermes.adapters.api import wire
from hermes.adapters.api.config import ApiConfig
from hermes.adapters.api.wire import ApiError
from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter, required
from hermes.adapters.contract import (
    ChatType,
    InboundEvent,
    Permanent,
    SendRequest,
    SendResult,
    StepKind,
    TurnStep,
)
from hermes.adapters.listening import headers_of, listen, not_http, read_body, respond
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.waiting import Waiting
from hermes.config import Secrets

log = logging.getLogger(__name__)

CALL_STEPS = 16  # steps a request holds for its client before the turn waits
CLIENT_STUCK_AFTER = 30.0  # seconds a streaming client may take to accept one chunk
RECHECK = 1.0  # seconds between looks at the journal while a repeated request waits
REPEAT_WAIT = 900.0  # seconds a repeated request waits for a turn that never comes
SESSION_HEADER = "x-hermes-session"
_LABEL = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_IDEMPOTENCY_KEY = 256
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


class _ClientGone(Exception):
    """The streaming client took no chunk in CLIENT_STUCK_AFTER seconds."""


class ApiAdapter(PlatformAdapter[ApiConfig]):
    mailbox_size = 64  # a turn's steps arrive in bursts; the router waits when it is full
    progress_deadline = math.inf  # a server: it is alive while it runs

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.recorded = setup.recorded
        self.bound = setup.bound
        self.model = setup.model
        self.clock = setup.cursors.clock if setup.cursors is not None else Clock()
        self.keys: list[tuple[bytes, str]] = []
        self.waiting = Waiting(CALL_STEPS)
        self.draining = False

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets_: Secrets) -> str:
        """Nothing to ask: the keys are hermes's own. Whose they are."""
        await trio.lowlevel.checkpoint()
        keys = cls.configured(config).keys
        return "keys for " + ", ".join(sorted(set(keys.values())))

    async def connect(self) -> None:
        """Listen until the adapter stops (its requests are handled in the listener's
        nursery); a key unset or the port taken ends it for good."""
        self.keys = [
            (required(self.secrets, variable, self.platform, "keys").encode(), user)
            for variable, user in self.config.keys.items()
        ]
        async with trio.open_nursery() as nursery:
            try:
                port = await listen(
                    nursery,
                    self._app,
                    self.config.host,
                    self.config.port,
                    f"platforms.{self.platform}.port",
                    "hermes.api.http",
                )
            except PortInUse as exc:
                raise AdapterFatal(str(exc)) from None
            self.progress()
            self.settled()
            self.bound(port)
            log.info(
                "%s: OpenAI-compatible API on http://%s:%d/v1", self.name, self.config.host, port
            )
            await trio.sleep_forever()

    def stop_intake(self) -> None:
        """Serve drains: new requests are answered 503 (requests in flight get their
        answer, or 503 if their turn is cut)."""
        self.draining = True

    async def finish_in_flight(self) -> None:
        """Requests waiting on a turn get its final step (the router's flush sends it)."""
        await self.waiting.all_ended()

    async def show(self, step: TurnStep) -> None:
        """To the request waiting on the step's turn (waits while it is CALL_STEPS
        behind); a step no request waits for (a turn resumed after a restart, its client
        gone) is dropped: the transcript has it."""
        await self.waiting.show(step)

    async def send(self, request: SendRequest) -> SendResult:
        """The API answers only within a request: nothing reaches its clients otherwise."""
        await trio.lowlevel.checkpoint()
        return Permanent("the API answers only within a request; it has nowhere to send to")

    # -- HTTP -------------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if await not_http(scope, receive, send):
            return
        try:
            await self._http(scope, receive, send)
        except ApiError as exc:  # before the answer began: it is this error
            await _json(send, exc.status, exc.body(), exc.headers)

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path, method = scope["path"].rstrip("/"), scope["method"]
        routes = {"/v1/models": "GET", "/v1/chat/completions": "POST"}
        if path not in routes:
            raise ApiError(404, f"no such endpoint: {method} {path}", code="unknown_url")
        if method != routes[path]:
            raise ApiError(405, f"{path} takes {routes[path]}", code="method_not_allowed")
        headers = headers_of(scope)
        user = self._user(headers)
        if path == "/v1/models":
            names = list(dict.fromkeys(["hermes", self.model or "hermes"]))
            await _json(send, 200, wire.models(names, 0))
            return
        if self.draining:
            raise ApiError(
                503,
                "hermes is shutting down; send the request again in a moment",
                "server_error",
                "unavailable",
            )
        body = await self._body(headers, receive)
        request = wire.parse(body)
        label, shown, fresh = self._conversation(headers, request)
        event_id = self._event_id(user, headers)
        text = wire.seeded(request.earlier, request.last) if fresh else request.last
        event = InboundEvent(
            self.platform,
            event_id,
            ChatType.DM,
            user,
            user,
            text,
            thread_id=label,
            user_name=user,
            message_id=event_id,
            mentioned=True,
        )
        extra = ((SESSION_HEADER.encode(), label.encode()),) if shown else ()
        await self._answer(event, request, send, extra)

    def _user(self, headers: dict[str, str]) -> str:
        """The user the request's bearer key is mapped to; 401 for none (every key is
        compared, in constant time)."""
        given = headers.get("authorization", "")
        scheme, _, key = given.partition(" ")
        found = None
        for secret, user in self.keys:
            if hmac.compare_digest(key.strip().encode(), secret) and scheme.lower() == "bearer":
                found = user
        if found is None:
            raise ApiError(
                401,
                "Incorrect API key provided: send one of platforms.api.keys as"
                " `Authorization: Bearer KEY`",
                code="invalid_api_key",
            )
        return found

    async def _body(self, headers: dict[str, str], receive: Any) -> bytes:
        """The body, at most `max_body` bytes (413 beyond, the rest unread)."""
        cap = self.config.max_body
        declared = headers.get("content-length")
        too_large = ApiError(413, f"the body is over {cap} bytes", code="request_too_large")
        if declared is not None and (not declared.isdigit() or int(declared) > cap):
            raise too_large
        body = await read_body(receive, cap)
        if body is None:
            raise too_large
        return body

    @staticmethod
    def _conversation(headers: dict[str, str], request: wire.ChatRequest) -> tuple[str, bool, bool]:
        """The thread of the key user's chat this request belongs to, whether the client
        is told its name (X-Hermes-Session, to continue it), and whether it is new: the
        header's; else one per `user` field; else a new one, which starts with the
        client's earlier messages."""
        named = headers.get(SESSION_HEADER)
        if named is not None:
            if not _LABEL.fullmatch(named):
                raise ApiError(400, "X-Hermes-Session: 1 to 128 letters, digits, '.', '_' or '-'")
            return named, True, False
        if request.user is not None:
            return "u:" + hashlib.sha256(request.user.encode()).hexdigest()[:24], False, False
        return "c" + secrets.token_hex(8), True, True

    def _event_id(self, user: str, headers: dict[str, str]) -> str:
        """From the client's Idempotency-Key (per user: another's same key is another
        request), else new."""
        key = headers.get("idempotency-key")
        if key is None:
            return secrets.token_hex(16)
        if not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY:
            raise ApiError(400, f"Idempotency-Key: 1 to {MAX_IDEMPOTENCY_KEY} characters")
        return "k" + hashlib.sha256(f"{user}\0{key}".encode()).hexdigest()[:32]

    async def _answer(
        self,
        event: InboundEvent,
        request: wire.ChatRequest,
        send: Any,
        extra: tuple[tuple[bytes, bytes], ...],
    ) -> None:
        if event.event_id in self.waiting:
            raise ApiError(
                409,
                "a request with this Idempotency-Key is being answered",
                code="idempotency_key_in_use",
            )
        with self.waiting.open(event.event_id) as steps:
            repeated = not await self.admit(event)
            if repeated:
                log.info("%s: %s sent again; answered from its turn", self.name, event.event_id)
            reply = _Reply(self, event, request, send, extra, steps, repeated)
            await (reply.stream() if request.stream else reply.whole())

    async def recorded_step(self, event_id: str) -> TurnStep | None:
        """The final step of a turn that ended already, from the journal."""
        found = await self.recorded(event_id) if self.recorded is not None else None
        if found is None:
            return None
        if found.state != "answered":  # it stays refused: a new key is a new request
            raise ApiError(
                409,
                "the request with this Idempotency-Key was refused (the rate"
                " limit, or access); send it with a new key",
                code="idempotency_key_refused",
            )
        ended = StepKind(found.ended or StepKind.DONE)
        if ended is StepKind.CUT:  # cut, and not to be resumed (it ran a command)
            raise ApiError(
                409,
                "the request with this Idempotency-Key was cut by a restart and not resumed;"
                " send it with a new key",
                code="idempotency_key_abandoned",
            )
        return TurnStep(ended, found.text, event_id=event_id)

    def answers(self, step: TurnStep) -> bool:
        """Whether a final step is the request's answer: done, or stopped by /stop; one
        cut by serve's drain is not (its turn is resumed after the restart, and the request
        sent again with its Idempotency-Key gets that answer)."""
        if step.kind is StepKind.INTERRUPTED:
            return not self.draining
        return step.kind is StepKind.DONE

    def refusal(self, step: TurnStep) -> ApiError:
        """A final step that is not an answer, as OpenAI's error."""
        if step.kind is StepKind.REFUSED and step.wait is not None:
            seconds = max(1, math.ceil(step.wait))
            return ApiError(
                429,
                step.text or f"rate limit reached: try again in {seconds} s",
                "rate_limit_exceeded",
                "rate_limit_exceeded",
                headers=((b"retry-after", str(seconds).encode()),),
            )
        if step.kind is StepKind.REFUSED and not self.draining:
            return ApiError(
                403,
                step.text or "this key's user may not talk to hermes",
                "permission_error",
                "permission_denied",
            )
        if step.kind is StepKind.ERROR:
            return ApiError(500, step.text or "the turn failed", "server_error", "turn_failed")
        return ApiError(
            503,
            "hermes stopped before it answered; send the request again (with the same"
            " Idempotency-Key it is answered once, after the restart)",
            "server_error",
            "unavailable",
        )


class _Reply:
    """One request's answer, from its turn's steps."""

    def __init__(
        self,
        adapter: ApiAdapter,
        event: InboundEvent,
        request: wire.ChatRequest,
        send: Any,
        extra: tuple[tuple[bytes, bytes], ...],
        steps: trio.MemoryReceiveChannel[TurnStep],
        repeated: bool,
    ) -> None:
        self.adapter, self.event, self.request, self.send = adapter, event, request, send
        self.extra, self.steps, self.repeated = extra, steps, repeated
        self.id = f"chatcmpl-{event.event_id}"
        self.created = int(adapter.clock.now())

    async def next(self) -> TurnStep:
        """The turn's next step. A repeated request's turn may have ended already, or
        end unseen (resumed before this request came): the journal is looked at too."""
        if not self.repeated:
            return await self.steps.receive()
        deadline = trio.current_time() + REPEAT_WAIT
        while trio.current_time() < deadline:
            found = await self.adapter.recorded_step(self.event.event_id)
            if found is not None:
                return found
            with trio.move_on_after(RECHECK):
                return await self.steps.receive()
        raise ApiError(
            409,
            "the request with this Idempotency-Key was cut and not resumed; send it with a new key",
            code="idempotency_key_abandoned",
        )

    async def whole(self) -> None:
        step = await self.next()
        while not step.final:
            step = await self.next()
        if not self.adapter.answers(step):
            raise self.adapter.refusal(step)
        body = wire.completion(self.id, self.request.model, self.created, step.text)
        await _json(self.send, 200, body, self.extra)

    async def stream(self) -> None:
        """Server-sent events: the text as it comes, then the rest of the final answer
        (what the model did not stream), the finish, and `[DONE]`. An error before the
        first chunk is the response's status; after it, an `error` event."""
        step = await self.next()
        if step.final and not self.adapter.answers(step):
            raise self.adapter.refusal(step)
        await self.send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": SSE_HEADERS + list(self.extra),
            }
        )
        try:
            try:
                await self._chunks(step)
            except ApiError as exc:  # after the 200 went: the error is an event of the stream
                await self._event(exc.body())
                await self._event("[DONE]")
        except _ClientGone:
            log.warning("api: a client took no chunk in %gs; its stream ends", CLIENT_STUCK_AFTER)
            return
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _chunks(self, step: TurnStep) -> None:
        await self._event(self._chunk({"role": "assistant", "content": ""}))
        streamed = ""  # the text of this round of the model's, sent
        while True:
            if step.kind is StepKind.TEXT and step.text:
                piece = ("\n\n" if streamed == "" and self._said else "") + step.text
                streamed += step.text
                self._said = True
                await self._event(self._chunk({"content": piece}))
            elif step.kind is StepKind.TOOL_CALL:
                streamed = ""  # the next text is the model's next round
            elif step.final:
                break
            step = await self.next()
        if self.adapter.answers(step):
            rest = step.text[len(streamed) :] if step.text.startswith(streamed) else ""
            if rest and not streamed and self._said:
                rest = "\n\n" + rest
            if rest:
                await self._event(self._chunk({"content": rest}))
            await self._event(self._chunk({}, "stop"))
        else:
            await self._event(self.adapter.refusal(step).body())
        await self._event("[DONE]")

    _said = False  # text went out already (a round before a tool call)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return wire.chunk(self.id, self.request.model, self.created, delta, finish)

    async def _event(self, data: dict[str, Any] | str) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        with trio.move_on_after(CLIENT_STUCK_AFTER):
            await self.send(
                {
                    "type": "http.response.body",
                    "body": f"data: {text}\n\n".encode(),
                    "more_body": True,
                }
            )
            return
        raise _ClientGone()


async def _json(
    send: Any, status: int, body: dict[str, Any], extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    await respond(send, status, json.dumps(body).encode(), "application/json", extra)
