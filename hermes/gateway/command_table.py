"""Every chat command in one table: its word, where it is answered (`router`: at once,
without the agent; `session`: by the session actor as a turn of its own, queued behind the
running one, never interrupting it), who may use it, whether it changes the conversation
(in one many users share, that is an owner's), and its line of /help."""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class Command:
    word: str
    runs: Literal["router", "session"]
    help: str
    who: Literal["anyone", "owners"] = "anyone"  # "owners": what it changes is an owner's
    changes: bool = False  # it changes the conversation (a shared one: an owner's)
    takes_text: bool = False  # `/queue TEXT`: the text runs as a turn, in that way once


TABLE = (
    Command("/new", "router", "start a new session here", changes=True),
    Command("/stop", "router", "stop the running turn", changes=True),
    Command("/status", "router", "this session: id, model, running or idle"),
    Command("/whoami", "router", "who you are to me: your role and tools"),
    Command("/sethome", "router", "make this chat the home channel (owners)", who="owners"),
    Command(
        "/model",
        "router",
        "the model that answers; /model NAME switches this session (owners), /model default",
    ),
    Command("/compress", "session", "summarize older turns now", changes=True),
    Command(
        "/undo",
        "session",
        "take your last message and its answer out of the conversation",
        changes=True,
    ),
    Command("/retry", "session", "undo your last message and send it again", changes=True),
    Command("/usage", "session", "how full the context is"),
    Command("/todo", "router", "this session's todo list, as the agent keeps it"),
    Command("/answer", "router", "answer the agent's question: /answer ID CHOICE|TEXT"),
    Command(
        "/approve",
        "router",
        "let a command that waits for approval run (owners): /approve [ID [always]]",
        who="owners",
    ),
    Command("/deny", "router", "refuse it (owners): /deny [ID]", who="owners"),
    Command("/mcp", "router", "the MCP servers: their state and tools"),
    Command(
        "/reload-mcp",
        "router",
        "read config.yaml's mcp section again and restart what changed (owners)",
        who="owners",
    ),
    Command(
        "/busy",
        "router",
        "what a message sent mid-turn does here: /busy interrupt|queue|steer",
        changes=True,
    ),
    Command("/queue", "session", "run TEXT after the running turn: /queue TEXT", takes_text=True),
    Command("/steer", "session", "add TEXT to the running turn: /steer TEXT", takes_text=True),
    Command("/link", "router", "link your accounts on two platforms: /link, then /link CODE"),
    Command("/unlink", "router", "undo this account's link"),
    Command(
        "/continue",
        "router",
        "carry on your latest conversation from any linked account",
        changes=True,
    ),
    Command("/help", "router", "this list"),
)
BY_WORD = {command.word: command for command in TABLE}
ROUTER_COMMANDS = frozenset(c.word for c in TABLE if c.runs == "router")
SESSION_COMMANDS = frozenset(c.word for c in TABLE if c.runs == "session" and not c.takes_text)
"""The bare words the session actor answers itself, queued behind the running turn."""
SKILL_LINE = (
    "/SKILL    run a turn with that skill loaded: /deploy to staging (skills_list names them)"
)


def _line(command: Command) -> str:
    return (
        f"{command.word:<9} {command.help}"
        if len(command.word) < 9
        else (f"{command.word}  {command.help}")
    )


HELP = "\n".join([*(_line(c) for c in TABLE[:-1]), SKILL_LINE, _line(TABLE[-1])])


def word_of(text: str) -> str:
    """The command word a message starts with (`/Stop@bot now` -> `/stop`), else ""."""
    text = text.strip()
    return text.split(maxsplit=1)[0].split("@", 1)[0].lower() if text else ""
