"""The DbWriter: group commit, savepoint isolation, token deltas, acknowledgement."""

from __future__ import annotations

import os
import signal
import sys
import types

import apsw
import pytest
import trio
import trio.testing

from hermes.actors.errors import ActorStopped
from hermes.state import writer as writer_module
from hermes.state.errors import SessionNotFound, StateError
from hermes.state.holder import DbHolder
from hermes.state.messages import NewMessage, append_message, messages_of
from hermes.state.sessions import NewSession, create_session, get_session, list_sessions
from hermes.state.writer import Unsendable
from hermes.state.writer_core import Checkpoint
from tests.state.helpers import Gate, count, integrity, plain, wait_at_gate, writer_of


class Refused(Exception):
    pass


def refuse(conn, text):
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', ?, 0)",
        (text,),
    )
    raise Refused(text)  # after a write: the savepoint must undo it


def count_updates(conn):
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS token_updates (n INTEGER)")
    conn.execute(
        "CREATE TEMP TRIGGER IF NOT EXISTS count_token_updates"
        " AFTER UPDATE OF input_tokens ON sessions"
        " BEGIN INSERT INTO token_updates VALUES (1); END"
    )


def updates(conn):
    return conn.execute("SELECT count(*) FROM temp.token_updates").get


INSERTS: list[str] = []  # filled in the writer's process, where the tracer runs


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


async def one_batch(gen, gate_dir, writes: dict[str, tuple]) -> dict[str, object]:
    """Queue `writes` (name: (fn, *args)) behind a batch held at a gate, so they all
    share the next batch; returns each one's value, or the exception it raised."""
    gate = Gate(gate_dir)
    outcomes: dict[str, object] = {}

    async def write(name, fn, *args):
        try:
            outcomes[name] = await gen.write(fn, *args)
        except Exception as exc:
            outcomes[name] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(gen.write, wait_at_gate, gate.path)
        await trio.testing.wait_all_tasks_blocked()
        for name, (fn, *args) in writes.items():
            nursery.start_soon(write, name, fn, *args)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    return outcomes


async def test_failing_request_fails_alone_and_batch_commits(registry, db_path):
    gen = await registry.acquire(db_path)
    await gen.write(create_session, NewSession("s"))
    writer = writer_of(registry, gen)
    before = writer.batches
    writes = {f"ok{i}": (append_message, NewMessage("s", "user", f"m{i}")) for i in range(10)}
    writes["bad"] = (refuse, "must vanish")
    writes["dup"] = (create_session, NewSession("s"))
    outcomes = await one_batch(gen, db_path.parent, writes)
    # the gate's batch, then one batch with all twelve
    assert writer.batches - before == 2
    assert isinstance(outcomes["bad"], Refused)
    assert isinstance(outcomes["dup"], apsw.ConstraintError)
    rows = await gen.read(messages_of, "s")
    assert sorted(r.content for r in rows) == sorted(f"m{i}" for i in range(10))
    assert count(db_path, "SELECT count(*) FROM messages WHERE content = 'must vanish'") == 0
    assert (await gen.read(get_session, "s")).message_count == 10
    await registry.release(gen)


async def test_many_concurrent_writers_share_few_transactions(registry, db_path):
    gen = await registry.acquire(db_path)
    await gen.write(create_session, NewSession("s"))
    writer = writer_of(registry, gen)
    before = writer.batches

    async def producer(i):
        for j in range(10):
            await gen.write(append_message, NewMessage("s", "user", f"{i}-{j}"))

    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(producer, i)
    transactions = writer.batches - before
    assert count(db_path, "SELECT count(*) FROM messages") == 1000
    assert transactions <= 100, transactions  # 1000 writes; one per transaction would be 1000
    await registry.release(gen)


async def test_token_deltas_merge_into_one_update_per_session(registry, db_path):
    gen = await registry.acquire(db_path)
    for sid in ("a", "b"):
        await gen.write(create_session, NewSession(sid))

    await gen.write(count_updates)
    gate = Gate(db_path.parent)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gen.write, wait_at_gate, gate.path)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(20):
            nursery.start_soon(gen.add_tokens, "a", 10, 1)
            nursery.start_soon(gen.add_tokens, "b", 5, 2)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert await gen.write(updates) == 2  # one per session, not forty
    a = await gen.read(get_session, "a")
    b = await gen.read(get_session, "b")
    assert (a.input_tokens, a.output_tokens) == (200, 20)
    assert (b.input_tokens, b.output_tokens) == (100, 40)
    await registry.release(gen)


