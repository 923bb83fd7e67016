"""The baseline (schema version 1) builds exactly what the fifteen old steps built from an
empty file (tests/state/old_steps.py, frozen), and step 2 only adds cron_jobs.zone."""

from __future__ import annotations

import re

import apsw
import pytest

from hermes.state import schema
from tests.state import old_steps

FTS_SHADOWS = (
    "messages_fts_data",
    "messages_fts_idx",
    "messages_fts_docsize",
    "messages_fts_config",
)


def normalized(sql: str | None) -> str | None:
    """The statement with comments dropped and whitespace collapsed (none around
    punctuation): how it is laid out in the source does not count, every word does."""
    if sql is None:
        return None
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"\s+", " ", sql).strip()
    return re.sub(r"\s*([(),;])\s*", r"\1", sql)


def shape(conn: apsw.Connection) -> dict:
    """What the schema is: every object in sqlite_master, and per table its columns
    (type, NOT NULL, default, key), indexes (with their columns) and foreign keys."""
    master = sorted(
        (kind, name, table, normalized(sql))
        for kind, name, table, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master"
        )
    )
    tables = [name for kind, name, _, _ in master if kind == "table"]
    per_table = {}
    for table in tables:
        indexes = list(conn.execute(f"PRAGMA index_list('{table}')"))
        per_table[table] = {
            "columns": list(conn.execute(f"PRAGMA table_xinfo('{table}')")),
            "indexes": indexes,
            "index_columns": {
                index[1]: list(conn.execute(f"PRAGMA index_xinfo('{index[1]}')"))
                for index in indexes
            },
            "foreign_keys": list(conn.execute(f"PRAGMA foreign_key_list('{table}')")),
        }
    return {"master": master, "tables": per_table}


def rows(conn: apsw.Connection, tables: tuple[str, ...] | None = None) -> dict[str, list]:
    """Every row of the given tables (default: every ordinary table)."""
    if tables is None:
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        )
        tables = tuple(name for (name,) in found)
    return {t: sorted(conn.execute(f"SELECT * FROM '{t}'"), key=repr) for t in tables}


def baseline() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    assert schema.migrate(conn, target=1) == [1]
    return conn


def old() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    old_steps.build(conn)
    assert schema.schema_version(conn) == 15
    return conn


def test_the_baseline_builds_the_schema_the_old_steps_built():
    new, reference = baseline(), old()
    assert schema.schema_version(new) == 1
    ours = shape(new)
    assert ours == shape(reference)
    kinds = [kind for kind, *_ in ours["master"]]
    assert (kinds.count("table"), kinds.count("index"), kinds.count("trigger")) == (20, 22, 3)


def test_the_baseline_inserts_only_its_mark():
    new, reference = baseline(), old()
    ours, theirs = rows(new), rows(reference)
    assert ours["meta"] == [(schema.BASELINE_MARK, "1")] and theirs["meta"] == []
    # The old step 2 rebuilt its then empty index, which writes the index's empty
    # averages record; a new index writes that record on its first insert.
    for name in ("meta", "messages_fts_data"):
        del ours[name], theirs[name]
    assert ours == theirs
    assert all(not table_rows for name, table_rows in ours.items() if name not in FTS_SHADOWS)


def write_the_same(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO sessions (id, started_at) VALUES ('s', 1)")
    for text in ("the blue umbrella", "a red umbrella", "no rain today"):
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp)"
            " VALUES ('s', 'user', ?, 1)",
            (text,),
        )
    conn.execute("UPDATE messages SET content = 'the green umbrella' WHERE id = 1")
    conn.execute("DELETE FROM messages WHERE id = 2")


def test_the_search_index_and_its_triggers_work_as_before():
    new, reference = baseline(), old()
    for conn in (new, reference):
        write_the_same(conn)
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    found = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid"
    assert [r for (r,) in new.execute(found, ("umbrella",))] == [1]
    for word in ("umbrella", "green", "blue", "rain"):
        assert list(new.execute(found, (word,))) == list(reference.execute(found, (word,)))
    assert rows(new, FTS_SHADOWS) == rows(reference, FTS_SHADOWS)


def test_step_2_adds_the_zone_of_cron_jobs_and_nothing_else():
    conn = baseline()
    before = shape(conn)
    conn.execute(
        "INSERT INTO cron_jobs (id, name, schedule, schedule_display, created_at)"
        " VALUES ('j', 'j', 'every:3600', 'every 1h', 1)"
    )
    assert schema.migrate(conn, target=2) == [2]
    assert schema.schema_version(conn) == 2
    after = shape(conn)
    columns = after["tables"]["cron_jobs"].pop("columns")
    assert columns[:-1] == before["tables"]["cron_jobs"].pop("columns")
    assert columns[-1][1:] == ("zone", "TEXT", 0, None, 0, 0)  # nullable, no default
    assert after["tables"] == before["tables"]
    assert conn.execute("SELECT zone FROM cron_jobs WHERE id = 'j'").get is None


