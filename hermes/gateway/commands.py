"""The commands the router answers itself, without the agent, on every platform (the
table of every command, and where each runs: hermes.gateway.command_table). Each reaches
the router only through `CommandSurface`.
Unknown `/words` go to the agent as text (one that names a skill loads it there). In a
conversation many users share, the commands that change it are an owner's
(`refused_in_shared`, asked first).
"""

from __future__ import annotations

from typing import Protocol

import attrs

from hermes.actors.clock import Clock
from hermes.adapters.contract import InboundEvent
from hermes.agent.context import provider_key
from hermes.agent.loop import Agent
from hermes.config import ConfigError, GatewayConfig, Role
from hermes.delivery.channels import set_home
from hermes.delivery.session_keys import shared
from hermes.delivery.targets import LOCAL
from hermes.gateway.command_table import BY_WORD, HELP, ROUTER_COMMANDS, word_of
from hermes.gateway.session_host import SessionHost, SessionServices
from hermes.gateway.turn_follower import TurnFollower
from hermes.operations.approvals import (
    ApproveArgs,
    DenyArgs,
    NobodyWaits,
    approve_request,
    deny_request,
)
from hermes.operations.context import Ops
from hermes.state.approvals import (
    APPROVED,
    ApprovalEnded,
    ApprovalNotFound,
    approvals,
    get_approval,
)
from hermes.state.db import Db
from hermes.state.errors import SessionNotFound
from hermes.state.sessions import end_session, get_session


class CommandSurface(Protocol):
    """What a command reaches of the router, and nothing else."""

    db: Db
    clock: Clock
    agent: Agent
    gateway: GatewayConfig
    services: SessionServices
    host: SessionHost
    turns: TurnFollower

    async def role(self, event: InboundEvent) -> Role: ...

    def ops(self, event: InboundEvent) -> Ops: ...


async def refused_in_shared(
    router: CommandSurface, event: InboundEvent, session_id: str
) -> str | None:
    """Why a user's command is refused where the conversation is shared (a thread with
    `thread_sessions_per_user: false`, a group with `group_sessions_per_user: false`):
    /new, /undo, /retry and /compress would take an owner's messages away, and /stop
    acts only when every turn in flight there is the user's own. None: it may run."""
    word = word_of(event.text)
    command = BY_WORD.get(word)
    if command is None or not command.changes:
        return None
    if command.runs == "session" and event.text.strip() != word:
        return None  # the session actor takes only the bare word as its command: text
    if not shared(event.target(), event.chat_type, router.gateway):
        return None
    if await router.role(event) == "owner":
        return None
    place, setting = (("thread", "thread_sessions_per_user") if event.thread_id
                      else ("chat", "group_sessions_per_user"))  # fmt: skip
    why = f"this {place} is one conversation for everyone in it (gateway.{setting}: false)"
    if word != "/stop":
        return f"Only an owner can use {word} here: {why}."
    others = [f for f in router.turns.following.values()
              if f.session_id == session_id and f.event.user_id != event.user_id]  # fmt: skip
    return f"Only an owner can stop someone else's turn here: {why}." if others else None


@attrs.frozen
class CommandContext:
    router: CommandSurface
    event: InboundEvent
    session_id: str


@attrs.frozen
class CommandReply:
    text: str
    session_id: str | None  # the session the user is in afterwards


async def _new(c: CommandContext) -> CommandReply:
    await c.router.host.interrupt(c.session_id)
    try:
        await c.router.db.write(end_session, c.session_id, "new session", c.router.clock.now())
    except SessionNotFound:
        pass  # it never had a turn
    new = await c.router.host.start_new(c.event)
    return CommandReply(f"Started a new session ({new}).", new)


async def _stop(c: CommandContext) -> CommandReply:
    stopped = await c.router.host.interrupt(c.session_id)
    return CommandReply("Stopped the running turn." if stopped else "Nothing is running.",
                        c.session_id)  # fmt: skip


def _model(c: CommandContext, chosen: str | None) -> str:
    first, *rest = (provider_key(p.name, p.model)
                    for p in c.router.agent.chain.starting_with(chosen).providers)  # fmt: skip
    return f"{first} (then {', '.join(rest)})" if rest else first


async def _chosen(c: CommandContext) -> str | None:
    """The session's /model choice: its live actor's, else state.db's."""
    actor = c.router.host.session_actor(c.session_id)
    if actor is not None:
        return actor.ctx.model
    row = await c.router.db.read(get_session, c.session_id)
    return row.model if row is not None else None


async def _status(c: CommandContext) -> CommandReply:
    actor = c.router.host.session_actor(c.session_id)
    running = actor is not None and actor.current is not None
    waiting = len(actor.queue) if actor is not None else 0
    text = (
        f"session {c.session_id} · model {_model(c, await _chosen(c))} ·"
        f" {'running' if running else 'idle'}"
        f" · {waiting} waiting"
    )
    return CommandReply(text, c.session_id)


async def _whoami(c: CommandContext) -> CommandReply:
    e = c.event
    name = f" ({e.user_name})" if e.user_name else ""
    role = await c.router.role(e)
    offered = c.router.agent.offered(role)
    tools = ", ".join(offered) or "none"
    text = f"{e.platform} user {e.user_id}{name} · authorized · role: {role} · tools: {tools}"
    if "terminal" in offered:
        where = c.router.services.backends.describe()
        text += f" · commands run on: {where['owner' if role == 'owner' else 'user']}"
    for tool, why in c.router.agent.permissions.withheld.get(role, {}).items():
        text += f" · no {tool}: {why}"
    return CommandReply(text, c.session_id)