async def test_write_is_acknowledged_after_commit(registry, db_path):
    gen = await registry.acquire(db_path)
    await gen.write(create_session, NewSession("visible"))
    # Another connection (another process) sees it the moment the call returns.
    assert count(db_path, "SELECT count(*) FROM sessions WHERE id = 'visible'") == 1
    await registry.release(gen)


async def test_reads_do_not_wait_behind_the_writer(registry, db_path):
    gen = await registry.acquire(db_path)
    await gen.write(create_session, NewSession("s"))
    gate = Gate(db_path.parent)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gen.write, wait_at_gate, gate.path)
        await trio.testing.wait_all_tasks_blocked()
        # The writer is stuck inside a batch; a read still answers.
        with trio.fail_after(5):
            assert (await gen.read(get_session, "s")).id == "s"
        gate.set()
    await registry.release(gen)


async def test_growing_wal_is_reported_once_per_database(registry, db_path, monkeypatch, caplog):
    monkeypatch.setattr(writer_module, "WAL_WARN_BYTES", 1)
    monkeypatch.setattr(writer_module, "_warned_wal", set())
    gen = await registry.acquire(db_path)
    await gen.write(create_session, NewSession("s"))
    reader = plain(db_path)  # an open read transaction keeps the WAL from being reset
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM sessions").get == 1
    for i in range(3):
        await gen.write(append_message, NewMessage("s", "user", f"m{i}"))
        await gen.writer.call(Checkpoint())
    reader.execute("COMMIT")
    reader.close()
    warnings = [r for r in caplog.records if "the WAL has grown" in r.getMessage()]
    assert len(warnings) == 1
    await registry.release(gen)


async def test_commits_never_checkpoint_the_background_checkpointer_does(
    registry, db_path, monkeypatch
):
    monkeypatch.setattr(writer_module, "CHECKPOINT_PAGES", 10**9)
    gen = await registry.acquire(db_path)
    writer = writer_of(registry, gen)
    await gen.write(create_session, NewSession("s"))
    size = os.stat(db_path).st_size
    page = "x" * 4096  # a row of about one page
    for _ in range(20):  # SQLite alone would checkpoint inside one of these commits
        await gen.write(append_message, NewMessage("s", "user", page))
    assert os.stat(db_path).st_size == size  # every page is still only in the WAL
    monkeypatch.setattr(writer_module, "CHECKPOINT_PAGES", 40)
    await gen.write(append_message, NewMessage("s", "user", page))
    await writer.wait_checkpoint()
    # the checkpointer copied the pages into the database file, beside the commits
    assert os.stat(db_path).st_size > size + 20 * 4096
    assert writer.checkpoints == 1
    assert count(db_path, "SELECT count(*) FROM messages") == 21
    await registry.release(gen)