def test_step_3_adds_when_a_message_was_undone_and_nothing_else():
    conn = baseline()
    schema.migrate(conn, target=2)
    before = shape(conn)
    conn.execute("INSERT INTO sessions (id) VALUES ('s')")
    conn.execute("INSERT INTO messages (session_id, role, content, timestamp)"
                 " VALUES ('s', 'user', 'hi', 1)")  # fmt: skip
    assert schema.migrate(conn, target=3) == [3]
    after = shape(conn)
    columns = after["tables"]["messages"].pop("columns")
    assert columns[:-1] == before["tables"]["messages"].pop("columns")
    assert columns[-1][1:] == ("undone_at", "REAL", 0, None, 0, 0)  # nullable, no default
    assert after["tables"] == before["tables"]
    assert conn.execute("SELECT undone_at FROM messages").get is None


def test_step_4_adds_approval_requests_and_an_outbox_rows_buttons():
    conn = baseline()
    schema.migrate(conn, target=3)
    before = shape(conn)
    conn.execute("INSERT INTO outbox (platform, chat_id, text, kind, idempotency_key,"
                 " created_at) VALUES ('telegram', 'c', 'hi', 'reply', 'k:0', 1)")  # fmt: skip
    assert schema.migrate(conn, target=4) == [4]
    after = shape(conn)
    assert after["tables"].pop("approvals")["columns"][0][1:3] == ("id", "TEXT")
    columns = after["tables"]["outbox"].pop("columns")
    assert columns[:-1] == before["tables"]["outbox"].pop("columns")
    assert columns[-1][1:] == ("buttons", "TEXT", 0, None, 0, 0)  # nullable, no default
    assert after["tables"] == before["tables"]
    assert conn.execute("SELECT buttons FROM outbox").get is None
    conn.execute("INSERT INTO approvals (id, session_id, command, cwd, matches, reason,"
                 " platform, user_id, owner, created_at, expires_at) VALUES"
                 " ('a', 's', 'sudo x', '/', 'h', 'r', 'telegram', 'u', 'o', 1, 2)")  # fmt: skip
    with pytest.raises(apsw.ConstraintError):
        conn.execute("UPDATE approvals SET state = 'maybe'")


def test_step_5_adds_a_live_outbox_row_and_what_it_shows():
    conn = baseline()
    schema.migrate(conn, target=4)
    before = shape(conn)
    conn.execute("INSERT INTO outbox (platform, chat_id, text, kind, idempotency_key,"
                 " created_at) VALUES ('telegram', 'c', 'hi', 'reply', 'k:0', 1)")  # fmt: skip
    assert schema.migrate(conn, target=5) == [5]
    after = shape(conn)
    columns = after["tables"]["outbox"].pop("columns")
    assert columns[:-2] == before["tables"]["outbox"].pop("columns")
    assert [c[1:] for c in columns[-2:]] == [
        ("live", "INTEGER", 1, "0", 0, 0), ("shown", "TEXT", 0, None, 0, 0)
    ]  # fmt: skip
    assert after["tables"] == before["tables"]
    assert conn.execute("SELECT live, shown FROM outbox").fetchall() == [(0, None)]


def test_step_6_keeps_an_events_title_in_the_journal():
    conn = baseline()
    schema.migrate(conn, target=5)
    before = shape(conn)
    conn.execute("INSERT INTO inbound_journal (platform, event_id, chat_type, chat_id, user_id,"
                 " text, state, received_at) VALUES ('email', '<a@x>', 'dm', 'a@x', 'a@x',"
                 " 'hi', 'answered', 1)")  # fmt: skip
    assert schema.migrate(conn, target=6) == [6]
    after = shape(conn)
    columns = after["tables"]["inbound_journal"].pop("columns")
    assert columns[:-1] == before["tables"]["inbound_journal"].pop("columns")
    assert columns[-1][1:] == ("title", "TEXT", 0, None, 0, 0)  # nullable, no default
    assert after["tables"] == before["tables"]
    assert conn.execute("SELECT title FROM inbound_journal").get is None


def test_step_7_lets_an_outbox_row_carry_a_file():
    conn = baseline()
    schema.migrate(conn, target=6)
    before = shape(conn)
    assert schema.migrate(conn, target=7) == [7]
    after = shape(conn)
    columns = after["tables"]["outbox"].pop("columns")
    assert columns[:-1] == before["tables"]["outbox"].pop("columns")
    assert columns[-1][1:] == ("file", "TEXT", 0, None, 0, 0)  # nullable: most rows are text
    assert after["tables"] == before["tables"]


