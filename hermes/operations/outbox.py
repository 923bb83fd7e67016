"""The outbox: what waits to leave and what died; send a row again, drop it, purge.

A retried row is pending again in state.db and the live outbox is told at
once, so it goes out now, not at the next look.
"""

from __future__ import annotations

import attrs

from hermes.actors.errors import NotFound
from hermes.delivery.outbox_store import DEAD, UNKNOWN, OutboxRow, listing, purge_dead, retry_row
from hermes.operations.context import NoArgs, Operation, Ops, count

MAX_ROWS = 1000
TEXT_SHOWN = 300  # of a row's text; the row itself keeps all of it


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


OPERATIONS = (
    Operation("outbox.list", ListArgs, list[RowView], list_outbox),
    Operation("outbox.retry", RowArgs, RowState, retry_outbox, changes=True),
    Operation("outbox.drop", RowArgs, RowState, drop_outbox, changes=True),
    Operation("outbox.purge", NoArgs, Purged, purge_outbox, changes=True),
)
