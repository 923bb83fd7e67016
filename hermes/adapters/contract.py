"""The seam every chat platform plugs into: what an adapter hands the gateway, and
what the gateway asks an adapter to send.

An adapter turns its platform's wire protocol into platform-neutral inbound
events and performs sends that answer with a typed result. It knows nothing
of sessions, agents or authorization.
"""

from __future__ import annotations

import enum
import json
from typing import Protocol

import attrs

from hermes.actors.reply import Reply
from hermes.adapters.media import Saved


class ChatType(enum.StrEnum):
    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"


NOWHERE = "none"  # an event's answer_to: the answer stays in its session's transcript
HOME = "home:"  # an event's answer_to: `home:telegram`, that platform's home channel


@attrs.frozen
class InboundEvent:
    """One message from a platform, as the gateway sees every platform's.

    `event_id` is the platform's own id for this delivery (Telegram's
    update_id, Slack's event_id, Discord's message id): admission is keyed by
    (platform, event_id), so a retried or replayed event is recognised.
    `mentioned` says whether the bot was mentioned or replied to, `replied` whether the
    message answers one of the bot's own (the intake applies a group's activation);
    `attachments` are the adapter's own references to the files the message carries,
    fetched (`Fetch`) only once the event is authorized: a stranger's media costs nothing.
    `session_hint` is set only by an adapter that picks the session at its edge
    (the local endpoint: the session its client names, or a new id).
    `answer_to` is set only by an adapter that is a way in and no chat (the inbound
    webhooks): where the answer goes instead of the event's own chat, as
    `platform:chat[:thread]`, `home:platform` (that platform's home channel, resolved at
    admission) or `none` (nowhere: the session's transcript keeps it).
    """

    platform: str
    event_id: str
    chat_type: ChatType
    chat_id: str
    user_id: str
    text: str
    scope_id: str | None = None  # Slack workspace, Discord guild
    thread_id: str | None = None
    user_name: str | None = None
    is_bot: bool = False
    message_id: str | None = None
    reply_to: str | None = None
    mentioned: bool = False
    replied: bool = False  # it answers one of the bot's own messages (a group's `reply`)
    attachments: tuple[str, ...] = ()
    session_hint: str | None = None
    title: str | None = None  # the conversation's own title (an email's subject)
    answer_to: str | None = None

    def target(self) -> Target:
        """Where an answer to this event goes."""
        return Target(self.platform, self.chat_id, self.thread_id, self.scope_id)


@attrs.frozen
class Recorded:
    """How an admitted event ended, as the journal holds it: `answered`, `text` the turn's
    answer and `ended` its final step's kind (a StepKind's value; None where serve stopped
    before it was kept: then `text` is the session's answer of that moment); or `refused`
    (a rate limit, a refusal)."""

    state: str
    text: str
    ended: str | None = None


SEND_DEADLINE = 30.0
"""A send's one limit: an adapter answers every send within it (a request still out
then is Unconfirmed), and the outbox waits for that answer, not a limit of its own."""
FILE_DEADLINE = 300.0
"""The same for a send that uploads a file, at least; a large one gets a second for each
100 kB (a 50 MB file, 500 s)."""


@attrs.frozen
class Cursor:
    """An adapter's kept value (hermes/adapters/cursors.py), written with an admission.
    `rising`: a number that only moves forward (a later admission of an older event, a
    redelivery, leaves it)."""

    key: str
    value: str
    rising: bool = False


class Admit(Protocol):
    """Hand an event to the gateway: True once it is committed to the journal, False for a
    duplicate. An adapter acknowledges the event to its platform only after this returns.
    `cursor` commits with it (a poll offset past it: confirmed only once it is in)."""

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool: ...


@attrs.frozen
class Target:
    """Where a message goes: a chat on a platform, maybe a thread, maybe a scope."""

    platform: str
    chat_id: str
    thread_id: str | None = None
    scope_id: str | None = None

    def __str__(self) -> str:
        return ":".join(p for p in (self.platform, self.chat_id, self.thread_id) if p)


@attrs.frozen
class Button:
    """A button under a message. Pressing it is the same as sending `command` (an
    approval's `/approve ID`): the adapter admits the press as an InboundEvent whose
    text is `command`, from the user who pressed it, `mentioned`, in reply to the
    message that carries the button; and it acknowledges the press to its platform
    once that is admitted. A platform without buttons sends the text alone."""

    label: str
    command: str


@attrs.frozen
class OutFile:
    """A file to send: `path` is hermes's own copy of it (HERMES_HOME/outgoing), so what
    goes is what was queued; `voice`: as a voice note where the platform has them."""

    path: str
    name: str
    mime: str
    size: int
    voice: bool = False

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> OutFile:
        values = json.loads(text)
        return cls(**{f.name: values[f.name] for f in attrs.fields(cls)})

    @property
    def image(self) -> bool:
        return self.mime.startswith("image/") and not self.voice


