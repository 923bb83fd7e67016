"""The fifteen schema steps from before the baseline, frozen as test data.

They are the reference test_schema_baseline compares the baseline against: run
from an empty file, they made the schema the baseline (version 1) now creates in
one step. Copied unchanged from hermes/state/schema.py as it was before the
squash; not product code, never imported by hermes.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

# Columns each table must have, with the definition used to add a missing one.
SESSION_COLUMNS: dict[str, str] = {
    "id": "TEXT PRIMARY KEY",
    "source": "TEXT NOT NULL DEFAULT 'local'",
    "session_key": "TEXT",
    "chat_id": "TEXT",
    "chat_type": "TEXT",
    "thread_id": "TEXT",
    "user_id": "TEXT",
    "user_name": "TEXT",
    "scope_id": "TEXT",
    "title": "TEXT",
    "title_source": "TEXT",
    "parent_session_id": "TEXT",
    "started_at": "REAL NOT NULL DEFAULT 0",
    "ended_at": "REAL",
    "end_reason": "TEXT",
    "message_count": "INTEGER NOT NULL DEFAULT 0",
    "tool_call_count": "INTEGER NOT NULL DEFAULT 0",
    "input_tokens": "INTEGER NOT NULL DEFAULT 0",
    "output_tokens": "INTEGER NOT NULL DEFAULT 0",
    "model": "TEXT",
    "last_activity_at": "REAL",
}

MESSAGE_COLUMNS: dict[str, str] = {
    "id": "INTEGER PRIMARY KEY",
    "session_id": "TEXT NOT NULL REFERENCES sessions(id)",
    "role": "TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool'))",
    "content": "TEXT",
    "tool_calls": "TEXT",
    "tool_call_id": "TEXT",
    "tool_name": "TEXT",
    "timestamp": "REAL NOT NULL DEFAULT 0",
    "token_count": "INTEGER",
    "platform_message_id": "TEXT",
}

TABLE_COLUMNS = {"sessions": SESSION_COLUMNS, "messages": MESSAGE_COLUMNS}


def _table(name: str, columns: dict[str, str]) -> str:
    body = ",\n    ".join(f"{col} {decl}" for col, decl in columns.items())
    return f"CREATE TABLE IF NOT EXISTS {name} (\n    {body}\n)"


def _step_1_base(conn: apsw.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(_table("sessions", SESSION_COLUMNS))
    conn.execute(_table("messages", MESSAGE_COLUMNS))
    conn.execute("CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, id)")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS sessions_by_origin"
        " ON sessions(source, chat_id, thread_id, user_id)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS sessions_by_key ON sessions(session_key)")


def _step_2_fts(conn: apsw.Connection) -> None:
    """Full-text index over message content, kept in step by triggers, backfilled."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5("
        "content, content='messages', content_rowid='id', tokenize='unicode61')"
    )
    conn.execute(
        """
        CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END;
        """
    )
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")


def _step_3_cron(conn: apsw.Connection) -> None:
    """Cron jobs and their run history, so a claim, a run record and a job's next
    run commit together. `fence` only grows: each claim takes the next value."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS cron_jobs (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            prompt TEXT,
            script TEXT,
            no_agent INTEGER NOT NULL DEFAULT 0,
            schedule TEXT NOT NULL,
            schedule_display TEXT NOT NULL,
            repeat_times INTEGER,
            repeat_completed INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT 'scheduled',
            deliver TEXT NOT NULL DEFAULT 'local',
            origin TEXT,
            attach_to_session INTEGER,
            catch_up INTEGER,
            workdir TEXT,
            model TEXT,
            provider TEXT,
            created_at REAL NOT NULL,
            next_run_at REAL,
            last_run_at REAL,
            last_status TEXT,
            last_error TEXT,
            last_delivery_error TEXT,
            failure_streak INTEGER NOT NULL DEFAULT 0,
            retired_reason TEXT,
            lease_owner TEXT,
            lease_expires_at REAL,
            fence INTEGER NOT NULL DEFAULT 0,
            running_fence INTEGER
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS cron_jobs_due ON cron_jobs(state, next_run_at)")
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS cron_runs (
            id INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL,
            fence INTEGER,
            owner TEXT NOT NULL,
            due_at REAL,
            started_at REAL NOT NULL,
            finished_at REAL,
            status TEXT NOT NULL,
            output_path TEXT,
            error TEXT,
            delivery_error TEXT,
            run_context TEXT,
            UNIQUE (job_id, fence)
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS cron_runs_by_job ON cron_runs(job_id, id)")


def _step_4_outbox(conn: apsw.Connection) -> None:
    """Cron deliveries, written before a send starts: after a restart, ones that never
    started are sent, ones that started but were not confirmed are marked unknown."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS cron_deliveries (
            id INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL,
            fence INTEGER NOT NULL,
            platform TEXT NOT NULL,
            chat_id TEXT,
            thread_id TEXT,
            provenance TEXT NOT NULL,
            mirror INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            text TEXT NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS cron_deliveries_open ON cron_deliveries(status)")


