"""The schema of state.db: one baseline, then numbered steps appended after it.

`PRAGMA user_version` holds the schema version. Opening a file runs every step
above its version in one transaction: an empty file gets the baseline (step 1)
and each step after it.

Migrations are append-only. A step is never edited or removed once committed,
the baseline included (files made from it would no longer match it): a change
to the schema is a new step at the end of MIGRATIONS.

The baseline replaced fifteen steps from before any release. It marks the files
it makes (the `schema_baseline` row of `meta`); a file without the mark was made
by those steps (a development build's state.db) or by something other than
hermes, and is refused with SchemaUnknown, naming the file, rather than misread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import apsw

from hermes.state.errors import SchemaTooNew, SchemaUnknown

BASELINE_MARK = "schema_baseline"  # the meta row that says the baseline made this file

# -- the baseline, grouped by what it holds -------------------------------------------

FILE = f"""
-- Facts about the file itself.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('{BASELINE_MARK}', '1');
"""

SESSIONS = """
-- A conversation: where it comes from (source, chat, thread, user; session_key is the
-- router's key for it), its title, its life, and running totals.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL DEFAULT 'local',
    session_key TEXT,
    chat_id TEXT,
    chat_type TEXT,
    thread_id TEXT,
    user_id TEXT,
    user_name TEXT,
    scope_id TEXT,
    title TEXT,
    title_source TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL DEFAULT 0,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    tool_call_count INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    model TEXT,
    last_activity_at REAL
);
CREATE INDEX sessions_by_origin ON sessions(source, chat_id, thread_id, user_id);
CREATE INDEX sessions_by_key ON sessions(session_key);

-- Its transcript, in id order.
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL DEFAULT 0,
    token_count INTEGER,
    platform_message_id TEXT
);
CREATE INDEX messages_by_session ON messages(session_id, id);

-- What a long conversation's prompt stands on: the summary (or the note that turns
-- were dropped) of messages first..last of a session. The transcript keeps them all.
CREATE TABLE compactions (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    first_message_id INTEGER NOT NULL,
    last_message_id INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('summary', 'dropped')),
    summary TEXT NOT NULL,
    model TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX compactions_by_session ON compactions(session_id, id);
"""

SEARCH = """
-- Full-text index over message content (an external-content FTS5 table: it stores
-- no text of its own), kept in step with messages by these triggers.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages', content_rowid='id', tokenize='unicode61'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

CRON = """
-- Cron jobs. A fire claims a job by taking a lease (lease_owner, lease_expires_at) and
-- the next fencing token (fence only grows; running_fence is the running fire's), and
-- every terminal write is conditioned on that token. role is its maker's role
-- (owner or user): what its agent turns may do.
CREATE TABLE cron_jobs (
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
    running_fence INTEGER,
    role TEXT NOT NULL DEFAULT 'owner'
);
CREATE INDEX cron_jobs_due ON cron_jobs(state, next_run_at);

-- One row per fire, keyed by the job and the fence it ran under.
CREATE TABLE cron_runs (
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
);
CREATE INDEX cron_runs_by_job ON cron_runs(job_id, id);

-- A fire's record of each target of its brief: where it went, why (provenance),
-- whether it is mirrored, and the outbox rows that carry it (outbox_key).
CREATE TABLE cron_deliveries (
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
    updated_at REAL,
    outbox_key TEXT
);
CREATE INDEX cron_deliveries_open ON cron_deliveries(status);
"""

OUTBOX = """
-- Everything that leaves hermes, one row per chunk, written before its send starts.
-- plain: the platform rejected the chunk's formatting, so it goes as plain text.
-- mirror: what the row writes into sessions when it is sent (a brief's first row),
-- and mirror_outcome how that went.
CREATE TABLE outbox (
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
    message_id TEXT,
    plain INTEGER NOT NULL DEFAULT 0,
    mirror TEXT,
    mirror_outcome TEXT
);
CREATE INDEX outbox_by_chat ON outbox(platform, chat_id, id);
CREATE INDEX outbox_by_state ON outbox(state, id);
-- The unfinished rows by chat: what the outbox looks up on every send (sent rows,
-- kept for days, stay out of it).
CREATE INDEX outbox_open ON outbox(platform, chat_id, id)
    WHERE state IN ('pending', 'retry', 'sending');
"""

