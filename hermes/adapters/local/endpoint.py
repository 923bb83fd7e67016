"""The local endpoint: an adapter speaking JSON-RPC 2.0 over WebSocket on 127.0.0.1.

Every connection presents the token from HERMES_HOME/serve.token in an
`Authorization: Bearer` header; anything else is refused before the
WebSocket opens. Malformed JSON, unknown methods and bad params get JSON-RPC
errors and the connection lives on; a frame over 1 MiB is refused (the
connection is closed with 1009).

`chat.send` is a chat message like any platform's: the endpoint picks the
session at its edge (the one the client names, or a new id), admits the
event, and streams the turn's steps back as `turn.event` notifications (its text
coalesced: a frame at most every 50 ms, not one per word); the call's result is the
final step. Steps of turns no call waits for (a turn
resumed after a restart) and answers sent to a session go to every client
that follows it. The other methods are handed to `methods`.

A slow client holds its turn back: a call keeps at most CALL_STEPS steps, and
the endpoint (so the router, so the turn, so the model's stream) waits while
they are full. A client that takes no frame for CLIENT_STUCK_AFTER seconds is
stuck: its connection is cut, its calls end, and whatever waited on it goes on.
"""

from __future__ import annotations

import collections
import contextlib
import hmac
import logging
import math
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from trio_websocket import (
    CloseReason,
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    serve_websocket,
)

from hermes.actors.link import LinkStatus
from hermes.adapters.base import AdapterSetup, PlatformAdapter
from hermes.adapters.contract import (
    Admit,
    ChatType,
    InboundEvent,
    SendRequest,
    SendResult,
    Sent,
    StepKind,
    TurnStep,
)
from hermes.adapters.local import jsonrpc
from hermes.adapters.local.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, SERVER_BUSY, RpcError
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.waiting import Waiting
from hermes.config import InputError, Secrets, not_blank, structure

log = logging.getLogger(__name__)

MAX_FRAME = 1024 * 1024
CALL_STEPS = 16  # steps a chat.send call holds for its client before the turn waits
CLIENT_STUCK_AFTER = 30.0  # seconds a client may take to accept one frame
COALESCE = 0.05  # streamed text goes to a client at most this often ...
COALESCE_BYTES = 1024  # ... unless this much waits
STUCK = 1008  # the close code of a connection cut for taking no frames


class Client:
    """One authenticated connection, as the gateway's methods see it."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.sessions: set[str] = set()
        self.scope = trio.CancelScope()  # around the connection's handler: cut() ends it

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send(jsonrpc.notification(method, params))

    async def send(self, text: str) -> None:
        """One frame; a client that does not take it in CLIENT_STUCK_AFTER is cut, and
        this raises ConnectionClosed as for a client that left."""
        with trio.move_on_after(CLIENT_STUCK_AFTER):
            await self.ws.send_message(text)  # trio-websocket serializes concurrent sends
            return
        log.warning("local endpoint: a client took no frame in %gs; cut", CLIENT_STUCK_AFTER)
        self.scope.cancel()
        raise ConnectionClosed(CloseReason(STUCK, "the client stopped reading"))


Handler = Callable[[Client, str, dict[str, Any]], Awaitable[Any]]


@attrs.frozen
class ChatSend:
    """`chat.send`'s parameters."""

    text: str = attrs.field(validator=not_blank)
    session: str | None = attrs.field(default=None, validator=not_blank)
    message_id: str | None = attrs.field(default=None, validator=not_blank)  # names a retry


ASKED_KEPT = 1024  # recent chat.send calls whose asker already saw the answer streamed


