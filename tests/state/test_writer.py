"""The DbWriter: group commit, savepoint isolation, coalesced appends, acknowledgement,
any callable as a write, checkpoints off the commit path, a batch that fails whole."""

from __future__ import annotations

import os
import time

import apsw
import pytest
import trio
import trio.testing

from hermes.actors.errors import ActorStopped
from hermes.state import writer as writer_module
from hermes.state.db import Db
from hermes.state.errors import SessionNotFound
from hermes.state.messages import NewMessage, append_message, messages_of
from hermes.state.registry import resolve
from hermes.state.sessions import NewSession, create_session, get_session, list_sessions
from tests.state.helpers import Gate, count, integrity, plain, writer_of


class Refused(Exception):
    pass


def refuse(conn, text):
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', ?, 0)",
        (text,),
    )
    raise Refused(text)  # after a write: the savepoint must undo it


INSERTS: list[str] = []  # filled in the writer's thread, where the tracer runs


def _note_insert(cursor, sql, bindings):
    if sql.startswith("INSERT INTO messages"):
        INSERTS.append(sql)
    return True


def trace_inserts(conn):
    INSERTS.clear()
    conn.exec_trace = _note_insert


def inserts_traced(conn) -> int:
    return len(INSERTS)


def untrace(conn):
    conn.exec_trace = None


def commit_behind_the_writers_back(conn):
    conn.execute("COMMIT")  # the writer's RELEASE after it then fails: the batch itself fails


def read_back(conn, session_id):
    return [(m.id, m.content) for m in messages_of(conn, session_id)]


async def one_batch(gen, writes: dict[str, tuple]) -> dict[str, object]:
    """Queue `writes` (name: (fn, *args)) behind a batch held at a gate, so they all
    share the next batch; returns each one's value, or the exception it raised."""
    gate = Gate()
    outcomes: dict[str, object] = {}

    async def write(name, fn, *args):
        try:
            outcomes[name] = await gen.write(fn, *args)
        except Exception as exc:
            outcomes[name] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(gen.write, gate.hold)
        await trio.testing.wait_all_tasks_blocked()
        for name, (fn, *args) in writes.items():
            nursery.start_soon(write, name, fn, *args)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    return outcomes


async def test_failing_request_fails_alone_and_batch_commits(registry, db_path):
    async with Db(registry, db_path) as gen:
        await gen.write(create_session, NewSession("s", started_at=time.time()))
        writer = writer_of(registry, db_path).core
        before = writer.batches
        writes = {
            f"ok{i}": (append_message, NewMessage("s", "user", f"m{i}", timestamp=time.time()))
            for i in range(10)
        }
        writes["bad"] = (refuse, "must vanish")
        writes["dup"] = (create_session, NewSession("s", started_at=time.time()))
        outcomes = await one_batch(gen, writes)
        # the gate's batch, then one batch with all twelve
        assert writer.batches - before == 2
        assert isinstance(outcomes["bad"], Refused)
        assert isinstance(outcomes["dup"], apsw.ConstraintError)
        rows = await gen.read(messages_of, "s")
        assert sorted(r.content for r in rows) == sorted(f"m{i}" for i in range(10))
        assert count(db_path, "SELECT count(*) FROM messages WHERE content = 'must vanish'") == 0
        assert (await gen.read(get_session, "s")).message_count == 10


async def test_many_concurrent_writers_share_few_transactions(registry, db_path):
    async with Db(registry, db_path) as gen:
        await gen.write(create_session, NewSession("s", started_at=time.time()))
        writer = writer_of(registry, db_path).core
        before = writer.batches

        async def producer(i):
            for j in range(10):
                await gen.write(
                    append_message, NewMessage("s", "user", f"{i}-{j}", timestamp=time.time())
                )

        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(producer, i)
        transactions = writer.batches - before
        assert count(db_path, "SELECT count(*) FROM messages") == 1000
        assert transactions <= 100, transactions  # 1000 writes; one per transaction would be 1000


async def test_write_is_acknowledged_after_commit(registry, db_path):
    async with Db(registry, db_path) as gen:
        await gen.write(create_session, NewSession("visible", started_at=time.time()))
        # Another connection (another process) sees it the moment the call returns.
        assert count(db_path, "SELECT count(*) FROM sessions WHERE id = 'visible'") == 1


async def test_reads_do_not_wait_behind_the_writer(registry, db_path):
    async with Db(registry, db_path) as gen:
        await gen.write(create_session, NewSession("s", started_at=time.time()))
        gate = Gate()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gen.write, gate.hold)
            await trio.testing.wait_all_tasks_blocked()
            # The writer is stuck inside a batch; a read still answers.
            with trio.fail_after(30):  # the writer holds its batch for ever: never behind it
                assert (await gen.read(get_session, "s")).id == "s"
            gate.set()


async def test_growing_wal_is_reported_once_per_database(registry, db_path, monkeypatch, caplog):
    monkeypatch.setattr(writer_module, "WAL_WARN_BYTES", 1)
    monkeypatch.setattr(writer_module, "_warned_wal", set())
    reader = plain(db_path)
    async with Db(registry, db_path) as gen:
        await gen.write(create_session, NewSession("s", started_at=time.time()))
        writer = writer_of(registry, db_path)
        reader.execute("BEGIN")  # an open read transaction keeps the WAL from being reset
        assert reader.execute("SELECT count(*) FROM sessions").get == 1
        for i in range(3):
            await gen.write(append_message, NewMessage("s", "user", f"m{i}", timestamp=time.time()))
            await writer._checkpoint_in_background()  # what a full WAL or the timer starts
        reader.execute("COMMIT")
    reader.close()
    assert writer.checkpoints == 3
    warnings = [r for r in caplog.records if "the WAL has grown" in r.getMessage()]
    assert len(warnings) == 1