INBOUND = """
-- Every inbound event, recorded before its platform is told it arrived: keyed by
-- (platform, event id), so a duplicate starts nothing and a crash loses nothing.
-- session_hint: the session the local endpoint picked for the event.
CREATE TABLE inbound_journal (
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
    session_hint TEXT,
    PRIMARY KEY (platform, event_id)
);
CREATE INDEX inbound_by_state ON inbound_journal(state, received_at);
"""

PAIRING = """
-- DM pairing. Pending requests keep the code only as a hash.
CREATE TABLE pairing_requests (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT,
    code_hash TEXT NOT NULL,
    code_hint TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    chat_id TEXT,
    PRIMARY KEY (platform, user_id)
);
-- Users approved by pairing: the first approved of a platform is its owner; chat_id and
-- notified_at say where they are told they are in, and whether they were.
CREATE TABLE pairing_approved (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT,
    approved_at REAL NOT NULL,
    approved_by TEXT NOT NULL,
    owner INTEGER NOT NULL DEFAULT 0,
    chat_id TEXT,
    notified_at REAL,
    PRIMARY KEY (platform, user_id)
);
-- Failed approvals, for the lockout.
CREATE TABLE pairing_failures (platform TEXT NOT NULL, at REAL NOT NULL);
-- When each stranger was last sent a pairing code: one reply an hour, however often
-- they write, and a request dropped early (evicted, denied) does not buy another.
CREATE TABLE pairing_replies (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    replied_at REAL NOT NULL,
    PRIMARY KEY (platform, user_id)
);
"""

CHANNELS = """
-- Each platform's home channel (set by /sethome): where a cron brief to the bare
-- platform goes.
CREATE TABLE home_channels (
    platform TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    scope_id TEXT,
    set_by TEXT NOT NULL,
    set_at REAL NOT NULL
);
-- What an adapter keeps between restarts (Telegram's poll offset, migrated chats).
CREATE TABLE adapter_cursors (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL);
"""

BASELINE = (FILE, SESSIONS, SEARCH, CRON, OUTBOX, INBOUND, PAIRING, CHANNELS)


def _step_1_baseline(conn: apsw.Connection) -> None:
    """Everything, from an empty file."""
    for sql in BASELINE:
        conn.execute(sql)


# -- the steps after it ---------------------------------------------------------------


def _step_2_cron_zone(conn: apsw.Connection) -> None:
    """The IANA time zone a job's next_run_at was computed in: NULL for interval
    schedules and for rows written before this step."""
    conn.execute("ALTER TABLE cron_jobs ADD COLUMN zone TEXT")


def _step_3_undone(conn: apsw.Connection) -> None:
    """When /undo took a message out of the conversation the model sees (the transcript
    keeps it): NULL for every message it did not."""
    conn.execute("ALTER TABLE messages ADD COLUMN undone_at REAL")


def _step_4_approvals(conn: apsw.Connection) -> None:
    """Approval requests: a guarded command waiting for an owner's yes, and what became
    of it (`always`: the owner approved that exact command in that directory for the rest
    of the session; `matches` is their hash, the command as run, before redaction;
    `asked_in`: the chat its prompt went to). An outbox row may carry buttons (JSON:
    [[label, command], ...]) on its platform."""
    conn.execute(
        """
        CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            call_id TEXT,
            command TEXT NOT NULL,
            cwd TEXT NOT NULL,
            matches TEXT NOT NULL,
            reason TEXT NOT NULL,
            platform TEXT NOT NULL,
            chat_id TEXT,
            user_id TEXT NOT NULL,
            user_name TEXT,
            owner TEXT NOT NULL,
            asked_in TEXT,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN
                ('pending', 'approved', 'denied', 'expired', 'cancelled')),
            always INTEGER NOT NULL DEFAULT 0,
            decided_by TEXT,
            decided_at REAL
        )"""
    )
    conn.execute("CREATE INDEX approvals_pending ON approvals (state) WHERE state = 'pending'")
    conn.execute("CREATE INDEX approvals_session ON approvals (session_id, matches)")
    conn.execute("ALTER TABLE outbox ADD COLUMN buttons TEXT")


