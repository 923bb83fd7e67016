"""`hermes sessions ...` and `hermes db ...` against a real state.db."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import pytest
import trio

from hermes.state.approvals import NewApproval, open_approval
from hermes.state.db import Db
from hermes.state.maintenance import open_plain
from hermes.state.messages import NewMessage, append_message, append_messages, undo_last
from hermes.state.registry import Registry
from hermes.state.schema import SCHEMA_VERSION, immediate
from hermes.state.sessions import NewSession, create_session, ensure_session, set_title
from tests.processes import hermes
from tests.seed import rows, writing


async def fill(home) -> None:
    reg = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        async with Db(reg, home.state_db) as gen:
            await gen.write(
                create_session,
                NewSession("s-trip", source="telegram", chat_id="7", started_at=time.time()),
            )
            await gen.write(set_title, "s-trip", "Planning Lisbon", "user")
            await gen.write(
                append_messages,
                [
                    NewMessage("s-trip", "user", "book a hotel in Lisbon", timestamp=time.time()),
                    NewMessage(
                        "s-trip",
                        "assistant",
                        "Found three hotels in Lisbon.",
                        timestamp=time.time(),
                    ),
                ],
            )
            await gen.write(
                append_messages,
                [
                    NewMessage("s-trip", "user", "and a car", timestamp=time.time()),
                    NewMessage("s-trip", "assistant", "Two cars.", timestamp=time.time()),
                ],
            )
            await gen.write(undo_last, "s-trip", time.time())  # /undo: marked, kept
            await gen.write(create_session, NewSession("s-other", started_at=time.time()))
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
    assert "user: book a hotel" in shown and "user (undone): and a car" in shown
    found = hermes("sessions", "search", "hotels").stdout
    assert "s-trip" in found and "[hotels]" in found
    data = json.loads(hermes("sessions", "export", "s-trip").stdout)
    assert data["session"]["title"] == "Planning Lisbon"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"] * 2
    assert [m["undone_at"] is not None for m in data["messages"]] == [False, False, True, True]
    md = hermes("sessions", "export", "s-trip", "--format", "md").stdout
    assert md.startswith("# Planning Lisbon") and "## assistant" in md
    assert md.count(" · undone ") == 2
    missing = hermes("sessions", "show", "nope")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr
    assert missing.stdout == ""
    bad = hermes("sessions", "search", '"unbalanced')
    assert bad.returncode == 2 and "cannot search" in bad.stderr  # a bad request: usage
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
        assert conn.execute("SELECT count(*) FROM messages").get == 4
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
    assert "messages: 4" in stats and "sessions: 2" in stats


@pytest.fixture(params=["no home", "empty home"])
def fresh_home(request, tmp_path, monkeypatch) -> Path:
    """A HERMES_HOME where serve never ran: the directory is missing, or empty."""
    root = tmp_path / "never-served"
    if request.param == "empty home":
        root.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(root))
    return root


def contents(root: Path) -> list[str] | None:
    """What is in the home (None: not even the directory), to show nothing was created."""
    return sorted(os.listdir(root)) if root.exists() else None


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["sessions", "list"], "no sessions (no state.db yet: hermes serve creates it)"),
        (["sessions", "search", "hotels"], "no matches (no state.db yet: hermes serve creates it)"),
        (["sessions", "search", "--tools", '"unbalanced'], "no matches (no state.db yet"),
        (["db", "stats"], "sessions: 0\nlive_sessions: 0\nmessages: 0"),
    ],
)
def test_reads_on_a_fresh_home_are_empty_and_create_nothing(fresh_home, command, shown):
    before = contents(fresh_home)
    result = hermes(*command)
    assert result.returncode == 0, result.stderr
    assert shown in result.stdout
    assert "no state.db yet" in result.stdout
    assert result.stderr == ""
    assert contents(fresh_home) == before


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["sessions", "show", "s-1"], "hermes: no session 's-1'"),
        (["sessions", "export", "s-1", "--format", "md"], "hermes: no session 's-1'"),
        (["db", "check"], "no database at {home}/state.db"),
        (["db", "backup", "{tmp}/copy.db"], "no database at {home}/state.db"),
        (["db", "checkpoint"], "no database at {home}/state.db"),
        (["db", "checkpoint", "--truncate"], "no database at {home}/state.db"),
    ],
)
def test_the_rest_on_a_fresh_home_fail_in_one_line_and_create_nothing(
    fresh_home, tmp_path, command, message
):
    before = contents(fresh_home)
    result = hermes(*(arg.format(tmp=tmp_path) for arg in command))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert message.format(home=fresh_home) in result.stderr
    assert contents(fresh_home) == before
    assert not (tmp_path / "copy.db").exists()


def test_db_check_reports_a_newer_schema_as_not_ok(home):
    with writing(home.state_db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    result = hermes("db", "check")
    assert result.returncode == 1
    assert f"schema_version: {SCHEMA_VERSION + 1}" in result.stdout


class Acks:
    """Reads a load writer's output as it comes, so its pipe never fills and stalls it."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        for line in proc.stdout:
            self.lines.append(line.strip())

    def join(self) -> list[str]:
        self._thread.join()
        return self.lines


