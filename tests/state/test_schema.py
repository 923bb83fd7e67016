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


def test_step_14_labels_keys_and_gives_chat_made_jobs_their_makers_role(tmp_path):
    conn = apsw.Connection(str(tmp_path / "x.db"))
    schema.migrate(conn, target=13)
    sessions = [  # id, key as before, chat type, chat, thread, user
        ("dm", "agent:main:tg:dm:42", "dm", "42", None, "42"),
        ("topic", "agent:main:tg:group:-100:7", "group", "-100", "7", "9"),
        ("member", "agent:main:tg:group:-100:7", "group", "-100", None, "7"),
        ("both", "agent:main:tg:group:-100:7:9", "group", "-100", "7", "9"),
        ("odd", "agent:main:tg:group:elsewhere", "group", "-100", None, "7"),
    ]
    for sid, key, kind, chat, thread, user in sessions:
        conn.execute(
            "INSERT INTO sessions (id, source, session_key, chat_type, chat_id, thread_id,"
            " user_id, started_at) VALUES (?, 'tg', ?, ?, ?, ?, ?, 1)",
            (sid, key, kind, chat, thread, user),
        )
    origin = '{{"platform": "{}", "chat_id": "c", "user_id": "{}"}}'
    made_by = {"cli": None, "local": origin.format("local", ""), "boss": origin.format("tg", "1"),
               "guest": origin.format("tg", "2")}  # fmt: skip
    for job, made in made_by.items():
        conn.execute(
            "INSERT INTO cron_jobs (id, name, schedule, schedule_display, origin, created_at)"
            " VALUES (?, ?, 'every:3600', 'every 1h', ?, 1)",
            (job, job, made),
        )
    conn.execute(
        "INSERT INTO pairing_approved (platform, user_id, approved_at, approved_by, owner)"
        " VALUES ('tg', '1', 1, 'cli', 1)"
    )
    assert schema.migrate(conn) == list(range(14, schema.SCHEMA_VERSION + 1))
    keys = dict(conn.execute("SELECT id, session_key FROM sessions"))
    assert keys == {
        "dm": "agent:main:tg:dm:42",
        "topic": "agent:main:tg:group:-100:thread:7",
        "member": "agent:main:tg:group:-100:user:7",  # no longer the topic's session
        "both": "agent:main:tg:group:-100:thread:7:user:9",
        "odd": "agent:main:tg:group:elsewhere",  # does not line up: left as it was
    }
    roles = dict(conn.execute("SELECT id, role FROM cron_jobs"))
    assert roles == {"cli": "owner", "local": "owner", "boss": "owner", "guest": "user"}