@attrs.frozen
class SendRequest:
    """One chunk to send. `idempotency_key` is stable across retries and restarts.
    `buttons`: shown under this chunk, in one row, where the platform has buttons."""

    target: Target
    text: str
    idempotency_key: str
    reply_to: str | None = None
    plain: bool = False  # send without formatting (the formatted send was rejected)
    kind: str = "reply"  # reply, cron, send, notice: what the outbox row holds
    buttons: tuple[Button, ...] = ()
    # Set: replace the text (and buttons) of this message, which the bot sent earlier in
    # the target's chat, instead of a new send (a streamed answer, edited as it grows).
    # "Not modified" is success; a message gone or too old to edit is Permanent(missing).
    edit_of: str | None = None
    # Set: send this file, `text` its caption (a platform without captions sends the text
    # first). Checked against the platform's `max_upload` before it was queued.
    file: OutFile | None = None
    # The row was handed to an adapter before (a retry, or a send in flight at a restart):
    # a platform that can ask whether that send arrived (a key it gave the platform) asks
    # before it sends again.
    again: bool = False

    @property
    def deadline(self) -> float:
        if self.file is None:
            return SEND_DEADLINE
        return max(FILE_DEADLINE, self.file.size / 100_000)


@attrs.frozen
class Sent:
    """The platform took it; `message_id` is its id there. None: the platform accepted
    it (a 2xx, its `ok`) and did not say under which id. That is sent, on every
    platform: the platform's word that it has the message, so sending it again would
    show it twice and a dead letter would be untrue; only what needs the id (a reply
    thread of its own) goes without it."""

    message_id: str | None


@attrs.frozen
class RetryAfter:
    """Not now. Rate limited: the platform said `seconds`, for this chat or
    (`scope_wide`) for the whole platform. A passing fault (network, 5xx): `seconds`
    is None, and the sender backs off, longer with each attempt."""

    seconds: float | None
    reason: str
    scope_wide: bool = False


@attrs.frozen
class Permanent:
    """It will never be sent (chat not found, blocked, invalid): a dead letter at once.
    `formatting`: the platform could not parse the formatting ("can't parse
    entities"); the same chunk as plain text may go, so it is sent once more so."""

    reason: str
    formatting: bool = False
    missing: bool = False  # an edit whose message is gone, or can no longer be edited


def file_gone(exc: OSError) -> Permanent:
    """A file send whose copy under HERMES_HOME/outgoing cannot be read: it never will be."""
    return Permanent(f"the file to send is gone: {exc.strerror}")


@attrs.frozen
class Unconfirmed:
    """The request may have reached the platform and no answer came (a read timeout, a
    connection dropped after the request was written). Sent again only where the
    platform drops a repeated idempotency key; otherwise `unknown`, never twice. A
    failure before the request left (no connection) is a RetryAfter, not this."""

    reason: str


SendResult = Sent | RetryAfter | Permanent | Unconfirmed


@attrs.frozen
class Send:
    """Ask an adapter to send one chunk (a cast); the SendResult goes into `reply`.
    Adapters run sends concurrently, so one slow send never holds up the others; the
    outbox keeps one in flight per chat, which keeps each chat in order."""

    request: SendRequest
    reply: Reply = attrs.field(eq=False)


@attrs.frozen
class Fetch:
    """Ask an adapter to fetch an authorized event's attachments (a cast): `reply` gets
    a `Fetched`. Fetches run beside sends, never in the receive loop."""

    attachments: tuple[str, ...]
    reply: Reply = attrs.field(eq=False)


@attrs.frozen
class DeliveryFailed:
    """The platform said, after it took a send (a 2xx and an id), that the message was not
    delivered after all (WhatsApp's `failed` status): its outbox row is dead, with why."""

    platform: str
    message_id: str
    reason: str


@attrs.frozen
class Fetched:
    """The files saved, and a line for each one that could not be fetched."""

    files: tuple[Saved, ...]
    problems: tuple[str, ...] = ()


class StepKind(enum.StrEnum):
    """What a step of a turn is. The values are the local endpoint's wire names."""

    TEXT = "text"  # a piece of the reply as the model streams it
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    DONE = "done"  # the final answer
    INTERRUPTED = "interrupted"  # /stop, or a newer message took its place
    ERROR = "error"
    REFUSED = "refused"  # the router took no turn (authorization, a drain, a rate limit)
    CUT = "cut"  # cut from outside (a drain, a crash); an adapter sees it as interrupted

    @property
    def final(self) -> bool:
        return self not in (StepKind.TEXT, StepKind.TOOL_CALL, StepKind.TOOL_RESULT)


@attrs.frozen
class TurnStep:
    """A step of a turn, from the agent loop's emit to an adapter that shows progress
    (the local endpoint streams it; the others only see the final step). The loop
    fills what happened; the router adds which inbound event's turn it belongs to
    (`event_id`, `target`, `session_id`) before it hands the step on. The answer
    itself is sent as a SendRequest."""

    kind: StepKind
    text: str = ""
    tool: str | None = None
    call_id: str | None = None
    event_id: str = ""
    target: Target | None = None
    session_id: str | None = None
    settled: bool = False  # DONE: committed with the turn's `settle` write (its journal row)
    note: str = ""  # TOOL_RESULT: what its tool line adds (where a command ran, and why)
    wait: float | None = None  # REFUSED by the rate limit: seconds until there is room again

    @property
    def final(self) -> bool:
        return self.kind.final