def _step_5_live_outbox(conn: apsw.Connection) -> None:
    """A message edited as a turn goes (its streamed answer, its tool lines): its row is
    `live` while its text may still change, and keeps what the platform shows now
    (`shown`); a row sent whose text differs from it is pending again, as an edit."""
    conn.execute("ALTER TABLE outbox ADD COLUMN live INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE outbox ADD COLUMN shown TEXT")


def _step_6_event_title(conn: apsw.Connection) -> None:
    """An event may carry its conversation's title (an email's subject), which names the
    session it starts: the journal keeps it with the rest of the event."""
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN title TEXT")


def _step_7_outbox_file(conn: apsw.Connection) -> None:
    """A row may send a file (send_file, a voice reply): `file` holds it as JSON (hermes's
    copy under HERMES_HOME/outgoing, its name, type, size), the text its caption."""
    conn.execute("ALTER TABLE outbox ADD COLUMN file TEXT")


def _step_8_untrusted(conn: apsw.Connection) -> None:
    """Where a message's text came from, when it was not from an owner's hands
    (`untrusted`: why, such as "web_fetch" or "a message from a user"; NULL: trusted), so a
    later turn knows its context holds it; a compaction's summary written from such text
    carries the mark on. A user's message carries its files as JSON (`attachments`), not
    as lines of its text."""
    conn.execute("ALTER TABLE messages ADD COLUMN untrusted TEXT")
    conn.execute("ALTER TABLE messages ADD COLUMN attachments TEXT")
    conn.execute("ALTER TABLE compactions ADD COLUMN untrusted TEXT")


def _step_9_job_skills(conn: apsw.Connection) -> None:
    """The skills a cron job's fires load into their prompt: names separated by spaces
    (a skill's name holds none); NULL: none."""
    conn.execute("ALTER TABLE cron_jobs ADD COLUMN skills TEXT")


def _step_10_conversation_flow(conn: apsw.Connection) -> None:
    """How people write (issue 48): whether an event replies to the bot's own message
    (a group's `reply` activation); the event whose turn answers it, where that is
    another's (`answered_by`: a burst's last part; `steered`: it joined that turn while
    it ran), so a restart resumes them as the one turn they were; a session's own busy
    mode (`/busy`); one person's accounts on several platforms (`identities`), the
    one-time codes that link them, and a chat attached to a session of another chat
    (`/continue`)."""
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN replied INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN answered_by TEXT")
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN steered INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE sessions ADD COLUMN busy TEXT")
    conn.execute(
        "CREATE TABLE identities (platform TEXT NOT NULL, user_id TEXT NOT NULL,"
        " person TEXT NOT NULL, linked_at REAL NOT NULL, PRIMARY KEY (platform, user_id))"
    )
    conn.execute("CREATE INDEX identities_by_person ON identities(person)")
    conn.execute(
        "CREATE TABLE link_codes (code TEXT PRIMARY KEY, platform TEXT NOT NULL,"
        " user_id TEXT NOT NULL, role TEXT NOT NULL, created_at REAL NOT NULL,"
        " expires_at REAL NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE attached_sessions (session_key TEXT PRIMARY KEY,"
        " session_id TEXT NOT NULL, attached_at REAL NOT NULL)"
    )