def test_db_backup_is_consistent_while_writes_continue(home, tmp_path):
    producers, writes = 4, 4000
    total = producers * writes
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.state.load_writer", str(home.state_db), "w"]
        + [str(producers), str(writes)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().startswith("ack w-")  # the file exists, writes go on
        acks = Acks(writer)
        acked_before = len(acks.lines) + 1
        copy = tmp_path / "copy.db"
        result = hermes("db", "backup", str(copy))
        still_writing = writer.poll() is None
        assert writer.wait(timeout=60) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    lines = acks.join()
    assert result.returncode == 0, result.stderr
    assert still_writing, "the writer finished before the backup did; give it more to write"
    assert len(lines) == total and lines[-1] == "done"
    conn = apsw.Connection(str(copy))
    try:
        assert conn.execute("PRAGMA integrity_check").get == "ok"
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
        copied = conn.execute("SELECT count(*) FROM messages").get
        assert acked_before <= copied <= total
        orphans = "SELECT count(*) FROM messages WHERE session_id NOT IN (SELECT id FROM sessions)"
        assert conn.execute(orphans).get == 0
        # a session's counter moves in the same transaction as its message: one snapshot
        assert conn.execute("SELECT message_count FROM sessions WHERE id = 'load'").get == copied
    finally:
        conn.close()


def test_db_checkpoint_truncate_empties_the_wal(home):
    with writing(home.state_db):
        pass  # the file, migrated
    conn = open_plain(home.state_db, readonly=False)  # stays open: the CLI's is not the last
    try:
        with immediate(conn):
            ensure_session(conn, NewSession("s-wal", started_at=time.time()))
            for n in range(50):
                message = NewMessage("s-wal", "user", f"message {n}", timestamp=time.time())
                append_message(conn, message)
        wal = Path(f"{home.state_db}-wal")
        assert wal.stat().st_size > 0
        result = hermes("db", "checkpoint", "--truncate")
        assert result.returncode == 0, result.stderr
        assert wal.stat().st_size == 0
        assert conn.execute("SELECT count(*) FROM messages").get == 50
    finally:
        conn.close()


def test_approvals_without_a_serve_are_listed_and_never_decided(home):
    """No turn waits without a serve: a yes would record something that never ran."""
    with writing(home.state_db) as conn:
        asked = NewApproval("s-1", "sudo reboot-ish", "sudo reboot-ish", "/srv", "sudo",
                            "telegram", "7", "7", "Ann", "elsewhere:1:x", 300)  # fmt: skip
        request_id = open_approval(conn, asked, time.time()).id
    listed = hermes("approvals")
    assert listed.returncode == 0 and request_id in listed.stdout
    assert "Ann (telegram 7)" in listed.stdout and "sudo reboot-ish (/srv)" in listed.stdout
    refused = hermes("approvals", "approve", request_id, "--always")
    assert refused.returncode == 2 and "no turn waits for request" in refused.stderr
    missing = hermes("approvals", "deny", "nope")
    assert missing.returncode == 1 and "no approval request 'nope'" in missing.stderr
    assert rows(home.state_db, "SELECT state FROM approvals") == [("pending",)]