def test_step_8_marks_untrusted_text_and_carries_a_messages_files():
    conn = baseline()
    schema.migrate(conn, target=7)
    before = shape(conn)
    conn.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'local', 1)")
    conn.execute("INSERT INTO messages (session_id, role, content, timestamp)"
                 " VALUES ('s', 'user', 'hi', 1)")  # fmt: skip
    assert schema.migrate(conn, target=8) == [8]
    after = shape(conn)
    messages = after["tables"]["messages"].pop("columns")
    assert messages[:-2] == before["tables"]["messages"].pop("columns")
    assert [c[1:] for c in messages[-2:]] == [
        ("untrusted", "TEXT", 0, None, 0, 0),
        ("attachments", "TEXT", 0, None, 0, 0),
    ]
    compactions = after["tables"]["compactions"].pop("columns")
    assert compactions[:-1] == before["tables"]["compactions"].pop("columns")
    assert compactions[-1][1:] == ("untrusted", "TEXT", 0, None, 0, 0)
    assert after["tables"] == before["tables"]
    # what was written before the step was an owner's, as before: trusted
    assert conn.execute("SELECT untrusted, attachments FROM messages").fetchall() == [(None, None)]


def test_step_9_keeps_the_skills_a_job_loads():
    conn = baseline()
    schema.migrate(conn, target=8)
    before = shape(conn)
    conn.execute("INSERT INTO cron_jobs (id, name, schedule, schedule_display, created_at)"
                 " VALUES ('j', 'job', 'every:60', 'every 1m', 1)")  # fmt: skip
    assert schema.migrate(conn, target=9) == [9]
    after = shape(conn)
    columns = after["tables"]["cron_jobs"].pop("columns")
    assert columns[:-1] == before["tables"]["cron_jobs"].pop("columns")
    assert columns[-1][1:] == ("skills", "TEXT", 0, None, 0, 0)  # NULL: a job loads none
    assert after["tables"] == before["tables"]
    assert conn.execute("SELECT skills FROM cron_jobs").fetchall() == [(None,)]


def test_step_10_adds_what_conversation_flow_keeps():
    conn = baseline()
    schema.migrate(conn, target=9)
    before = shape(conn)
    conn.execute("INSERT INTO sessions (id) VALUES ('s')")
    assert schema.migrate(conn, target=10) == [10]
    after = shape(conn)
    journal = after["tables"]["inbound_journal"].pop("columns")
    assert journal[:-3] == before["tables"]["inbound_journal"].pop("columns")
    assert [c[1:] for c in journal[-3:]] == [
        ("replied", "INTEGER", 1, "0", 0, 0),
        ("answered_by", "TEXT", 0, None, 0, 0),  # NULL: its own turn answers it
        ("steered", "INTEGER", 1, "0", 0, 0),
    ]
    sessions = after["tables"]["sessions"].pop("columns")
    assert sessions[:-1] == before["tables"]["sessions"].pop("columns")
    assert sessions[-1][1:] == ("busy", "TEXT", 0, None, 0, 0)  # NULL: the platform's mode
    added = {"identities", "link_codes", "attached_sessions"}
    assert set(after["tables"]) - set(before["tables"]) == added
    assert {k: v for k, v in after["tables"].items() if k not in added} == before["tables"]
    assert conn.execute("SELECT busy FROM sessions").fetchall() == [(None,)]


def test_step_11_keeps_a_sessions_todo_list():
    conn = baseline()
    schema.migrate(conn, target=10)
    before = shape(conn)
    conn.execute("INSERT INTO sessions (id) VALUES ('s')")
    assert schema.migrate(conn, target=11) == [11]
    after = shape(conn)
    columns = after["tables"]["sessions"].pop("columns")
    assert columns[:-1] == before["tables"]["sessions"].pop("columns")
    assert columns[-1][1:] == ("todo", "TEXT", 0, None, 0, 0)  # NULL: no list
    assert after["tables"] == before["tables"]


def test_step_12_adds_the_questions_turns_ask():
    conn = baseline()
    schema.migrate(conn, target=11)
    before = shape(conn)
    assert schema.migrate(conn, target=12) == [12]
    after = shape(conn)
    assert set(after["tables"]) - set(before["tables"]) == {"questions"}
    assert {k: v for k, v in after["tables"].items() if k != "questions"} == before["tables"]


def test_step_13_keeps_where_an_events_answer_goes():
    conn = baseline()
    schema.migrate(conn, target=12)
    before = shape(conn)
    assert schema.migrate(conn, target=13) == [13]
    after = shape(conn)
    journal = after["tables"]["inbound_journal"].pop("columns")
    assert journal[:-1] == before["tables"]["inbound_journal"].pop("columns")
    assert journal[-1][1:] == ("answer_to", "TEXT", 0, None, 0, 0)  # NULL: its own chat
    assert after["tables"] == before["tables"]


def test_step_14_keeps_how_an_event_answered_within_its_request_ended():
    conn = baseline()
    schema.migrate(conn, target=13)
    before = shape(conn)
    assert schema.migrate(conn) == [14]
    after = shape(conn)
    journal = after["tables"]["inbound_journal"].pop("columns")
    assert journal[:-2] == before["tables"]["inbound_journal"].pop("columns")
    assert [c[1:] for c in journal[-2:]] == [
        ("ended", "TEXT", 0, None, 0, 0),  # NULL: not kept (another platform's, or older)
        ("answer", "TEXT", 0, None, 0, 0),
    ]
    assert after["tables"] == before["tables"]