def _step_11_todo(conn: apsw.Connection) -> None:
    """A session's todo list (the todo tool's), as JSON: [{"text", "status"}]; NULL: none."""
    conn.execute("ALTER TABLE sessions ADD COLUMN todo TEXT")


def _step_12_questions(conn: apsw.Connection) -> None:
    """Questions a turn asks its user (the clarify tool), as rows: a turn waits on one
    as on an approval, and a restart expires what was left pending."""
    conn.execute(
        "CREATE TABLE questions (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,"
        " platform TEXT NOT NULL, user_id TEXT NOT NULL, question TEXT NOT NULL,"
        " choices TEXT NOT NULL, owner TEXT NOT NULL, state TEXT NOT NULL,"
        " answer TEXT, answered_by TEXT, created_at REAL NOT NULL, expires_at REAL NOT NULL,"
        " ended_at REAL)"
    )
    conn.execute("CREATE INDEX questions_by_state ON questions(state)")


def _step_13_answer_to(conn: apsw.Connection) -> None:
    """Where an event's answer goes when not to its own chat (an inbound webhook's route
    names a chat, a home channel, or nowhere): the journal keeps it with the event, so a
    turn resumed after a restart answers where the delivery said."""
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN answer_to TEXT")


def _step_14_ending(conn: apsw.Connection) -> None:
    """How an event answered within its request ended (the API's: its final step's kind
    and text), so the same request sent again after a restart gets that answer, an
    error as an error."""
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN ended TEXT")
    conn.execute("ALTER TABLE inbound_journal ADD COLUMN answer TEXT")


# Step N brings a file from version N-1 to version N. Append only: never edit a step.
MIGRATIONS: list[Callable[[apsw.Connection], None]] = [
    _step_1_baseline,
    _step_2_cron_zone,
    _step_3_undone,
    _step_4_approvals,
    _step_5_live_outbox,
    _step_6_event_title,
    _step_7_outbox_file,
    _step_8_untrusted,
    _step_9_job_skills,
    _step_10_conversation_flow,
    _step_11_todo,
    _step_12_questions,
    _step_13_answer_to,
    _step_14_ending,
]
SCHEMA_VERSION = len(MIGRATIONS)


@contextlib.contextmanager
def immediate(conn: apsw.Connection) -> Iterator[None]:
    """A write transaction that takes the write lock up front.

    A deferred BEGIN that reads and then writes fails at once with "database is
    locked" when another process committed in between; BEGIN IMMEDIATE waits in
    the busy handler instead.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def schema_version(conn: apsw.Connection) -> int:
    return conn.execute("PRAGMA user_version").get


def known_version(conn: apsw.Connection) -> int:
    """The file's schema version, once it is one this hermes can migrate (0: empty).

    SchemaUnknown for a file the baseline did not make (the steps from before it, or
    not hermes at all); SchemaTooNew for one from a newer hermes. Reads only.
    """
    version = schema_version(conn)
    if version == 0:
        if conn.execute("SELECT count(*) FROM sqlite_master").get:
            raise SchemaUnknown(conn.filename, "it has tables but no schema version")
        return 0
    if not _made_by_baseline(conn):
        raise SchemaUnknown(
            conn.filename,
            f"schema version {version} is from before the schema baseline (a development build)",
        )
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(conn.filename, version, SCHEMA_VERSION)
    return version


def _made_by_baseline(conn: apsw.Connection) -> bool:
    has_meta = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).get
    return bool(has_meta) and bool(
        conn.execute("SELECT count(*) FROM meta WHERE key = ?", (BASELINE_MARK,)).get
    )


def migrate(conn: apsw.Connection, target: int = SCHEMA_VERSION) -> list[int]:
    """Run the steps from the file's version up to `target` in one transaction.

    Returns the steps that ran. Call inside no other transaction.
    """
    with immediate(conn):
        ran = list(range(known_version(conn) + 1, target + 1))
        for number in ran:
            MIGRATIONS[number - 1](conn)
        if ran:
            conn.execute(f"PRAGMA user_version = {target}")
    return ran