def _step_5_compactions(conn: apsw.Connection) -> None:
    """What a long conversation's prompt stands on: the summary (or the note that turns
    were dropped) of messages first..last of a session. The transcript keeps them all."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS compactions (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            first_message_id INTEGER NOT NULL,
            last_message_id INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('summary', 'dropped')),
            summary TEXT NOT NULL,
            model TEXT,
            created_at REAL NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS compactions_by_session ON compactions(session_id, id)")


def _step_6_pairing(conn: apsw.Connection) -> None:
    """DM pairing: pending requests (the code only as a hash), users approved by pairing
    (the first approved of a platform is its owner), failed approvals for the lockout."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS pairing_requests (
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            user_name TEXT,
            code_hash TEXT NOT NULL,
            code_hint TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (platform, user_id)
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS pairing_approved (
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            user_name TEXT,
            approved_at REAL NOT NULL,
            approved_by TEXT NOT NULL,
            owner INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (platform, user_id)
        )
        """
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS pairing_failures (platform TEXT NOT NULL, at REAL NOT NULL)"
    )


def _step_7_inbound_journal(conn: apsw.Connection) -> None:
    """Every inbound event, recorded before its platform is told it arrived: keyed by
    (platform, event id), so a duplicate starts nothing and a crash loses nothing."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS inbound_journal (
            platform TEXT NOT NULL,
            event_id TEXT NOT NULL,
            chat_type TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            text TEXT NOT NULL,
            scope_id TEXT,
            thread_id TEXT,
            user_name TEXT,
            is_bot INTEGER NOT NULL DEFAULT 0,
            message_id TEXT,
            reply_to TEXT,
            mentioned INTEGER NOT NULL DEFAULT 0,
            attachments TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL,
            owner TEXT,
            session_id TEXT,
            received_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            PRIMARY KEY (platform, event_id)
        )
        """
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS inbound_by_state ON inbound_journal(state, received_at)"
    )


def _step_8_gateway(conn: apsw.Connection) -> None:
    """What the router needs: the session an edge picked for an event, where an approved
    user is told they are in (and whether they were), and each platform's home channel."""
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN session_hint TEXT")
    conn.execute("ALTER TABLE pairing_requests ADD COLUMN chat_id TEXT")
    conn.execute("ALTER TABLE pairing_approved ADD COLUMN chat_id TEXT")
    conn.execute("ALTER TABLE pairing_approved ADD COLUMN notified_at REAL")
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS home_channels (
            platform TEXT PRIMARY KEY,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            scope_id TEXT,
            set_by TEXT NOT NULL,
            set_at REAL NOT NULL
        )
        """
    )


def _step_9_outbox(conn: apsw.Connection) -> None:
    """Everything that leaves hermes, one row per chunk, written before its send starts."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS outbox (
            id INTEGER PRIMARY KEY,
            platform TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            scope_id TEXT,
            text TEXT NOT NULL,
            reply_to TEXT,
            kind TEXT NOT NULL CHECK (kind IN ('reply', 'cron', 'send', 'notice')),
            origin TEXT,
            idempotency_key TEXT NOT NULL UNIQUE,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN
                ('pending', 'sending', 'sent', 'retry', 'dead', 'unknown')),
            attempts INTEGER NOT NULL DEFAULT 0,
            not_before REAL,
            created_at REAL NOT NULL,
            updated_at REAL,
            last_error TEXT,
            message_id TEXT
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS outbox_by_chat ON outbox(platform, chat_id, id)")
    conn.execute("CREATE INDEX IF NOT EXISTS outbox_by_state ON outbox(state, id)")


def _step_10_outbox_plain(conn: apsw.Connection) -> None:
    """A chunk whose formatting the platform rejected goes once more as plain text."""
    conn.execute("ALTER TABLE outbox ADD COLUMN plain INTEGER NOT NULL DEFAULT 0")


def _step_11_outbox_open_index(conn: apsw.Connection) -> None:
    """The unfinished rows by chat: what the outbox looks up on every send (sent rows,
    kept for days, stay out of it)."""
    conn.execute(
        "CREATE INDEX IF NOT EXISTS outbox_open ON outbox(platform, chat_id, id)"
        " WHERE state IN ('pending', 'retry', 'sending')"
    )


