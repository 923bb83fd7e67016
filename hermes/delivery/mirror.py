"""Mirrors: a delivered cron brief written into the chat's session, so a reply to it
continues the job.

Planned with the brief (`plan_seeds`), carried on its first outbox row, and
written by `write_mirror` in the same transaction that marks that row sent:
a brief never seeds a session it did not reach, and one that reached the chat
is never missing from it. Each seed names its session by the exact key a
reply there resolves to (the router's own `session_key`), never by searching
a chat's sessions. Where the brief goes flat into a chat, two sessions are
seeded: the flat one for the scheduling user, and the brief's own thread
(thread id = the sent message's id), so a plain reply and an in-thread reply
both continue it. A seed is always derived from the row's own target: the
brief and its seed are in the same place.
"""

from __future__ import annotations

import json

import apsw
import attrs
import cattrs

from hermes.adapters.contract import ChatType, Target
from hermes.delivery.session_keys import Keying, new_session_id, session_key
from hermes.delivery.targets import LOCAL, Origin, PlannedTarget
from hermes.state.messages import NewMessage, append_message
from hermes.state.sessions import NewSession, current_session, ensure_session


@attrs.frozen
class Seed:
    """A session the brief is written into once it is sent."""

    chat_type: str
    user_id: str | None
    thread: bool = False  # the brief's own thread: its thread id is the sent message's id


@attrs.frozen
class Mirror:
    text: str
    seeds: tuple[Seed, ...]
    untrusted: str | None = None  # why the brief is not the owner's words (its turn's mark)

    def to_json(self) -> str:
        return json.dumps(cattrs.unstructure(self))

    @classmethod
    def from_json(cls, text: str) -> Mirror:
        return cattrs.structure(json.loads(text), cls)


def _where(target: Target, seed: Seed, message_id: str | None) -> Target:
    return attrs.evolve(target, thread_id=message_id) if seed.thread and message_id else target


def plan_seeds(
    planned: PlannedTarget,
    origin: Origin | None,
    chat_type: str | None,
    keying: Keying,
) -> tuple[tuple[Seed, ...], str | None]:
    """The sessions a mirrored brief seeds, and why one it should seed is not (a note
    for the run's record). `chat_type` is the target chat's kind, where known."""
    if not planned.mirror:
        return (), None
    target = planned.target
    if target.platform == LOCAL:
        return (Seed(str(ChatType.DM), None),), None
    if chat_type is None:
        return (), f"{target}: not mirrored: hermes has not seen what kind of chat it is"
    user = origin.user_id if origin is not None else None
    wanted = [Seed(chat_type, user)]
    if target.thread_id is None:
        wanted.append(Seed(chat_type, user, thread=True))
    kind = ChatType(chat_type)
    seeds = tuple(s for s in wanted if session_key(_where(target, s, "?"), kind, user, keying))
    if len(seeds) < len(wanted):
        return seeds, (
            f"{target}: the chat's sessions are per user and the job has no user id:"
            " delivered without seeding the chat's session"
        )
    return seeds, None


def write_mirror(
    conn: apsw.Connection,
    mirror: Mirror,
    target: Target,
    message_id: str | None,
    keying: Keying,
    now: float,
) -> list[str]:
    """Write the brief into each seeded session (the key's live session, else a new
    one); returns their ids. Runs inside the transaction that marks the row sent."""
    written = []
    for seed in mirror.seeds:
        where = _where(target, seed, message_id)
        if target.platform == LOCAL:
            key, session_id = None, target.chat_id
        else:
            key = session_key(where, ChatType(seed.chat_type), seed.user_id, keying)
            session_id = current_session(conn, key) or new_session_id(target.platform)
        ensure_session(
            conn,
            NewSession(
                session_id,
                source=target.platform,
                session_key=key,
                chat_id=where.chat_id,
                chat_type=seed.chat_type,
                thread_id=where.thread_id,
                user_id=seed.user_id,
                scope_id=where.scope_id,
                started_at=now,
            ),
        )
        append_message(
            conn,
            NewMessage(
                session_id,
                "assistant",
                mirror.text,
                platform_message_id=message_id,
                timestamp=now,
                untrusted=mirror.untrusted,
            ),
        )
        written.append(session_id)
    return written
