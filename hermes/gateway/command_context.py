"""What a chat command is given: the narrow part of the router it may reach
(`CommandSurface`), the event that asked, and its session; and what it answers."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import attrs

from hermes.actors.clock import Clock
from hermes.adapters.contract import InboundEvent
from hermes.adapters.settings import Busy, GatewayConfig
from hermes.agent.loop import Agent
from hermes.config import Role
from hermes.gateway.command_table import BY_WORD, word_of
from hermes.gateway.people import People
from hermes.gateway.questions import Questions
from hermes.gateway.session_host import SessionHost, SessionServices
from hermes.gateway.turn_follower import TurnFollower
from hermes.operations.context import Ops
from hermes.state.db import Db


class CommandSurface(Protocol):
    """What a command reaches of the router, and nothing else. `memories`: the memory
    files' root (a link merges two accounts' memory there)."""

    db: Db
    clock: Clock
    agent: Agent
    gateway: GatewayConfig
    services: SessionServices
    host: SessionHost
    turns: TurnFollower
    memories: Path
    people: People
    questions: Questions

    async def role(self, event: InboundEvent) -> Role: ...

    def ops(self, event: InboundEvent) -> Ops: ...

    def busy_for(self, event: InboundEvent, session_id: str) -> Busy: ...


@attrs.frozen
class CommandContext:
    router: CommandSurface
    event: InboundEvent
    session_id: str


@attrs.frozen
class CommandReply:
    text: str
    session_id: str | None  # the session the user is in afterwards


async def refused_in_shared(
    router: CommandSurface, event: InboundEvent, session_id: str
) -> str | None:
    """Why a user's command is refused where the conversation is shared (a thread with
    `gateway.thread_sessions_per_user: false`, a group with `groups.sessions: shared`):
    /new, /undo, /retry, /compress and /busy would change an owner's conversation, and
    /stop acts only when every turn in flight there is the user's own. None: it may run."""
    word = word_of(event.text)
    command = BY_WORD.get(word)
    if command is None or not command.changes:
        return None
    if command.runs == "session" and event.text.strip() != word:
        return None  # the session actor takes only the bare word as its command: text
    if not router.host.shared(event):
        return None
    if await router.role(event) == "owner":
        return None
    place, setting = (
        ("thread", "gateway.thread_sessions_per_user: false")
        if event.thread_id
        else ("chat", f"platforms.{event.platform}.groups.sessions: shared")
    )
    why = f"this {place} is one conversation for everyone in it ({setting})"
    if word != "/stop":
        return f"Only an owner can use {word} here: {why}."
    others = [
        f
        for f in router.turns.following.values()
        if f.session_id == session_id and f.event.user_id != event.user_id
    ]
    return f"Only an owner can stop someone else's turn here: {why}." if others else None
