"""`hermes sessions ...` and `hermes db ...` against a real state.db."""

from __future__ import annotations

import json
import os

import apsw
import pytest
import trio

from hermes.state.db import Db
from hermes.state.messages import NewMessage, append_messages
from hermes.state.registry import Registry
from hermes.state.sessions import NewSession, create_session, set_title
from tests.processes import hermes


async def fill(home) -> None:
    reg = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        async with Db(reg, home.state_db) as gen:
            await gen.write(create_session, NewSession("s-trip", source="telegram", chat_id="7"))
            await gen.write(set_title, "s-trip", "Planning Lisbon", "user")
            await gen.write(
                append_messages,
                [
                    NewMessage("s-trip", "user", "book a hotel in Lisbon"),
                    NewMessage("s-trip", "assistant", "Found three hotels in Lisbon."),
                ],
            )
            await gen.write(create_session, NewSession("s-other"))
        reg.request_drain(trio.current_time() + 10)


@pytest.fixture
def filled(home):
    trio.run(fill, home)  # a sync fixture: the tests below run the CLI as subprocesses
    return home


def test_sessions_list_show_search_export(filled):
    out = hermes("sessions", "list").stdout
    assert "s-trip" in out and "Planning Lisbon" in out and "s-other" in out
    shown = hermes("sessions", "show", "s-trip").stdout
    assert "book a hotel in Lisbon" in shown and "chat_id: 7" in shown
    found = hermes("sessions", "search", "hotels").stdout
    assert "s-trip" in found and "[hotels]" in found
    data = json.loads(hermes("sessions", "export", "s-trip").stdout)
    assert data["session"]["title"] == "Planning Lisbon"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    md = hermes("sessions", "export", "s-trip", "--format", "md").stdout
    assert md.startswith("# Planning Lisbon") and "## assistant" in md
    missing = hermes("sessions", "show", "nope")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stdout
    bad = hermes("sessions", "search", '"unbalanced')
    assert bad.returncode == 1 and "cannot search" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_db_check_backup_checkpoint_stats(filled, tmp_path):
    check = hermes("db", "check")
    assert check.returncode == 0
    assert "integrity_check: ok" in check.stdout
    backup = tmp_path / "backup.db"
    result = hermes("db", "backup", str(backup))
    assert result.returncode == 0, result.stderr
    conn = apsw.Connection(str(backup))
    try:
        assert conn.execute("SELECT count(*) FROM messages").get == 2
        source = apsw.Connection(str(filled.state_db))
        # the copy has a stamp of its own, so restoring it under a live serve is noticed
        assert (
            conn.execute("PRAGMA application_id").get != source.execute("PRAGMA application_id").get
        )
        source.close()
    finally:
        conn.close()
    again = hermes("db", "backup", str(backup))
    assert again.returncode == 1 and "already exists" in again.stderr
    assert "TRUNCATE checkpoint" in hermes("db", "checkpoint", "--truncate").stdout
    stats = hermes("db", "stats").stdout
    assert "messages: 2" in stats and "sessions: 2" in stats


def test_db_commands_on_a_missing_database(home):
    os.environ["HERMES_HOME"] = str(home.root)
    result = hermes("db", "check")
    assert result.returncode == 1
    assert "no database at" in result.stderr
