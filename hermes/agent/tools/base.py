"""What a tool is, and what it may reach while a turn runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

import attrs

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.errors import Invalid
from hermes.adapters.contract import TurnStep
from hermes.adapters.media import Saved
from hermes.agent.memory import Memory
from hermes.agent.permissions import Caller
from hermes.agent.untrusted import CallMarks, TurnMarks
from hermes.delivery.targets import Origin
from hermes.state.approvals import Approval
from hermes.state.db import Db
from hermes.terminal.env import Redactor
from hermes.terminal.output import BoundedOutput
from hermes.terminal.session import TerminalSession

if TYPE_CHECKING:  # the library writes through this layer's file tools
    from hermes.agent.skills.library import SkillLibrary


class ToolError(Invalid):
    """A tool call that cannot be done; its message goes back to the model."""


@attrs.define
class ModelCalls:
    """What is left of a turn's budget of model calls (`agent.max_turns`): its subagents'
    calls are taken from it too."""

    left: int

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


class Delegates(Protocol):
    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Run `delegate_task`'s tasks (its arguments) as subagents of the turn of `ctx`;
        what each came to, for the model."""


class Asker(Protocol):
    async def ask(self, ctx: ToolContext, question: str, choices: tuple[str, ...]) -> str:
        """Ask the user whose message started the turn of `ctx`, in its chat, and wait (in
        the turn's cancel scope) for their answer; what the model is told."""


class Approver(Protocol):
    async def ask(self, ctx: ToolContext, command: str, reason: str, cwd: str) -> Approval:
        """Ask an owner whether the turn of `ctx` may run `command` in `cwd`, which was
        held for `reason` (the guard's, or the turn's untrusted text), and wait (in the
        turn's cancel scope) until they decide or the request ends; the request as it
        ended (or was approved)."""


@attrs.frozen
class SessionFiles:
    """Where a session's files are. send_file sends from `workspace` (a user only where it
    is the session's own, not a shared agent.workdir) and, for an owner, from `cache` and
    `outputs` too; nothing else under `home` (HERMES_HOME: its secrets) is ever sent."""

    home: Path
    workspace: Path  # its commands' directory
    own: bool  # the workspace is this session's alone
    cache: Path  # media the chats sent
    outputs: Path  # tools' spilled output
    outgoing: Path  # where files queued to send are copied


@attrs.define
class ToolContext:
    """`caller`: whose turn it is; it decides which tools are offered and whose
    sessions, memory, jobs and chat the tools reach (all of them for an owner)."""

    session_id: str
    db: Db
    terminal: TerminalSession
    memory: Memory
    caller: Caller
    background: Address | None = None
    scheduler: Address | None = None
    origin: Origin | None = None
    tz: ZoneInfo = ZoneInfo("UTC")
    outbox: Address | None = None  # told when a send is queued (it also looks at its start)
    platforms: frozenset[str] = frozenset({"local"})  # where send_message may send
    clock: Clock = attrs.Factory(Clock)  # serve's one clock; the real one unless given
    model: str | None = None  # the session's /model choice ("name/model"); None: config's order
    approver: Approver | None = None  # asks an owner about a guarded command; None: nobody to ask
    asker: Asker | None = None  # asks the turn's user a question (clarify); None: nobody to ask
    call_id: str | None = None  # the tool call being run (set for each call)
    files: SessionFiles | None = None  # where its files are (None: it sends none)
    marks: TurnMarks = attrs.Factory(TurnMarks)  # the turn's: what its context holds
    call: CallMarks | None = None  # the tool call being run: what it brought in, its note
    skills: SkillLibrary | None = None  # the agent's skills (set by each turn; None: none)
    depth: int = 0  # how many delegations deep this turn is (0: the user's own)
    allowed: frozenset[str] | None = None  # a subagent's tools: a subset of its parent's
    delegation: Delegates | None = None  # runs subagents (set by each turn; None: none)
    calls: ModelCalls | None = None  # the turn's model calls left (a subagent: its parent's)
    progress: Callable[[TurnStep], Awaitable[None]] | None = None  # the turn's step lines

    @property
    def untrusted(self) -> str | None:
        """Why the turn's context holds text from outside an owner's hands (None: none)."""
        return self.marks.untrusted

    def took_in(self, why: str) -> None:
        """Text from outside an owner's hands came into the turn through this call (`why`
        names where from): its record is marked, and so is the turn."""
        (self.call or self.marks).took_in(why)

    def show(self, image: Saved) -> None:
        """Show the model `image` (a file in the media cache) after this call's answer, as a
        multimodal model sees a user's image."""
        if self.call is not None:
            self.call.shown.append(image)

    def note(self, text: str) -> None:
        """A note for this call's tool line (where a command ran, and why)."""
        if self.call is not None:
            self.call.note = text


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str: ...


def schema(tool: Tool) -> dict[str, Any]:
    """The tool as the model sees it (OpenAI function-calling format)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def need(args: dict[str, Any], key: str) -> Any:
    if args.get(key) in (None, ""):
        raise ToolError(f"missing argument {key!r}")
    return args[key]


def capped(text: str, ctx: ToolContext) -> str:
    """`text` within the session's output cap, as a command's output is kept: head and
    tail, the whole of it spilled to a private file the marker names, redacted before it
    is written there (as a command's). For what a tool brings in from outside (a page,
    an MCP server's answer)."""
    options = ctx.terminal.options
    output = BoundedOutput(options.cap, options.spill_dir)
    try:
        output.write(Redactor(ctx.terminal.redactor_secrets)(text))
    finally:
        output.close()
    return output.text()
