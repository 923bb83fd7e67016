"""The outbox: what waits to leave and what died; send a row again, drop it, purge; queue
a message of the operator's (`outbox.send`: `hermes setup`'s greeting to the owner).

A queued or retried row is pending again in state.db and the live outbox is told at
once, so it goes out now, not at the next look.
"""

from __future__ import annotations

import secrets

import attrs

from hermes.actors.errors import Invalid, NotFound
from hermes.adapters.contract import Target
from hermes.config import not_blank
from hermes.delivery.outbox_store import (
    DEAD,
    UNKNOWN,
    OutboxRow,
    enqueue,
    listing,
    purge_dead,
    retry_row,
)
from hermes.delivery.split import chunks_for
from hermes.operations.context import NoArgs, Operation, Ops, count

MAX_ROWS = 1000
TEXT_SHOWN = 300  # of a row's text; the row itself keeps all of it
MAX_SEND = 4000  # characters of an operator's message (a notice, not a document)


@attrs.frozen
class ListArgs:
    dead: bool = False  # only dead and unknown rows
    limit: int = attrs.field(default=MAX_ROWS, validator=count(1, MAX_ROWS))


@attrs.frozen
class RowArgs:
    id: int


@attrs.frozen
class RowView:
    id: int
    to: str
    kind: str
    state: str
    attempts: int
    created_at: float
    not_before: float | None
    error: str | None
    text: str


@attrs.frozen
class SendArgs:
    """A notice to one chat of a configured platform (`thread`, `scope`: as the chat's
    inbound events carry them)."""

    platform: str = attrs.field(validator=not_blank)
    chat: str = attrs.field(validator=not_blank)
    text: str = attrs.field(validator=not_blank)
    thread: str | None = None
    scope: str | None = None


@attrs.frozen
class Queued:
    key: str  # the message's key: hermes.delivery.outbox_store.message_state tells its fate
    rows: list[int]


@attrs.frozen
class RowState:
    id: int
    state: str


@attrs.frozen
class Purged:
    rows: int


def _view(row: OutboxRow) -> RowView:
    text = row.text if len(row.text) <= TEXT_SHOWN else row.text[: TEXT_SHOWN - 3] + "..."
    return RowView(
        row.id,
        str(row.target),
        row.kind,
        row.state,
        row.attempts,
        row.created_at,
        row.not_before,
        row.last_error,
        text,
    )


async def list_outbox(ops: Ops, args: ListArgs) -> list[RowView]:
    return [_view(r) for r in await ops.db.read(listing, args.dead, args.limit)]


async def retry_outbox(ops: Ops, args: RowArgs) -> RowState:
    if not await ops.db.write(retry_row, args.id, ops.clock.now()):
        raise NotFound(f"no dead or unknown outbox row {args.id}")
    await ops.live.outbox_changed()
    return RowState(args.id, "pending")


def _drop(conn, row_id: int) -> bool:
    conn.execute("DELETE FROM outbox WHERE id = ? AND state IN (?, ?)", (row_id, DEAD, UNKNOWN))
    return conn.changes() == 1


async def drop_outbox(ops: Ops, args: RowArgs) -> RowState:
    """Forget a dead or unknown row: the operator decided it is not to be sent."""
    if not await ops.db.write(_drop, args.id):
        raise NotFound(f"no dead or unknown outbox row {args.id}")
    return RowState(args.id, "dropped")


async def purge_outbox(ops: Ops, args: NoArgs) -> Purged:
    return Purged(await ops.db.write(purge_dead))


async def send_outbox(ops: Ops, args: SendArgs) -> Queued:
    """Queue a notice through the outbox, as every message leaves (paced, retried, dead
    letters); the live outbox is told at once."""
    if args.platform not in ops.config.enabled_platforms():
        raise Invalid(f"no enabled platform {args.platform!r} in config.yaml")
    if len(args.text) > MAX_SEND:
        raise Invalid(f"text: at most {MAX_SEND} characters, got {len(args.text)}")
    target = Target(args.platform, args.chat, args.thread, args.scope)
    key = f"operator:{secrets.token_hex(8)}"
    chunks = chunks_for(args.text, args.platform)
    rows = await ops.db.write(enqueue, target, chunks, "notice", key, ops.clock.now())
    await ops.live.outbox_changed()
    return Queued(key, rows)


OPERATIONS = (
    Operation("outbox.list", ListArgs, list[RowView], list_outbox),
    Operation("outbox.retry", RowArgs, RowState, retry_outbox, changes=True),
    Operation("outbox.drop", RowArgs, RowState, drop_outbox, changes=True),
    Operation("outbox.purge", NoArgs, Purged, purge_outbox, changes=True),
    Operation("outbox.send", SendArgs, Queued, send_outbox, changes=True),
)
