"""What an adapter keeps in state.db between its incarnations and hermes's restarts:
a poll offset, a migrated chat's new id. Small named values, one row each."""

from __future__ import annotations

from pathlib import Path

import apsw

from hermes.actors.clock import Clock
from hermes.state.db import UsesDb
from hermes.state.registry import Registry


def _get(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM adapter_cursors WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def put_cursor(
    conn: apsw.Connection, key: str, value: str, now: float, rising: bool = False
) -> None:
    """Keep `value` under `key`; `rising`: only if it is a larger number than the kept."""
    only = " WHERE CAST(excluded.value AS REAL) > CAST(value AS REAL)" if rising else ""
    conn.execute(
        "INSERT INTO adapter_cursors (key, value, updated_at) VALUES (?,?,?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at" + only,
        (key, value, now),
    )


def _put_many(conn: apsw.Connection, values: dict[str, str], now: float) -> None:
    for key, value in values.items():
        put_cursor(conn, key, value, now)


def _prefixed(conn: apsw.Connection, prefix: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT key, value FROM adapter_cursors WHERE key > ? AND key < ?",
        (prefix, prefix + "\U0010ffff"),
    )
    return {key[len(prefix) :]: value for key, value in rows}


def _forget(conn: apsw.Connection, prefix: str, before: float) -> int:
    conn.execute(
        "DELETE FROM adapter_cursors WHERE key > ? AND key < ? AND updated_at < ?",
        (prefix, prefix + "\U0010ffff", before),
    )
    return conn.changes()


class Cursors(UsesDb):
    """Held open by an adapter (`async with`, on its exit stack)."""

    def __init__(self, registry: Registry, state_db: Path, clock: Clock) -> None:
        super().__init__(registry, state_db)
        self.clock = clock

    async def get(self, key: str) -> str | None:
        return await self.db.read(_get, key)

    async def put(self, key: str, value: str) -> None:
        await self.db.write(put_cursor, key, value, self.clock.now())

    async def put_many(self, values: dict[str, str]) -> None:
        """Several values in one commit: all of them kept, or none."""
        await self.db.write(_put_many, values, self.clock.now())

    async def prefixed(self, prefix: str) -> dict[str, str]:
        """Every value whose key starts with `prefix`, by the rest of its key."""
        return await self.db.read(_prefixed, prefix)

    async def forget(self, prefix: str, before: float) -> int:
        """Forget every value whose key starts with `prefix` and that was last kept before
        `before` (wall-clock seconds): what an adapter keeps per conversation, past
        retention. How many went."""
        return await self.db.write(_forget, prefix, before)
