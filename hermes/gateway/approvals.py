"""Approvals: a turn's guarded command waits for an owner's yes.

The request and its prompt commit together (hermes/state/approvals.py, the
outbox): a crash leaves either both or neither. The turn then waits on the
request inside its own cancel scope, bounded by `agent.approval_timeout`; a
decision (a button, `/approve`, `hermes approvals`, the dashboard: all through
hermes/operations/approvals.py) wakes it. `/stop`, a newer message or a drain
ends the wait and the request is marked cancelled; a request pending when serve
stopped is expired at the next start (the router does it), so a restart never
runs what was waiting.

The prompt goes to the turn's own chat when its sender is an owner; else to an
owner's DM on that platform (the latest DM session of one), else the platform's
home channel, else the turn's chat (an operator can still decide from the CLI
or the dashboard). The local endpoint shows no prompt: its operator decides with
`hermes approvals` or the dashboard. A prompt not yet sent when its request ends
undecided is taken back from the outbox.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator

import apsw
import attrs
import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import Button, Target
from hermes.adapters.settings import PlatformConfig
from hermes.agent.tools.base import ToolContext
from hermes.delivery.channels import home_channels
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import drop_unsent, enqueue
from hermes.delivery.split import chunks_for
from hermes.delivery.targets import asked_at
from hermes.state.approvals import (
    CANCELLED,
    EXPIRED,
    PENDING,
    Approval,
    NewApproval,
    end_approval,
    expire_abandoned,
    get_approval,
    open_approval,
)
from hermes.state.db import Db

log = logging.getLogger(__name__)

SHUTTING_DOWN = "hermes is shutting down"
STOPPED = "the turn was stopped"


class ApprovalWaits:
    """The requests turns wait on in this serve, by id: a decision made anywhere in
    serve wakes its turn at once. Shared by the router (whose turns wait) and the
    operator actions (which decide, only where a turn waits)."""

    def __init__(self) -> None:
        self._waiting: dict[str, trio.Event] = {}
        self.draining = False
        self.begun = 0  # waits begun, ever
        self._begins = trio.Event()  # set (and replaced) as each wait begins

    def reopen(self) -> None:
        """A router starts (again, after a restart in serve): its turns may wait."""
        self.draining = False

    def drain(self) -> None:
        """The router is stopping: every wait ends (its request cancelled) and none
        begins until the next router starts."""
        self.draining = True
        for event in self._waiting.values():
            event.set()

    def waiting_on(self, request_id: str) -> bool:
        return request_id in self._waiting

    def wake(self, request_id: str) -> None:
        event = self._waiting.get(request_id)
        if event is not None:
            event.set()

    @contextlib.contextmanager
    def waiting(self, request_id: str) -> Iterator[trio.Event]:
        """While a turn waits on `request_id`: the event a decision (or a drain) sets."""
        event = self._waiting[request_id] = trio.Event()
        self.begun += 1
        self._begins.set()
        self._begins = trio.Event()
        try:
            if self.draining:
                event.set()
            yield event
        finally:
            del self._waiting[request_id]

    async def until_begun(self, count: int) -> None:
        """Until `count` waits have begun (a test waits on it, not on the clock)."""
        while self.begun < count:
            await self._begins.wait()


def prompt_text(request: Approval) -> str:
    """The command as a code block: shown as it is, never as the platform's formatting
    (a `||` or `*` in it must not hide or restyle part of what is approved)."""
    seconds = round(request.expires_at - request.created_at)
    wait = f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"
    command = request.command.replace("```", "`\u200b``")  # the fence stays one fence
    return (
        f"Approval needed ({request.id}): {request.asker} wants to run\n"
        f"```\n{command}\n```\n"
        f"in {request.cwd} ({request.reason}). It waits {wait} for an owner:"
        f" /approve {request.id} or /deny {request.id}."
    )


def buttons(request_id: str) -> tuple[Button, ...]:
    return (
        Button("Approve", f"/approve {request_id}"),
        Button("Always for this session", f"/approve {request_id} always"),
        Button("Deny", f"/deny {request_id}"),
    )


def prompt_target(
    conn: apsw.Connection,
    ctx: ToolContext,
    where: Target | None,
    owners: frozenset[str],
    platforms: dict[str, PlatformConfig],
) -> Target | None:
    """Where the owner is asked (None: nowhere in a chat, the CLI and the dashboard):
    `where`, the turn's (`asked_at`), when its sender is an owner; else an owner's latest
    DM on that platform, else its home channel, else `where`."""
    if where is None or ctx.caller.is_owner:
        return where
    marks = ",".join("?" * len(owners)) or "NULL"
    dm = conn.execute(
        f"SELECT chat_id, scope_id FROM sessions WHERE source = ? AND chat_type = 'dm'"
        f" AND user_id IN ({marks}) ORDER BY coalesce(last_activity_at, started_at) DESC"
        " LIMIT 1",
        (where.platform, *owners),
    ).fetchone()
    if dm is not None:
        return Target(where.platform, dm[0], None, dm[1])
    home = home_channels(conn, platforms).get(where.platform)
    return home.target if home is not None else where


def end_waiting(
    conn: apsw.Connection, request_id: str, state: str, by: str | None, now: float
) -> Approval:
    """The waiting turn ends the request (unless a decision came first), and its prompt
    is taken back where it has not gone yet."""
    ended = end_approval(conn, request_id, state, by, now)
    if ended.state == state:
        drop_unsent(conn, f"approval:{request_id}")
    return ended


def expire_left(conn: apsw.Connection, gone: Callable[[str], bool], now: float) -> list[Approval]:
    """At a router's start: what nobody waits on any more is expired (never run), and
    its prompts taken back."""
    ended = expire_abandoned(conn, gone, now)
    for request in ended:
        drop_unsent(conn, f"approval:{request.id}")
    return ended


@attrs.define
class Approvals:
    """The router's Approver (hermes/agent/tools/base.py): one for every session's turns.
    `owners(platform)`: who may decide there (hermes/gateway/roles.py's rule)."""

    db: Db
    clock: Clock
    waits: ApprovalWaits
    owner: str  # the router's name in state.db: a restart expires what it left pending
    timeout: float
    owners: Callable[[str], Awaitable[frozenset[str]]]
    platforms: dict[str, PlatformConfig]
    redact: Callable[[str], str] = str

    async def ask(self, ctx: ToolContext, command: str, reason: str, cwd: str) -> Approval:
        origin, where = ctx.origin, asked_at(ctx.origin)
        # Decided by an owner of the platform it is asked on (an inbound webhook's answer's).
        platform = (where or origin or ctx.caller).platform
        owners = await self.owners(platform)
        user_name = await self.db.read(_user_name, ctx.session_id, ctx.caller.user_id)
        new = NewApproval(
            ctx.session_id,
            command,
            self.redact(command),
            cwd,
            reason,
            platform,
            origin.chat_id if origin is not None else None,
            ctx.caller.user_id,
            user_name,
            self.owner,
            self.timeout,
            ctx.call_id,
        )

        def open_and_prompt(conn: apsw.Connection, now: float) -> Approval:
            target = (
                None
                if self.waits.draining
                else prompt_target(conn, ctx, where, owners, self.platforms)
            )
            asked = attrs.evolve(new, asked_in=str(target) if target is not None else None)
            request = open_approval(conn, asked, now)
            if request.state == PENDING and target is not None:
                chunks = chunks_for(prompt_text(request), target.platform)
                enqueue(
                    conn,
                    target,
                    chunks,
                    "notice",
                    f"approval:{request.id}",
                    request.created_at,
                    buttons=buttons(request.id),
                )
            return request

        with trio.CancelScope(shield=True):  # a request opened is a request ended below
            request = await self.db.write(open_and_prompt, self.clock.now())
        if request.state != PENDING:
            return request  # "always" for this session: no prompt, no wait
        nudge(ctx.outbox)
        log.info("approval %s waits for an owner: %s", request.id, request.command)
        with self.waits.waiting(request.id) as woken:
            try:
                # A decision may have come before the turn listened: read, then wait.
                request = await self.db.read(get_approval, request.id)
                if request.state == PENDING and not woken.is_set():
                    with trio.move_on_after(self.timeout):
                        await woken.wait()
            except BaseException:  # /stop, a newer message, the turn cut: never run later
                await self._end(request.id, CANCELLED, STOPPED)
                raise
        if self.waits.draining:
            return await self._end(request.id, CANCELLED, SHUTTING_DOWN)
        return await self._end(request.id, EXPIRED, None)  # or as it was decided

    async def _end(self, request_id: str, state: str, by: str | None) -> Approval:
        """Shielded: what ends the wait is often a cancel, and the row must say so."""
        with trio.CancelScope(shield=True):
            return await self.db.write(end_waiting, request_id, state, by, self.clock.now())


def _user_name(conn: apsw.Connection, session_id: str, user_id: str) -> str | None:
    """The asker's name as their session knows it (their own session: its starter)."""
    found = conn.execute(
        "SELECT user_name FROM sessions WHERE id = ? AND user_id = ?", (session_id, user_id)
    ).fetchone()
    return found[0] if found is not None else None