async def test_appends_queued_together_go_in_as_one_statement(registry, db_path):
    gen = await registry.acquire(db_path)
    for name in ("a", "b"):
        await gen.write(create_session, NewSession(name))

    async def batch(*appends):
        """Queue `appends` (message, input, output) behind a blocked batch, so they
        and a read-back queued after them share the next one."""
        gate = Gate(db_path.parent)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gen.write, wait_at_gate, gate.path)
            await trio.testing.wait_all_tasks_blocked()
            slots = [await gen.append(*args) for args in appends]
            seen = await gen.submit(read_back, "a")
            gate.set()
        outcomes = []
        for slot in slots:
            try:
                outcomes.append(await slot.wait())
            except SessionNotFound as exc:
                outcomes.append(exc)
        return outcomes, await seen.wait()

    await gen.write(trace_inserts)
    ids, seen = await batch(
        *[(NewMessage("a", "user", f"a{i}"), 10, 1) for i in range(3)],
        (NewMessage("b", "assistant", "b0"), 5, 2),
    )
    assert await gen.write(inserts_traced) == 1  # four messages, one statement
    assert seen == list(zip(ids[:3], ["a0", "a1", "a2"], strict=True))  # in order, before it
    assert await gen.read(read_back, "b") == [(ids[3], "b0")]

    await gen.write(trace_inserts)
    outcomes, seen = await batch(
        (NewMessage("a", "user", "a3"), 1, 0),
        (NewMessage("nobody", "user", "lost"), 0, 0),
        (NewMessage("a", "user", "a4"), 1, 0),
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
    await registry.release(gen)


async def test_a_write_that_cannot_reach_the_writers_process_fails_alone(registry, db_path):
    gen = await registry.acquire(db_path)
    await gen.write(create_session, NewSession("s"))
    outcomes = await one_batch(gen, db_path.parent, {
        "ok": (append_message, NewMessage("s", "user", "kept")),
        "lambda": (lambda conn: 1,),
    })  # fmt: skip
    assert isinstance(outcomes["lambda"], Unsendable)
    assert "importable module" in str(outcomes["lambda"])
    assert isinstance(outcomes["ok"], int)
    assert [m.content for m in await gen.read(messages_of, "s")] == ["kept"]
    await gen.write(create_session, NewSession("after"))  # the writer lives on
    await registry.release(gen)


async def test_a_writer_whose_process_dies_is_replaced_at_the_next_write(registry, db_path):
    async with DbHolder(registry, db_path) as db:
        await db.write(create_session, NewSession("before"))
        dead = db.gen
        process = writer_of(registry, dead)._process
        process.kill()
        await process.wait()
        await trio.testing.wait_all_tasks_blocked()  # the actor has seen its process go
        await db.write(create_session, NewSession("after"))  # a new generation, a new process
        assert db.gen is not dead and dead.crashed
        assert writer_of(registry, db.gen)._process.pid != process.pid
        names = {s.id for s in await db.read(list_sessions, 10, None)}
    assert names == {"before", "after"}
    assert integrity(db_path) == "ok"


async def test_a_write_the_writers_process_cannot_load_fails_alone(registry, db_path):
    # A module that exists only in this process: its functions pickle by name here,
    # and the writer's process cannot import it.
    only_here = types.ModuleType("only_in_the_test_process")
    exec("def touch(conn):\n    return 1\n", only_here.__dict__)
    sys.modules[only_here.__name__] = only_here
    try:
        gen = await registry.acquire(db_path)
        await gen.write(create_session, NewSession("s"))
        outcomes = await one_batch(gen, db_path.parent, {
            "ok": (append_message, NewMessage("s", "user", "kept")),
            "foreign": (only_here.touch,),
        })  # fmt: skip
        assert isinstance(outcomes["foreign"], StateError)
        assert "cannot load this request" in str(outcomes["foreign"])
        assert isinstance(outcomes["ok"], int)
        await registry.release(gen)
    finally:
        del sys.modules[only_here.__name__]


async def test_the_writers_process_leaves_signals_to_its_parent(registry, db_path):
    # A Ctrl-C or a service manager's SIGTERM to the whole group must not take the
    # writer away before serve's drain has flushed through it.
    gen = await registry.acquire(db_path)
    process = writer_of(registry, gen)._process
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGTERM)
    await gen.write(create_session, NewSession("still-here"))
    assert process.returncode is None
    assert os.getsid(process.pid) == process.pid  # not in serve's session
    await registry.release(gen)
    assert process.returncode == 0


async def test_a_batch_that_fails_as_a_whole_crashes_the_writer_and_the_next_write_reopens(
    registry, db_path
):
    async with DbHolder(registry, db_path) as db:
        await db.write(create_session, NewSession("before"))
        broken = db.gen
        with trio.fail_after(10):  # an answer comes: nobody is left waiting
            with pytest.raises(ActorStopped):
                await db.write(commit_behind_the_writers_back)
        await trio.testing.wait_all_tasks_blocked()
        await db.write(create_session, NewSession("after"))
        assert db.gen is not broken and broken.crashed
        names = {s.id for s in await db.read(list_sessions, 10, None)}
    assert names == {"before", "after"}
    assert integrity(db_path) == "ok"