async def test_commits_never_checkpoint_the_background_checkpointer_does(
    registry, db_path, monkeypatch
):
    monkeypatch.setattr(writer_module, "CHECKPOINT_PAGES", 10**9)
    async with Db(registry, db_path) as gen:
        writer = writer_of(registry, db_path)
        await gen.write(create_session, NewSession("s", started_at=time.time()))
        size = os.stat(db_path).st_size
        page = "x" * 4096  # a row of about one page
        for _ in range(20):  # SQLite alone would checkpoint inside one of these commits
            await gen.write(append_message, NewMessage("s", "user", page, timestamp=time.time()))
        assert os.stat(db_path).st_size == size  # every page is still only in the WAL
        assert writer.checkpoints == 0
        monkeypatch.setattr(writer_module, "CHECKPOINT_PAGES", 40)
        await gen.write(append_message, NewMessage("s", "user", page, timestamp=time.time()))
    # the checkpointer ran beside the commits (the release waited for it to finish)
    assert writer.checkpoints == 1
    assert count(db_path, "SELECT count(*) FROM messages") == 21


async def test_appends_queued_together_go_in_as_one_statement(registry, db_path):
    async with Db(registry, db_path) as gen:
        for name in ("a", "b"):
            await gen.write(create_session, NewSession(name, started_at=time.time()))

        async def batch(*appends):
            """Queue `appends` (message, input, output) behind a blocked batch, so they
            and a read-back queued after them share the next one."""
            gate = Gate()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gen.write, gate.hold)
                await trio.testing.wait_all_tasks_blocked()
                slots = [await gen.submit(append_message, message) for message in appends]
                seen = await gen.submit(read_back, "a")
                gate.set()
            outcomes = []
            for slot in slots:
                try:
                    outcomes.append(await slot.result())
                except SessionNotFound as exc:
                    outcomes.append(exc)
            return outcomes, await seen.result()

        await gen.write(trace_inserts)
        ids, seen = await batch(
            *[
                NewMessage(
                    "a", "user", f"a{i}", input_tokens=10, output_tokens=1, timestamp=time.time()
                )
                for i in range(3)
            ],
            NewMessage(
                "b", "assistant", "b0", input_tokens=5, output_tokens=2, timestamp=time.time()
            ),
        )
        assert await gen.write(inserts_traced) == 1  # four messages, one statement
        assert seen == list(zip(ids[:3], ["a0", "a1", "a2"], strict=True))  # in order, before it
        assert await gen.read(read_back, "b") == [(ids[3], "b0")]

        await gen.write(trace_inserts)
        outcomes, seen = await batch(
            NewMessage("a", "user", "a3", input_tokens=1, timestamp=time.time()),
            NewMessage("nobody", "user", "lost", timestamp=time.time()),
            NewMessage("a", "user", "a4", input_tokens=1, timestamp=time.time()),
        )
        traced = await gen.write(inserts_traced)
        await gen.write(untrace)
        assert isinstance(outcomes[1], SessionNotFound)  # the bad one fails alone
        assert [c for _, c in seen] == ["a0", "a1", "a2", "a3", "a4"]
        assert traced == 2  # the three together failed before inserting; then one each
        a = await gen.read(get_session, "a")
        b = await gen.read(get_session, "b")
        assert (a.message_count, a.input_tokens, a.output_tokens) == (5, 32, 3)
        assert (b.message_count, b.input_tokens, b.output_tokens) == (1, 5, 2)


async def test_a_write_is_any_callable_lambdas_and_closures_too(registry, db_path):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("s", started_at=time.time()))
        words = ["kept", "too"]

        def insert_all(conn, session_id, *, role):  # a closure over `words`
            return [
                append_message(conn, NewMessage(session_id, role, w, timestamp=time.time()))
                for w in words
            ]

        ids = await db.write(insert_all, "s", role="user")
        total = await db.write(lambda conn: conn.execute("SELECT count(*) FROM messages").get)
        assert total == 2 and len(ids) == 2
        pending = await db.submit(lambda conn, n: n * 2, 21)
        assert await pending.result() == 42
        assert [m.content for m in await db.read(messages_of, "s")] == words
        assert await db.read(lambda conn, sid: get_session(conn, sid).message_count, "s") == 2


async def test_a_batch_that_fails_as_a_whole_crashes_the_writer_and_the_next_write_reopens(
    registry, db_path
):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("before", started_at=time.time()))
        broken = registry._live[resolve(db_path)]
        with trio.fail_after(10):  # an answer comes: nobody is left waiting
            with pytest.raises(ActorStopped):
                await db.write(commit_behind_the_writers_back)
        await trio.testing.wait_all_tasks_blocked()
        await db.write(create_session, NewSession("after", started_at=time.time()))
        assert registry._live[resolve(db_path)] is not broken and broken.crashed
        names = {s.id for s in await db.read(list_sessions, 10, None)}
    assert names == {"before", "after"}
    assert integrity(db_path) == "ok"
