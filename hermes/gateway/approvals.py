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
`hermes approvals` or the dashboard.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import apsw
import attrs
import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import Button, Target
from hermes.agent.tools.base import ToolContext
from hermes.config import PlatformConfig
from hermes.delivery.channels import home_channels
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import enqueue
from hermes.delivery.split import chunks_for
from hermes.state.approvals import (
    CANCELLED,
    EXPIRED,
    PENDING,
    Approval,
    NewApproval,
    end_approval,
    get_approval,
    open_approval,
)
from hermes.state.db import Db

log = logging.getLogger(__name__)

SHUTTING_DOWN = "hermes is shutting down"
STOPPED = "the turn was stopped"
STREAMED = "local"  # its client holds the turn open: the operator decides elsewhere


class ApprovalWaits:
    """The requests turns wait on in this serve, by id: a decision made anywhere in
    serve wakes its turn at once. Shared by the router (whose turns wait) and the
    operator actions (which decide)."""

    def __init__(self) -> None:
        self._waiting: dict[str, trio.Event] = {}
        self.draining = False
        self.begun = 0  # waits begun, ever
        self._begins = trio.Event()  # set (and replaced) as each wait begins

    async def until_begun(self, count: int) -> None:
        """Until `count` waits have begun (a test waits on it, not on the clock)."""
        while self.begun < count:
            await self._begins.wait()

    def wake(self, request_id: str) -> None:
        event = self._waiting.get(request_id)
        if event is not None:
            event.set()

    def drain(self) -> None:
        """Serve is stopping: every wait ends (its request cancelled) and none begins."""
        self.draining = True
        for event in self._waiting.values():
            event.set()

    async def wait(self, request_id: str, timeout: float) -> bool:
        """Until woken (True) or `timeout` passes (False); a drain wakes it too."""
        event = self._waiting[request_id] = trio.Event()
        self.begun += 1
        self._begins.set()
        self._begins = trio.Event()
        try:
            if self.draining:
                return True
            with trio.move_on_after(timeout):
                await event.wait()
                return True
            return False
        finally:
            del self._waiting[request_id]


def prompt_text(request: Approval) -> str:
    seconds = round(request.expires_at - request.created_at)
    wait = f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"
    return (
        f"Approval needed ({request.id}): {request.asker} wants to run\n\n"
        f"{request.command}\n\n"
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
    owners: frozenset[str],
    platforms: dict[str, PlatformConfig],
) -> Target | None:
    """Where the owner is asked (None: nowhere in a chat)."""
    origin = ctx.origin
    if origin is None or origin.platform == STREAMED:
        return None
    if ctx.caller.is_owner:
        return origin.target()
    marks = ",".join("?" * len(owners)) or "NULL"
    dm = conn.execute(
        f"SELECT chat_id, scope_id FROM sessions WHERE source = ? AND chat_type = 'dm'"
        f" AND user_id IN ({marks}) ORDER BY coalesce(last_activity_at, started_at) DESC"
        " LIMIT 1",
        (origin.platform, *owners),
    ).fetchone()
    if dm is not None:
        return Target(origin.platform, dm[0], None, dm[1])
    home = home_channels(conn, platforms).get(origin.platform)
    return home.target if home is not None else origin.target()


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

    async def ask(self, ctx: ToolContext, command: str, reason: str) -> Approval:
        origin = ctx.origin
        platform = origin.platform if origin is not None else ctx.caller.platform
        owners = await self.owners(platform)
        user_name = await self.db.read(_user_name, ctx.session_id, ctx.caller.user_id)
        new = NewApproval(
            ctx.session_id, self.redact(command), str(ctx.terminal.cwd), reason, platform,
            origin.chat_id if origin is not None else None, ctx.caller.user_id, user_name,
            self.owner, self.timeout, ctx.call_id,
        )  # fmt: skip
        if self.waits.draining:
            now = self.clock.now()
            opened = await self.db.write(open_approval, new, now)
            return await self.db.write(end_approval, opened.id, CANCELLED, SHUTTING_DOWN, now)

        def prompt(conn: apsw.Connection, request: Approval) -> None:
            target = prompt_target(conn, ctx, owners, self.platforms)
            if target is None:
                return
            chunks = chunks_for(prompt_text(request), target.platform)
            key = f"approval:{request.id}"
            enqueue(conn, target, chunks, "notice", key, request.created_at,
                    buttons=buttons(request.id))  # fmt: skip

        with trio.CancelScope(shield=True):  # a request opened is a request ended below
            request = await self.db.write(open_approval, new, self.clock.now(), prompt)
        if request.state != PENDING:
            return request  # "always" for this session: no prompt, no wait
        nudge(ctx.outbox)
        log.info("approval %s waits for an owner: %s", request.id, request.command)
        try:
            decided = await self.waits.wait(request.id, self.timeout)
        except BaseException:  # /stop, a newer message, the turn cut: never run it later
            with trio.CancelScope(shield=True):
                await self.db.write(end_approval, request.id, CANCELLED, STOPPED, self.clock.now())
            raise
        if decided and not self.waits.draining:
            return await self.db.read(get_approval, request.id)
        state, by = (CANCELLED, SHUTTING_DOWN) if decided else (EXPIRED, None)
        return await self.db.write(end_approval, request.id, state, by, self.clock.now())


def _user_name(conn: apsw.Connection, session_id: str, user_id: str) -> str | None:
    """The asker's name as their session knows it (their own session: its starter)."""
    found = conn.execute(
        "SELECT user_name FROM sessions WHERE id = ? AND user_id = ?", (session_id, user_id)
    ).fetchone()
    return found[0] if found is not None else None