async def _sethome(c: CommandContext) -> CommandReply:
    if await c.router.role(c.event) != "owner":
        return CommandReply("Only an owner can set the home channel.", c.session_id)
    target = c.event.target()
    await c.router.db.write(set_home, target, c.event.user_id, c.router.clock.now())
    return CommandReply(
        f"This chat is now the home channel of {target.platform}.",
        c.session_id,
    )


async def _model_cmd(c: CommandContext) -> CommandReply:
    """/model shows this session's model; /model NAME switches it to a configured
    provider (NAME: "name/model", or the provider's or the model's name alone, where
    that is unique); /model default goes back to config's order. Owners only switch."""
    words = c.event.text.split()
    if len(words) < 2:
        return CommandReply(f"model: {_model(c, await _chosen(c))}", c.session_id)
    if await c.router.role(c.event) != "owner":
        return CommandReply("Only an owner can switch the model.", c.session_id)
    name = words[1]
    providers = c.router.agent.chain.providers
    keys = [provider_key(p.name, p.model) for p in providers]
    if name == "default":
        chosen = None
    else:
        found = [k for k, p in zip(keys, providers, strict=True) if name in (k, p.name, p.model)]
        if len(found) != 1:
            why = "matches more than one" if found else "is not one"
            return CommandReply(f"{name} {why} of the configured models: {', '.join(keys)}",
                                c.session_id)  # fmt: skip
        chosen = found[0]
    await c.router.host.choose_model(c.event, c.session_id, chosen)
    return CommandReply(f"model: {_model(c, chosen)}", c.session_id)


async def _decide(c: CommandContext) -> CommandReply:
    """/approve [ID [always]] and /deny [ID]: an owner of the request's platform decides
    it (a button press sends the same words). Without an ID: the one request whose
    prompt is in this chat, if only one waits here."""
    word, *rest = c.event.text.split()
    approve = word.split("@", 1)[0].lower() == "/approve"
    verb = "approve" if approve else "deny"
    if rest:
        try:
            request = await c.router.db.read(get_approval, rest[0].strip().lower())
        except ApprovalNotFound as exc:
            return CommandReply(f"{exc}.", c.session_id)
    else:
        here = str(c.event.target())
        now = c.router.clock.now()
        waiting = [a for a in await c.router.db.read(approvals, now) if a.asked_in == here]
        if len(waiting) != 1:
            ids = ", ".join(a.id for a in waiting)
            text = f"Name one: {ids}." if waiting else "Nothing waits for approval here."
            return CommandReply(text, c.session_id)
        request = waiting[0]
    # An owner of the platform it was asked on (the local endpoint's: the operator).
    where = c.event.platform in (request.platform, LOCAL)
    if not where or await c.router.role(c.event) != "owner":
        return CommandReply(f"Only an owner can {verb}.", c.session_id)
    always = approve and [w.lower() for w in rest[1:2]] == ["always"]
    ops = c.router.ops(c.event)
    try:
        if approve:
            done = await approve_request(ops, ApproveArgs(request.id, always))
        else:
            done = await deny_request(ops, DenyArgs(request.id))
    except (ApprovalEnded, NobodyWaits) as exc:
        return CommandReply(f"{exc}.", c.session_id)
    if done.state != APPROVED:
        return CommandReply(f"Denied ({done.id}): {done.command} will not run.", c.session_id)
    rule = " It runs without asking again in that session and directory." * always
    return CommandReply(f"Approved ({done.id}): {done.command} runs now.{rule}", c.session_id)


async def _mcp(c: CommandContext) -> CommandReply:
    servers = c.router.agent.mcp
    if servers is None:
        return CommandReply("No MCP servers run here.", c.session_id)
    return CommandReply(servers.describe(await c.router.role(c.event)), c.session_id)


async def _reload_mcp(c: CommandContext) -> CommandReply:
    servers = c.router.agent.mcp
    if await c.router.role(c.event) != "owner":
        return CommandReply("Only an owner can reload the MCP servers.", c.session_id)
    if servers is None:
        return CommandReply("No MCP servers run here.", c.session_id)
    try:
        return CommandReply(await servers.reload(), c.session_id)
    except ConfigError as exc:
        return CommandReply(f"Nothing changed: {exc}", c.session_id)


async def _help(c: CommandContext) -> CommandReply:
    """/help: the command table's lines."""
    return CommandReply(HELP, c.session_id)


_ANSWERS = {
    "/new": _new,
    "/stop": _stop,
    "/status": _status,
    "/help": _help,
    "/whoami": _whoami,
    "/sethome": _sethome,
    "/model": _model_cmd,
    "/approve": _decide,
    "/deny": _decide,
    "/mcp": _mcp,
    "/reload-mcp": _reload_mcp,
}
assert frozenset(_ANSWERS) == ROUTER_COMMANDS, "the table and the answers name the same"


async def answer_command(word: str, context: CommandContext) -> CommandReply:
    return await _ANSWERS[word](context)
