"""Intake: what becomes of an admitted event, as one pure decision.

Between admission and a turn the router gathers facts (what authorization said, whether
serve drains, the rate limit's verdict, the session's state) and asks two pure stages:
`screen` (whether the event is refused: a stranger, chatter in a group not addressed to
the bot, another bot, a drain) and, for what passes, `route` (a command, a part of a
burst, or a turn that starts, queues or steers). Each decision carries what the user is
told, so a table test can see that every admitted message ends in an answer or a reason:
a refusal's notice (silent only where nobody should hear one: a stranger or a bot in a
group, chatter), a rate limit's notice (once), the drain notice, or the turn that answers
it (a merged part and a steered message are answered by the turn they joined).
"""

from __future__ import annotations

import attrs

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.settings import Busy, GroupsConfig
from hermes.gateway.authorization import Decision
from hermes.gateway.command_table import BY_WORD, ROUTER_COMMANDS, SESSION_COMMANDS, TABLE, word_of

DRAIN_NOTICE = "hermes is shutting down; send your message again in a moment"
ONCE = frozenset(c.word for c in TABLE if c.takes_text)  # `/queue TEXT`: that way, once


@attrs.frozen
class Refuse:
    """Not taken. `notice`: what the sender is told ("": nothing, in a group or to a
    stranger); `reason`: for the log; `answered`: the refusal is a command's answer (the
    journal row ends answered, not refused)."""

    reason: str
    notice: str = ""
    answered: bool = False


@attrs.frozen
class Limited:
    """Past the rate limit: `notice` the first time, "" (nothing) after it."""

    notice: str


@attrs.frozen
class Command:
    """A command the router answers at once (`word`), without the agent."""

    word: str


@attrs.frozen
class Merge:
    """Held for the rest of its burst: the sender's next message in the chat within the
    merge window joins it; the turn that runs them all answers it."""


@attrs.frozen
class Start:
    """A turn now; a turn running in the session is interrupted (its answer says so)."""

    text: str


@attrs.frozen
class Queue:
    """A turn after the running one (a session command always waits this way)."""

    text: str
    how = "queue"


@attrs.frozen
class Steer:
    """Added to the running turn before its next model call; answered by that turn (if it
    ends before reading it, it runs next, as a queued turn)."""

    text: str
    how = "steer"


Way = Refuse | Limited | Command | Merge | Start | Queue | Steer
"""Every way an event can go."""


@attrs.frozen
class Screening:
    """What `screen` needs to know besides the event. `bot_turns`: bot-started turns in
    a row in the event's chat so far."""

    authorized: Decision
    groups: GroupsConfig
    pairing_offer: str = ""  # the pairing code message, where authorization offered one
    draining: bool = False
    bot_turns: int = 0


def addressed(event: InboundEvent, groups: GroupsConfig) -> bool:
    """Whether a message is for the bot under the chat's activation: a DM always is; in a
    group, by `groups.activation`, and a command of ours is (`/status`; `/status@name`
    only where the adapter says the name is the bot's, as a mention)."""
    if event.chat_type is ChatType.DM or groups.activation == "always":
        return True
    first = event.text.strip().split(maxsplit=1)[0] if event.text.strip() else ""
    if word_of(first) in BY_WORD and ("@" not in first or event.mentioned):
        return True  # `/status@name`: ours where the adapter says the name is the bot's
    if groups.activation == "reply":
        return event.replied
    return event.mentioned or event.replied


def screen(event: InboundEvent, facts: Screening) -> Refuse | None:
    """Whether the event is refused, and how; None: it goes on to `route`. Authorized
    first: a stranger or a bot never gets the drain notice."""
    if event.is_bot:
        if facts.groups.bots != "answer" or event.chat_type is ChatType.DM:
            return Refuse("a bot")
        if facts.bot_turns >= facts.groups.bot_turns:
            return Refuse(f"a bot, after {facts.groups.bot_turns} bot turns in a row")
    if not facts.authorized.allowed:
        offer = facts.pairing_offer if facts.authorized.offer_pairing else ""
        return Refuse(facts.authorized.reason, offer)
    if not addressed(event, facts.groups):
        return Refuse(f"not addressed to the bot (groups.activation: {facts.groups.activation})")
    if facts.draining:
        return Refuse("hermes is draining", DRAIN_NOTICE)
    return None


@attrs.frozen
class Routing:
    """What `route` needs to know. `limited`: the rate limit's verdict (None: through);
    `in_shared`: why a command is refused in a shared conversation (None: it may run);
    `merge_window`: the event's platform's; `running`: a turn runs (or waits) in the
    event's session; `busy`: the mode in force there (the session's, else the platform's,
    else the gateway's)."""

    limited: str | None = None
    in_shared: str | None = None
    merge_window: float = 0.0
    running: bool = False
    busy: Busy = "interrupt"


def route(event: InboundEvent, facts: Routing) -> Way:
    """A screened event's way: a command, a part of a burst, or a turn."""
    if facts.limited is not None:
        return Limited(facts.limited)
    text = event.text.strip()
    if facts.in_shared is not None:
        return Refuse("a shared conversation's command", facts.in_shared, answered=True)
    word = word_of(text)
    if word in ROUTER_COMMANDS:
        return Command(word)
    if word in ONCE:
        rest = said_by(event)
        if not rest:
            return Refuse(f"{word} without text", f"Usage: {word} TEXT", answered=True)
        return Queue(rest) if word == "/queue" else Steer(rest)  # as it says, even if idle
    if text in SESSION_COMMANDS:
        return Queue(text)  # waits for the running turn; never interrupts it
    if facts.merge_window > 0 and not text.startswith("/"):
        return Merge()
    return dispatch(event.text, facts.running, facts.busy)


def said_by(event: InboundEvent) -> str:
    """The text a turn records for `event`: `/steer TEXT` and `/queue TEXT` say TEXT."""
    if word_of(event.text) in ONCE:
        parts = event.text.strip().split(maxsplit=1)
        return parts[1].strip() if len(parts) > 1 else ""
    return event.text


def dispatch(text: str, running: bool, busy: Busy) -> Start | Queue | Steer:
    """A turn's text (a message's, or a burst's joined) as the session's state and its
    busy mode have it: an idle session starts it."""
    if not running or busy == "interrupt":
        return Start(text)
    return Queue(text) if busy == "queue" else Steer(text)
