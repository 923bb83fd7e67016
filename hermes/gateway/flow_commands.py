"""The commands about how a conversation flows: `/busy` (what a message sent mid-turn
does here), `/link`, `/unlink` and `/continue` (one person on several platforms)."""

from __future__ import annotations

import typing

import trio

from hermes.actors.errors import NotFound
from hermes.adapters.contract import ChatType
from hermes.adapters.settings import Busy
from hermes.agent.memory import adopt
from hermes.gateway.command_context import CommandContext, CommandReply
from hermes.state.identities import (
    LINK_TTL,
    Linked,
    accounts_of,
    attach,
    issue_code,
    latest_session,
    redeem,
    unlink,
)
from hermes.state.questions import get_question
from hermes.state.sessions import get_session

MODES: dict[str, str] = {
    "interrupt": "a message sent while a turn runs stops it and starts one with both",
    "queue": "a message sent while a turn runs waits for it, then runs",
    "steer": "a message sent while a turn runs joins it before its next model call",
}
assert set(MODES) == set(typing.get_args(Busy)), "every busy mode is described"
ONLY_IN_A_DM = (
    "Send /link in a direct message with me: anyone who reads a link code here could"
    " link their account to yours."
)


async def busy(c: CommandContext) -> CommandReply:
    """/busy shows this conversation's mode; /busy MODE sets it here (kept with the
    session); /busy default goes back to config's."""
    words = c.event.text.split()
    if len(words) < 2:
        row = await c.router.db.read(get_session, c.session_id)  # kept while none runs
        mode = (row.busy if row is not None else None) or c.router.busy_for(c.event, c.session_id)
        return CommandReply(f"busy: {mode} ({MODES[mode]}).", c.session_id)
    chosen = words[1].lower()
    if chosen not in (*MODES, "default"):
        return CommandReply(f"Usage: /busy {'|'.join(MODES)}|default", c.session_id)
    await c.router.host.choose_busy(c.event, c.session_id, None if chosen == "default" else chosen)
    mode = c.router.busy_for(c.event, c.session_id)
    return CommandReply(f"busy: {mode} ({MODES[mode]}).", c.session_id)


async def link(c: CommandContext) -> CommandReply:
    """/link gives a one-time code; /link CODE, from your account on another platform,
    links the two. Both in a direct message only: whoever reads a code could use it."""
    event, db, now = c.event, c.router.db, c.router.clock.now()
    if event.chat_type is not ChatType.DM:
        return CommandReply(ONLY_IN_A_DM, c.session_id)
    role = await c.router.role(event)
    words = event.text.split(maxsplit=1)
    if len(words) < 2:
        code = await db.write(issue_code, event.platform, event.user_id, role, now)
        minutes = round(LINK_TTL / 60)
        return CommandReply(
            f"Your link code: {code}. Within {minutes} minutes, send /link {code} to me from"
            " your account on another platform (it must be allowed to talk to me there too).",
            c.session_id,
        )
    done = await db.write(redeem, words[1], event.platform, event.user_id, role, now)
    if not isinstance(done, Linked):
        return CommandReply(done.reason, c.session_id)
    await trio.to_thread.run_sync(adopt, c.router.memories, done.person, done.accounts)
    names = " and ".join(f"{p} {u}" for p, u in done.accounts)
    return CommandReply(
        f"Linked: {names} are one person to me now, with one memory. /continue carries on"
        " your latest conversation from here; /unlink undoes it.",
        c.session_id,
    )


async def unlink_cmd(c: CommandContext) -> CommandReply:
    gone = await c.router.db.write(unlink, c.event.platform, c.event.user_id)
    text = "This account is no longer linked." if gone else "This account is not linked."
    return CommandReply(text, c.session_id)


async def continue_cmd(c: CommandContext) -> CommandReply:
    """/continue: this chat carries on the person's most recent conversation, wherever
    it was; the answers come here. Not where the chat is one conversation for everyone
    in it: the others' words would go into yours."""
    event, db = c.event, c.router.db
    if c.router.host.shared(event):
        return CommandReply(
            "This chat is one conversation for everyone in it: /continue works in a direct"
            " message, or where the conversation here is yours alone.",
            c.session_id,
        )
    person = await c.router.people.person(event)
    if person is None:
        return CommandReply(
            "This account is not linked: /link links it with your account on another platform.",
            c.session_id,
        )
    found = await db.read(lambda conn: latest_session(conn, accounts_of(conn, person)))
    if found is None or found == c.session_id:
        return CommandReply("This chat already holds your latest conversation.", c.session_id)
    await db.write(attach, c.router.host.key_of(event), found, c.router.clock.now())
    row = await db.read(get_session, found)
    where = f" from {row.source}" if row is not None else ""
    return CommandReply(f"Continuing your conversation{where} ({found}) here.", found)


async def answer(c: CommandContext) -> CommandReply:
    """/answer ID CHOICE|TEXT (what a question's button sends): the one asked, or an owner."""
    words = c.event.text.split(maxsplit=2)
    if len(words) < 3:
        return CommandReply("Usage: /answer ID CHOICE|TEXT", c.session_id)
    questions, event = c.router.questions, c.event
    try:
        question = await c.router.db.read(get_question, words[1])
    except NotFound as exc:
        return CommandReply(f"{exc}.", c.session_id)
    asked = (question.platform, question.user_id) == (event.platform, event.user_id)
    may = asked or await c.router.role(event) == "owner"
    by = f"{event.platform} {event.user_id}"
    return CommandReply(await questions.answer(question.id, words[2], by, may), c.session_id)


ANSWERS = {
    "/answer": answer,
    "/busy": busy,
    "/link": link,
    "/unlink": unlink_cmd,
    "/continue": continue_cmd,
}
