"""The commands the router answers itself, without the agent, on every platform (the
table of every command, and where each runs: hermes.gateway.command_table; those about a
conversation's flow: hermes.gateway.flow_commands). Each reaches the router only through
`CommandSurface` (hermes.gateway.command_context).
Unknown `/words` go to the agent as text (one that names a skill loads it there). In a
conversation many users share, the commands that change it are an owner's
(`refused_in_shared`, asked first).
"""

from __future__ import annotations

from hermes.agent.context import provider_key
from hermes.agent.tools.todo import checklist
from hermes.config import ConfigError
from hermes.delivery.channels import set_home
from hermes.delivery.targets import LOCAL
from hermes.gateway import flow_commands
from hermes.gateway.command_context import CommandContext, CommandReply
from hermes.gateway.command_table import HELP, ROUTER_COMMANDS
from hermes.operations.approvals import (
    ApproveArgs,
    DenyArgs,
    NobodyWaits,
    approve_request,
    deny_request,
)
from hermes.state.approvals import (
    APPROVED,
    ApprovalEnded,
    ApprovalNotFound,
    approvals,
    get_approval,
)
from hermes.state.errors import SessionNotFound
from hermes.state.sessions import end_session, get_session
from hermes.state.todos import todo_of


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
    return CommandReply(
        "Stopped the running turn." if stopped else "Nothing is running.", c.session_id
    )


def _model(c: CommandContext, chosen: str | None) -> str:
    first, *rest = (
        provider_key(p.name, p.model) for p in c.router.agent.chain.starting_with(chosen).providers
    )
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
    waiting = actor.waiting() if actor is not None else 0
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
            return CommandReply(
                f"{name} {why} of the configured models: {', '.join(keys)}", c.session_id
            )
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


async def _todo(c: CommandContext) -> CommandReply:
    """/todo: the checklist the agent keeps for this session (the todo tool)."""
    return CommandReply(checklist(await c.router.db.read(todo_of, c.session_id)), c.session_id)


async def _help(c: CommandContext) -> CommandReply:
    """/help: the command table's lines."""
    return CommandReply(HELP, c.session_id)


_ANSWERS = {
    **flow_commands.ANSWERS,
    "/new": _new,
    "/stop": _stop,
    "/status": _status,
    "/help": _help,
    "/todo": _todo,
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