class LocalEndpoint(PlatformAdapter[PlatformConfig]):
    mailbox_size = 64  # a turn's steps arrive in bursts; the router waits when it is full
    platform = "local"
    progress_deadline = math.inf  # a server: it is alive while it runs

    def __init__(
        self,
        host: str,
        port: int,
        token: str,
        methods: Handler,
        status: LinkStatus,
        admit: Admit,
        on_bound: Callable[[int], None] = lambda port: None,
        name: str = "local",
    ) -> None:
        super().__init__(
            AdapterSetup(name, PlatformConfig(), Secrets({}, frozenset()), status, admit)
        )
        self.host = host
        self.port = port
        self.token = token
        self.methods = methods
        self.on_bound = on_bound
        self.clients: set[Client] = set()
        self.waiting = Waiting(CALL_STEPS)
        self.asked: collections.OrderedDict[str, Client] = collections.OrderedDict()

    async def on_start(self) -> None:
        if isinstance(self.methods, contextlib.AbstractAsyncContextManager):
            await self.exits.enter_async_context(self.methods)  # what the methods hold open
        server = await self.nursery.start(
            lambda task_status: serve_websocket(
                self._client,
                self.host,
                self.port,
                None,
                handler_nursery=self.nursery,
                max_message_size=MAX_FRAME,
                task_status=task_status,
            )
        )
        self.port = server.port
        await super().on_start()
        self.progress()
        self.on_bound(self.port)

    async def finish_in_flight(self) -> None:
        """Calls waiting on a turn get its final step (the router's flush sends it)."""
        await self.waiting.all_ended()

    async def connect(self) -> None:
        await trio.sleep_forever()  # the server runs in the actor's nursery

    async def _publish(
        self, session_id: str, method: str, params: dict[str, Any], skip: Client | None = None
    ) -> int:
        """Notify every client following the session; how many it reached."""
        reached = 0
        for client in list(self.clients):
            if session_id in client.sessions and client is not skip:
                try:
                    await client.notify(method, params)
                    reached += 1
                except ConnectionClosed:
                    self.clients.discard(client)
        return reached

    async def show(self, step: TurnStep) -> None:
        """To the call waiting on the step's turn (waits while the call is CALL_STEPS
        behind), else to the session's followers."""
        if await self.waiting.show(step):
            return
        chat = step.target.chat_id if step.target is not None else ""
        params = {"session": step.session_id or chat, **_step(step)}
        await self._publish(chat, "turn.event", params)

    async def send(self, request: SendRequest) -> SendResult:
        """A message to a session (an answer, a cron brief): its followers get it,
        except the client whose call streamed it already."""
        asker = self.asked.pop(request.reply_to, None) if request.reply_to else None
        session = request.target.chat_id
        params = {
            "session": session,
            "text": request.text,
            "reply_to": request.reply_to,
            "kind": request.kind,
        }
        reached = await self._publish(session, "chat.message", params, skip=asker)
        return Sent(f"{session}:{reached}")

    async def _chat_send(self, client: Client, params: ChatSend) -> dict[str, Any]:
        session = params.session or f"local_{secrets.token_hex(6)}"
        # A client that sends a message again (after a lost connection) names it with the
        # same message_id: admission recognises it and it is not answered twice.
        event_id = f"{session}:{params.message_id}" if params.message_id else secrets.token_hex(8)
        event = InboundEvent(
            "local",
            event_id,
            ChatType.DM,
            session,
            "local",
            params.text,
            message_id=event_id,
            session_hint=session,
        )
        if event_id in self.waiting:  # the same message, still being answered
            return {"session": session, "text": "", "status": "duplicate"}
        client.sessions.add(session)
        self.asked[event_id] = client
        while len(self.asked) > ASKED_KEPT:
            self.asked.popitem(last=False)
        with self.waiting.open(event_id) as steps:
            if not await self.admit(event):
                return {"session": session, "text": "", "status": "duplicate"}
            return await self._stream(client, session, steps)

    async def _stream(
        self, client: Client, session: str, steps: trio.MemoryReceiveChannel[TurnStep]
    ) -> dict[str, Any]:
        """The call's steps to its client, its streamed text coalesced: a text frame at
        most every COALESCE seconds (or once COALESCE_BYTES wait), never per word; any
        other step sends what text waits first. Returns the call's result."""
        held: list[TurnStep] = []
        size, last_frame, flush_at = 0, -math.inf, math.inf

        async def flush() -> None:
            nonlocal size, last_frame, flush_at
            if held:
                text = "".join(h.text for h in held)
                joined = attrs.evolve(held[-1], text=text)
                held.clear()
                await client.notify("turn.event", {"session": joined.session_id, **_step(joined)})
            size, last_frame, flush_at = 0, trio.current_time(), math.inf

        while True:
            step = None
            with trio.move_on_at(flush_at):
                step = await steps.receive()
            if step is None:  # the held text's time came
                await flush()
                continue
            if step.kind is StepKind.TEXT:
                held.append(step)
                size += len(step.text)
                if size >= COALESCE_BYTES or trio.current_time() >= last_frame + COALESCE:
                    await flush()
                else:
                    flush_at = last_frame + COALESCE
                continue
            await flush()
            if step.final:
                return self._reply_json(session, step)
            await client.notify("turn.event", {"session": step.session_id, **_step(step)})

    def _reply_json(self, session: str, step: TurnStep) -> dict[str, Any]:
        if step.kind is StepKind.REFUSED:  # the router took no turn (draining)
            raise RpcError(SERVER_BUSY, step.text or "refused")
        return {"session": step.session_id or session, "text": step.text, "status": str(step.kind)}

    def _authorized(self, request: WebSocketRequest) -> bool:
        for key, value in request.headers:
            if key.lower() == b"authorization":
                given = value.decode(errors="replace").removeprefix("Bearer ").strip()
                return hmac.compare_digest(given.encode(), self.token.encode())
        return False

    async def _client(self, request: WebSocketRequest) -> None:
        if not self._authorized(request):
            await request.reject(403, body=b"a valid token from serve.token is required\n")
            return
        client = Client(await request.accept())
        self.clients.add(client)
        try:
            with client.scope:
                async with trio.open_nursery() as calls:
                    await self._read(client, calls)
        except* ConnectionClosed:
            pass  # the client went away; its calls were cancelled with it
        except* Exception as group:  # one connection's trouble never takes the endpoint down
            log.error("local endpoint connection failed: %r", group.exceptions)
        finally:
            self.clients.discard(client)

    async def _read(self, client: Client, calls: trio.Nursery) -> None:
        while True:
            text = await client.ws.get_message()
            try:
                req = jsonrpc.parse(text)
            except RpcError as exc:
                await client.send(jsonrpc.error(None, exc))
                continue
            calls.start_soon(self._call, client, req)

    async def _dispatch_call(self, client: Client, req: jsonrpc.Request) -> Any:
        if req.method != "chat.send":
            return await self.methods(client, req.method, req.params)
        try:
            params = structure(req.params, ChatSend)
        except InputError as exc:
            raise RpcError(INVALID_PARAMS, f"invalid params of chat.send: {exc}") from None
        return await self._chat_send(client, params)

    async def _call(self, client: Client, req: jsonrpc.Request) -> None:
        try:
            value = await self._dispatch_call(client, req)
            reply = jsonrpc.result(req.id, value)
        except ConnectionClosed:
            return  # the client left while its call ran (a turn streaming): not an error
        except RpcError as exc:
            reply = jsonrpc.error(req.id, exc)
        except Exception as exc:  # a bug in one method must not end the connection
            log.exception("local endpoint: %s failed", req.method)
            reply = jsonrpc.error(req.id, RpcError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
        if req.id is not None:
            try:
                await client.send(reply)
            except ConnectionClosed:
                pass


def _step(step: TurnStep) -> dict[str, Any]:
    """A step's fields on the wire (`turn.event`'s params beside the session)."""
    wire = {
        "kind": str(step.kind),
        "text": step.text,
        "tool": step.tool or "",
        "call_id": step.call_id or "",
    }
    return {**wire, "note": step.note} if step.note else wire
