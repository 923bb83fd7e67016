"""Migrations: numbered steps from an older file, and additive column reconciliation."""

from __future__ import annotations

import apsw

from hermes.state import schema
from hermes.state.db import Db
from hermes.state.messages import NewMessage, append_message
from hermes.state.search import search_messages
from hermes.state.sessions import NewSession, get_session
from tests.state.helpers import count


def test_fresh_file_gets_the_current_version(tmp_path):
    conn = apsw.Connection(str(tmp_path / "x.db"))
    assert schema.migrate(conn) == list(range(1, schema.SCHEMA_VERSION + 1))
    assert schema.schema_version(conn) == schema.SCHEMA_VERSION
    assert schema.migrate(conn) == []  # idempotent


async def test_older_schema_is_migrated_on_open(registry, db_path):
    # A file as version 1 left it: no full-text index yet, messages already there.
    conn = apsw.Connection(str(db_path))
    assert schema.migrate(conn, target=1) == [1]
    conn.execute("INSERT INTO sessions (id, source, started_at) VALUES ('old', 'local', 1)")
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp)"
        " VALUES ('old', 'user', 'remember the blue umbrella', 1)"
    )
    conn.close()

    async with Db(registry, db_path) as gen:
        assert count(db_path, "PRAGMA user_version") == schema.SCHEMA_VERSION
        hits = await gen.read(search_messages, "umbrella")  # backfilled by the migration
        assert [h.session_id for h in hits] == ["old"]
        await gen.write(append_message, NewMessage("old", "user", "and the red umbrella"))
        assert len(await gen.read(search_messages, "umbrella")) == 2  # kept in step by triggers


def set_scope(conn, session_id, scope_id):
    conn.execute("UPDATE sessions SET scope_id = ? WHERE id = ?", (scope_id, session_id))


async def test_missing_columns_are_added(registry, db_path):
    # An older build's sessions table without scope_id, title_source or model.
    conn = apsw.Connection(str(db_path))
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL)"
    )
    conn.execute("INSERT INTO sessions VALUES ('kept', 'local', 5)")
    conn.close()
    async with Db(registry, db_path) as gen:
        row = await gen.read(get_session, "kept")
        assert (row.id, row.scope_id, row.message_count, row.model) == ("kept", None, 0, None)
        await gen.write(set_scope, "kept", "T1")
        assert (await gen.read(get_session, "kept")).scope_id == "T1"
    assert NewSession("x").source == "local"
