"""The Signal adapter: a client of the user's signal-cli daemon (JSON-RPC; rpc.py), never
Java in hermes.

- Start: the daemon's `version`, and `listAccounts` must name `account` (else fatal,
  with the command that links or registers it; a single-account daemon has no
  listAccounts and is taken at its word).
- Receiving: over HTTP, the daemon's event stream from the event id kept with the last
  admission (`Last-Event-ID`: the daemon replays what it wrote after it, from the last
  1000), its keep-alives the progress; over a socket, its `receive` notifications, a
  `version` call every `keepalive` seconds the progress. With `--receive-mode=
  on-connection` the daemon takes messages from Signal's servers only while hermes is
  connected: what comes while hermes is away waits there. The window: signal-cli
  confirms a message to Signal before hermes has it; a crash of hermes then is covered
  by the replay, a restart of the daemon at that moment (over a socket: any drop) is
  not. A stream the daemon closes is a reconnect, not a crash.
- An event is admitted by (sender, timestamp); its attachments are read with
  `getAttachment` only once it is authorized.
- Sends: `send` to a number (or account id) or a group id, the Markdown as text-style
  ranges, a quote for a reply; a file (a voice note too: an audio attachment) in
  `attachments` as a data URI (no filesystem shared with the daemon), its caption the
  message. Rate limits wait as long as Signal said; an untrusted identity (a changed
  safety number) is never trusted here: the row is dead and the owner is told, with the
  command that trusts it once they have checked.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import AsyncIterable
from contextlib import aclosing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import trio

from hermes.adapters.base import AdapterFatal, AdapterSetup
from hermes.adapters.contract import (
    Cursor,
    Fetched,
    InboundEvent,
    OutFile,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
    file_gone,
)
from hermes.adapters.http import CONNECT_TIMEOUT, HttpAdapter, failed_send
from hermes.adapters.media import MediaError, Saved, save
from hermes.adapters.refusals import Codes, Refusal, retry_after
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.signal.config import SignalConfig
from hermes.adapters.signal.inbound import message_id, read_envelope
from hermes.adapters.signal.platform import MAX_UPLOAD
from hermes.adapters.signal.rpc import (
    MAX_LINE,
    TOO_LARGE,
    HttpRpc,
    Incoming,
    RpcError,
    RpcGone,
    SocketRpc,
    daemon,
)
from hermes.adapters.signal.styles import styled
from hermes.config import Secrets

log = logging.getLogger(__name__)

INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = -32600, -32601, -32602, -32603
UNTRUSTED, RATE_LIMITED, IO_ERROR, USER_ERROR = -4, -5, -3, -1
FAILURES = frozenset(
    {
        "IDENTITY_FAILURE",
        "RATE_LIMIT_FAILURE",
        "PROOF_REQUIRED_FAILURE",
        "UNREGISTERED_FAILURE",
        "NETWORK_FAILURE",
    }
)
CODES = Codes(  # a recipient's failure as signal-cli names it
    rate_limited=frozenset({"RATE_LIMIT_FAILURE", "PROOF_REQUIRED_FAILURE"}),
    passing=frozenset({"NETWORK_FAILURE", ""}),  # "": a failure it did not name
)
# How the daemon going away shows (a restart of it, a cut stream): a reconnect, not a crash.
GONE = (RpcGone, httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, OSError)
_RECIPIENT = re.compile(r"\+\d+|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")
# signal-cli's words for an attachment refused before the message went: one it could not
# read, or Signal's CDN refusing the upload (413: too large; it has no limit of its own).
_FILE_REFUSED = re.compile(r"\(AttachmentInvalidException\)|\[413\]")


class SignalAdapter(HttpAdapter[SignalConfig]):
    platform = "signal"
    typing_every = 10.0  # Signal shows "typing" for 15 s after each indicator

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.account = config.account or ""
        self.event_key = f"{setup.name}:event"  # the last admitted event's id (HTTP)
        self.progress_deadline = 3 * config.keepalive
        self.over_http = (config.rpc or "").startswith(("http://", "https://"))
        self.calls: HttpRpc | SocketRpc | None = None
        self.single_account = False  # the daemon runs for one account: no `account` param
        self.replaying = False  # an event id is kept: a reconnect replays after it
        self.warned_no_ids = False
        self.told_owner: set[str] = set()  # numbers whose changed identity the owner heard of

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """The daemon answers and has the account (doctor: Signal has no token)."""
        config = cls.configured(config)
        if not config.rpc or not config.account:
            raise AdapterFatal("set platforms.signal.rpc and account")
        if not config.rpc.startswith(("http://", "https://")):  # a connection is a receiver
            return (
                f"{config.account} over {config.rpc}: not asked (a connection would take"
                " the messages waiting on Signal; run the daemon with"
                " --receive-mode=on-connection)"
            )
        async with daemon(config.rpc, httpx.Timeout(CONNECT_TIMEOUT)) as rpc:
            version, _ = await _hello(rpc, config.account)
        return (
            f"{config.account} on signal-cli {version} (run the daemon with"
            " --receive-mode=on-connection)"
        )

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        await super().on_start()
        if self.over_http and self.http is not None and self.config.rpc:
            self.calls = HttpRpc(self.config.rpc, self.http)

    def params(self, **values: Any) -> dict[str, Any]:
        """A call's params, with the account unless the daemon runs for one."""
        return values if self.single_account else {"account": self.account, **values}

    # -- receiving ------------------------------------------------------------------------

    async def connect(self) -> str | None:
        if not self.config.rpc or not self.account:
            raise AdapterFatal(f"set platforms.{self.name}.rpc and account")
        try:
            return await self._connected()
        except GONE as exc:
            return f"the daemon went ({exc!r}): connecting again"  # a restart of it
        except BaseExceptionGroup as group:  # from the socket's reader and its pings
            gone, rest = group.split(GONE)
            if rest is not None or gone is None:
                raise
            return f"the daemon went ({gone.exceptions[0]!r}): connecting again"

    async def _connected(self) -> str:
        assert self.config.rpc
        timeout = httpx.Timeout(CONNECT_TIMEOUT, read=2 * self.progress_deadline)
        cap = max(MAX_LINE, self.config.max_attachment * 4 // 3 + MAX_LINE)
        async with daemon(self.config.rpc, timeout, cap) as rpc:
            if isinstance(rpc, HttpRpc):
                await self._started(rpc)
                last = await self.cursors.get(self.event_key) if self.cursors else None
                self.replaying = last is not None
                async with aclosing(rpc.events(self.account, last)) as events:
                    await self._receive(events)
                return "the daemon closed its event stream"
            try:
                self.calls = rpc  # over a socket, sends go on this connection
                await self._started(rpc)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._ping, rpc)
                    await self._receive(rpc.incoming)  # until the daemon closes it
                    nursery.cancel_scope.cancel()
            finally:
                self.calls = None
        return "the daemon closed the connection"

    async def _started(self, rpc: HttpRpc | SocketRpc) -> None:
        version, single = await _hello(rpc, self.account)
        self.single_account = single
        self.progress()
        log.info("%s: signal-cli %s, account %s", self.name, version, self.account)

    async def _ping(self, rpc: SocketRpc) -> None:
        """A socket's daemon sends nothing while nothing comes: a cheap call shows it
        lives."""
        while True:
            await trio.sleep(self.config.keepalive)
            try:
                await rpc.call("version")
            except RpcGone:
                return  # the connection ended: what it brought is taken, then it ends
            self.progress()
            self.settled()

    async def _receive(self, incoming: AsyncIterable[Incoming]) -> None:
        async for item in incoming:
            self.progress()
            self.settled()  # the stream worked past its start: if it ends, reconnect at once
            if item.params is None:
                continue  # a keep-alive
            account = item.params.get("account")
            if account is not None and account != self.account:
                continue  # a daemon with more accounts sends a socket all of theirs
            try:
                found = read_envelope(item.params, self.account, self.platform)
            except Exception as exc:  # anyone's bytes, whatever they break: never a crash
                log.warning("%s: an envelope that does not read: %r", self.name, exc)
                found = None
            cursor = None
            if item.event_id is not None and self.cursors is not None:
                cursor = Cursor(self.event_key, item.event_id)
            elif self.over_http and not self.warned_no_ids:
                self.warned_no_ids = True
                log.warning(
                    "%s: this signal-cli's events carry no ids: a message hermes had"
                    " not admitted when it stopped is not sent again (run a newer"
                    " signal-cli)",
                    self.name,
                )
            if found is not None:
                await self.admit(found.event, cursor)
                self.replaying = self.replaying or cursor is not None
            elif cursor is not None and not self.replaying:
                # The first event ever: kept, so a crash before the next admission
                # still replays from here (the daemon replays only after an id).
                await self.cursors.put(cursor.key, cursor.value)
                self.replaying = True

    # -- attachments ----------------------------------------------------------------------

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each attachment of an authorized message, read from the daemon's store with
        getAttachment and saved under the cache (at most `max_attachment` bytes)."""
        files, problems = [], []
        for text in attachments:
            try:
                files.append(await self._attachment(json.loads(text)))
            except (
                RpcError,
                RpcGone,
                httpx.HTTPError,
                MediaError,
                OSError,
                ValueError,
                KeyError,
            ) as exc:
                problems.append(f"[an attachment could not be read: {exc}]")
        return Fetched(tuple(files), tuple(problems))

    async def _attachment(self, ref: dict[str, Any]) -> Saved:
        if self.cache is None or self.calls is None:
            raise ValueError("no cache directory, or no connection to the daemon")
        size = ref.get("size")
        if isinstance(size, int) and size > self.config.max_attachment:
            raise ValueError(f"it is {size} bytes, over {self.config.max_attachment}")
        where = {k: ref[k] for k in ("recipient", "groupId") if k in ref}
        cap = self.config.max_attachment * 4 // 3 + MAX_LINE
        found = await self.calls.call(
            "getAttachment", self.params(id=str(ref["id"]), **where), limit=cap
        )
        encoded = found.get("data") if isinstance(found, dict) else None
        if not isinstance(encoded, str) or len(encoded) > self.config.max_attachment * 4 // 3 + 4:
            raise ValueError("the daemon gave no data, or more than the cap")
        try:
            data = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"not base64: {exc}") from exc
        name = f"{ref['id']}-{Path(str(ref.get('name') or 'attachment')).name}"
        mime = ref.get("contentType") if isinstance(ref.get("contentType"), str) else None
        return await trio.to_thread.run_sync(save, self.cache, name, data, mime, self.media)

    # -- sending --------------------------------------------------------------------------

    def _to(self, chat: str) -> dict[str, Any]:
        return {"recipient": [chat]} if _RECIPIENT.fullmatch(chat) else {"groupId": chat}

    async def send(self, request: SendRequest) -> SendResult:
        if self.calls is None:
            return RetryAfter(None, "not sent: not connected to the daemon")
        text, styles = (request.text, []) if request.plain else styled(request.text)
        params = self.params(message=text, **self._to(request.target.chat_id))
        if styles:
            params["textStyle"] = styles
        if request.reply_to:
            quoted, _, author = request.reply_to.partition(":")
            if quoted.isdigit() and author:
                params.update(quoteTimestamp=int(quoted), quoteAuthor=author)
        if request.file is not None:
            try:
                uri = await trio.to_thread.run_sync(data_uri, request.file)
            except OSError as exc:  # its copy is gone: it can never be sent
                return file_gone(exc)
            except ValueError as exc:
                return Permanent(str(exc))
            params["attachments"] = [uri]
        try:
            answer = await self.calls.call("send", params)
        except RpcError as exc:
            return await self._refused(request, exc)
        except RpcGone as exc:
            return Unconfirmed(str(exc)) if exc.sent else RetryAfter(None, f"not sent: {exc}")
        except httpx.HTTPError as exc:
            return failed_send(exc)
        return await self._answered(request, answer)

    async def _answered(self, request: SendRequest, answer: Any) -> SendResult:
        """A send's answer: sent if Signal took it for anyone, else why not."""
        answer = answer if isinstance(answer, dict) else {}
        results = [r for r in answer.get("results") or [] if isinstance(r, dict)]
        timestamp = answer.get("timestamp")
        if not results or any(r.get("type") == "SUCCESS" for r in results):
            return Sent(message_id(timestamp, self.account) if isinstance(timestamp, int) else None)
        return await self._failure(request, results[0], "send")

    async def _refused(self, request: SendRequest, exc: RpcError) -> SendResult:
        response = exc.data.get("response") if isinstance(exc.data, dict) else None
        results = response.get("results") if isinstance(response, dict) else None
        failed = (
            [r for r in results if isinstance(r, dict) and r.get("type") in FAILURES]
            if (isinstance(results, list))
            else []
        )
        if failed:  # what Signal said of each recipient
            return await self._failure(request, failed[0], str(exc))
        if exc.code == UNTRUSTED or exc.code == RATE_LIMITED:
            kind = "IDENTITY_FAILURE" if exc.code == UNTRUSTED else "RATE_LIMIT_FAILURE"
            return await self._failure(request, {"type": kind}, str(exc))
        if exc.code in (USER_ERROR, INVALID_REQUEST, INVALID_PARAMS):
            return Permanent(str(exc))  # no such group, not a member, a request it refuses
        if request.file is not None and exc.code == INTERNAL and _FILE_REFUSED.search(exc.message):
            return Permanent(f"Signal did not take the file: {exc}")  # uploaded before a send
        if exc.code in (IO_ERROR, TOO_LARGE):
            return RetryAfter(None, str(exc))  # Signal's servers not reached: nothing sent
        return Unconfirmed(str(exc))  # the daemon failed mid-way, or its answer was lost

    async def _failure(self, request: SendRequest, result: Any, said: str) -> SendResult:
        kind = result.get("type") if isinstance(result, dict) else None
        wait = result.get("retryAfterSeconds") if isinstance(result, dict) else None
        if kind == "IDENTITY_FAILURE":
            address = result.get("recipientAddress") if isinstance(result, dict) else None
            who = (address or {}).get("number") if isinstance(address, dict) else None
            who = who if isinstance(who, str) else request.target.chat_id  # a group's member
            await self._tell_owner(who)
            return Permanent(f"{who}'s safety number changed: not trusted (the owner was told)")
        if kind == "PROOF_REQUIRED_FAILURE":
            log.error(
                "%s: Signal asks for a captcha before more sends (signal-cli"
                " submitRateLimitChallenge)",
                self.name,
            )
        code = kind if isinstance(kind, str) else ""
        if code in CODES.rate_limited:  # for the account: every chat waits
            text = f"rate limited by Signal ({said})"
            return self.refused(Refusal(0, code, text, retry_after({}, wait), True), CODES)
        if code == "UNREGISTERED_FAILURE":
            return self.refused(
                Refusal(0, code, f"{request.target.chat_id} is not on Signal"), CODES
            )
        return self.refused(Refusal(0, code, f"{kind or 'failed'} ({said})"), CODES)

    async def _tell_owner(self, number: str) -> None:
        """The owner hears once per incarnation that a number's identity changed; hermes
        never trusts it by itself."""
        owner = self.config.owner
        log.warning(
            "%s: %s's safety number changed; nothing is sent to them until it is trusted",
            self.name,
            number,
        )
        if not owner or owner == number or number in self.told_owner or self.calls is None:
            return
        self.told_owner.add(number)
        text = (
            f"Signal says {number}'s safety number changed, so I did not send them my"
            " answer. Compare the safety number with them in the Signal app; if it is"
            f" right, run: signal-cli -a {self.account} trust -a {number}"
        )
        try:
            await self.calls.call("send", self.params(message=text, **self._to(owner)))
        except (RpcError, RpcGone, httpx.HTTPError) as exc:
            log.warning("%s: telling the owner failed: %s", self.name, exc)

    async def type_once(self, event: InboundEvent) -> None:
        if self.calls is not None:
            await self.calls.call("sendTyping", self.params(**self._to(event.chat_id)))