def _step_12_cron_briefs_in_the_outbox(conn: apsw.Connection) -> None:
    """Cron briefs leave through the outbox: a brief's first row carries its mirror
    (written when that row is sent), and the run's record of each target
    (cron_deliveries) names the outbox rows that carry it. Briefs the old cron outbox
    had not started move into the outbox; ones it had started become unknown."""
    conn.execute("ALTER TABLE outbox ADD COLUMN mirror TEXT")
    conn.execute("ALTER TABLE outbox ADD COLUMN mirror_outcome TEXT")
    conn.execute("ALTER TABLE cron_deliveries ADD COLUMN outbox_key TEXT")
    conn.execute(
        "UPDATE cron_deliveries SET outbox_key = 'cron:' || job_id || ':' || fence || ':' || id"
        " WHERE status = 'pending' AND chat_id IS NOT NULL"
    )
    conn.execute(
        "INSERT OR IGNORE INTO outbox (platform, chat_id, thread_id, text, kind, origin,"
        " idempotency_key, created_at) SELECT platform, chat_id, thread_id, text, 'cron',"
        " 'cron:' || job_id || ':' || fence, outbox_key || ':0', created_at FROM cron_deliveries"
        " WHERE outbox_key IS NOT NULL"
    )
    conn.execute(
        "UPDATE cron_deliveries SET status = 'queued', text = '' WHERE outbox_key IS NOT NULL"
    )
    conn.execute(
        "UPDATE cron_deliveries SET status = 'unknown',"
        " error = 'the gateway stopped during the send; not sent again'"
        " WHERE status = 'attempted'"
    )


def _step_13_adapter_cursors(conn: apsw.Connection) -> None:
    """What an adapter keeps between restarts (Telegram's poll offset, migrated chats)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS adapter_cursors"
        " (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL)"
    )


def _step_14_roles_and_labelled_keys(conn: apsw.Connection) -> None:
    """A job runs with its maker's role: jobs made from the CLI or the local endpoint, or
    by a platform's pairing owner, are an owner's; other chat-made ones a user's.
    Session keys label their thread and user parts (`thread:<id>`, `user:<id>`), so a
    topic whose id equals a user's id no longer shares that user's session."""
    conn.execute("ALTER TABLE cron_jobs ADD COLUMN role TEXT NOT NULL DEFAULT 'owner'")
    conn.execute(
        "UPDATE cron_jobs SET role = 'user' WHERE origin IS NOT NULL"
        " AND json_extract(origin, '$.platform') != 'local' AND NOT EXISTS ("
        " SELECT 1 FROM pairing_approved p WHERE p.owner = 1"
        " AND p.platform = json_extract(origin, '$.platform')"
        " AND p.user_id = json_extract(origin, '$.user_id'))"
    )
    rows = conn.execute(
        "SELECT id, session_key, chat_type, scope_id, chat_id, thread_id, user_id FROM sessions"
        " WHERE session_key LIKE 'agent:%'"
    ).fetchall()
    for session_id, key, chat_type, scope_id, chat_id, thread_id, user_id in rows:
        labelled = _labelled_key(key, chat_type, scope_id, chat_id, thread_id, user_id)
        if labelled is not None:
            conn.execute("UPDATE sessions SET session_key = ? WHERE id = ?", (labelled, session_id))


def _labelled_key(key, chat_type, scope_id, chat_id, thread_id, user_id) -> str | None:
    """An unlabelled key in the labelled form; None where its parts do not line up with
    the session's columns (left as it was)."""
    parts = key.split(":")
    head = 4 + (1 if scope_id else 0)
    if len(parts) < head + 1 or parts[3] != chat_type:
        return None
    out, rest = parts[:head], parts[head:]
    if chat_id and rest[0] == chat_id:
        out.append(rest.pop(0))
    elif chat_type == "dm" and user_id and rest[0] == user_id:
        out += ["user", rest.pop(0)]
    else:
        return None
    if thread_id and rest[:1] == [thread_id]:
        out += ["thread", rest.pop(0)]
    if user_id and rest == [user_id]:
        out += ["user", rest.pop(0)]
    return ":".join(out) if not rest else None


def _step_15_pairing_replies(conn: apsw.Connection) -> None:
    """When each stranger was last sent a pairing code: one reply an hour, however often
    they write, and a request dropped early (evicted, denied) does not buy another."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS pairing_replies (
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            replied_at REAL NOT NULL,
            PRIMARY KEY (platform, user_id)
        )
        """
    )


# Step N brings a file from version N-1 to version N. Append; never edit a shipped step.
MIGRATIONS: list[Callable[[apsw.Connection], None]] = [
    _step_1_base,
    _step_2_fts,
    _step_3_cron,
    _step_4_outbox,
    _step_5_compactions,
    _step_6_pairing,
    _step_7_inbound_journal,
    _step_8_gateway,
    _step_9_outbox,
    _step_10_outbox_plain,
    _step_11_outbox_open_index,
    _step_12_cron_briefs_in_the_outbox,
    _step_13_adapter_cursors,
    _step_14_roles_and_labelled_keys,
    _step_15_pairing_replies,
]
SCHEMA_VERSION = len(MIGRATIONS)


def build(conn: apsw.Connection, target: int = SCHEMA_VERSION) -> None:
    """Run the steps up to `target` on an empty file in one transaction, as migrate() did
    (without its column reconciliation, which added nothing to a file the steps made)."""
    conn.execute("BEGIN IMMEDIATE")
    for step in MIGRATIONS[:target]:
        step(conn)
    conn.execute(f"PRAGMA user_version = {target}")
    conn.execute("COMMIT")