def data_uri(file: OutFile, limit: int = MAX_UPLOAD) -> str:
    """`file` as signal-cli takes an attachment over every transport (RFC 2397):
    `data:<mime>;filename=<name, %-escaped>;base64,<data>`. The name is needed: without a
    parameter, signal-cli's pattern takes `;base64` for one and the data for text.
    Blocking: a thread's."""
    with open(file.path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{file.name} is over the {limit} bytes hermes sends on Signal")
    encoded = base64.b64encode(data).decode("ascii")
    return f"data:{file.mime};filename={quote(file.name, safe='')};base64,{encoded}"


async def _hello(rpc: HttpRpc | SocketRpc, account: str) -> tuple[str, bool]:
    """The daemon's version, and whether it runs for one account (no listAccounts);
    fatal when it does not have `account`."""
    version = await rpc.call("version")
    named = version.get("version") if isinstance(version, dict) else None
    try:
        accounts = await rpc.call("listAccounts")
    except RpcError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        return str(named), True
    numbers = {a.get("number") for a in accounts or [] if isinstance(a, dict)}
    if account not in numbers:
        raise AdapterFatal(
            f"signal-cli has no account {account}: link it (`signal-cli link -n hermes`, then"
            f" scan the code in Signal's Linked devices) or register it (`signal-cli -a"
            f" {account} register`), then restart the daemon"
        )
    return str(named), False
