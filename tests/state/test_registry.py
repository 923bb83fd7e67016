"""The registry and the Db handle: one generation per path, refcounts, replaced files,
failed opens, close_all."""

from __future__ import annotations

import os
import shutil
import time

import pytest
import trio
import trio.testing

from hermes.state.db import Db
from hermes.state.errors import StateError
from hermes.state.messages import NewMessage, append_message
from hermes.state.registry import Registry, resolve
from hermes.state.sessions import NewSession, create_session, get_session
from tests.state.helpers import Gate, count, integrity, plain


async def make_other_db(path) -> None:
    """A complete database file of its own (as a backup would be), closed."""
    reg = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        async with Db(reg, path) as db:
            await db.write(create_session, NewSession("from-backup", started_at=time.time()))
        reg.request_drain(trio.current_time() + 10)
    assert not os.path.exists(f"{path}-wal")


def live(registry: Registry, path):
    """The registry's live generation for `path`, if any (tests look inside)."""
    return registry._live.get(resolve(path))


async def test_two_spellings_share_one_generation(registry, tmp_path):
    real = tmp_path / "data" / "state.db"
    real.parent.mkdir()
    link = tmp_path / "link.db"
    gen_a = await registry.acquire(real)
    link.symlink_to(real)
    gen_b = await registry.acquire(link)
    gen_c = await registry.acquire(tmp_path / "data" / ".." / "data" / "state.db")
    assert gen_a is gen_b is gen_c
    assert gen_a.refs == 3
    assert len(registry.generations()) == 1
    for gen in (gen_a, gen_b, gen_c):
        await registry.release(gen)
    assert registry.generations() == []


async def test_concurrent_acquires_open_once(registry, db_path):
    gens = []

    async def get():
        gens.append(await registry.acquire(db_path))

    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(get)
    assert len({id(g) for g in gens}) == 1
    assert gens[0].refs == 20
    assert len(registry.snapshot().children) == 1  # one writer
    for gen in gens:
        await registry.release(gen)


async def test_release_is_the_only_way_to_let_go(registry, db_path):
    async with Db(registry, db_path) as second:
        async with Db(registry, db_path):
            pass
        # the other holder is unaffected
        await second.write(create_session, NewSession("still-open", started_at=time.time()))
        gen = live(registry, db_path)
    with pytest.raises(StateError, match="released more often"):
        await registry.release(gen)
    # the final release checkpointed and closed: no WAL left behind
    assert not os.path.exists(f"{db_path}-wal")
    assert count(db_path, "SELECT count(*) FROM sessions") == 1


async def test_mv_over_live_file_retires_generation(registry, tmp_path, db_path):
    old = await registry.acquire(db_path)
    old_too = await registry.acquire(db_path)
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("before", started_at=time.time()))
        os.link(db_path, tmp_path / "old-inode.db")  # keep the old file reachable
        await make_other_db(tmp_path / "backup.db")
        os.rename(tmp_path / "backup.db", db_path)
        old_stat = os.stat(tmp_path / "old-inode.db")

        await db.write(
            create_session, NewSession("after", started_at=time.time())
        )  # retried once on the new file
        assert old.retired is not None and "moved into its place" in old.retired
        new = live(registry, db_path)
        assert new is not old and new.usable
        assert (await db.read(get_session, "from-backup")) is not None
        # the old generation stays retired for every holder of it: never lent again
        assert old_too is old and not old.usable
        await db.write(create_session, NewSession("after-2", started_at=time.time()))
    await registry.release(old)
    await registry.release(old_too)

    ids = {r[0] for r in _rows(db_path, "SELECT id FROM sessions")}
    assert ids == {"from-backup", "after", "after-2"}
    assert integrity(db_path) == "ok"
    after = os.stat(tmp_path / "old-inode.db")
    assert (after.st_size, after.st_mtime_ns) == (old_stat.st_size, old_stat.st_mtime_ns)


async def test_cp_over_same_inode_is_caught_by_the_stamp(registry, tmp_path, db_path):
    async with Db(registry, db_path) as db:
        for i in range(50):
            await db.write(create_session, NewSession(f"old-{i}", started_at=time.time()))
        first = live(registry, db_path)
        inode = os.stat(db_path).st_ino
        await make_other_db(tmp_path / "backup.db")
        shutil.copyfile(tmp_path / "backup.db", db_path)
        assert os.stat(db_path).st_ino == inode

        await db.write(create_session, NewSession("after", started_at=time.time()))
        assert first.retired is not None and "overwritten by another database" in first.retired
    ids = {r[0] for r in _rows(db_path, "SELECT id FROM sessions")}
    assert ids == {"from-backup", "after"}  # none of the old generation's pages leaked in
    assert integrity(db_path) == "ok"


async def test_holder_carries_on_into_the_replacement(registry, tmp_path, db_path):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("one", started_at=time.time()))
        first = live(registry, db_path)
        await make_other_db(tmp_path / "backup.db")
        os.rename(tmp_path / "backup.db", db_path)
        await db.write(
            create_session, NewSession("two", started_at=time.time())
        )  # retried once on the new file
        assert live(registry, db_path) is not first
        assert first.retired is not None
        assert (await db.read(get_session, "from-backup")) is not None
    ids = {r[0] for r in _rows(db_path, "SELECT id FROM sessions")}
    assert ids == {"from-backup", "two"}
    assert registry.generations() == []


async def test_a_read_moves_to_the_replacement_too(registry, tmp_path, db_path):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("one", started_at=time.time()))
        await make_other_db(tmp_path / "backup.db")
        os.rename(tmp_path / "backup.db", db_path)
        live(registry, db_path).mark_retired("test: replaced")  # as the writer would
        assert (await db.read(get_session, "from-backup")) is not None


async def test_submitted_writes_commit_in_order_in_one_batch(registry, db_path):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("s", started_at=time.time()))
        core = live(registry, db_path).actor.core
        gate = Gate()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(db.write, gate.hold)  # the writer is busy with a batch
            await trio.testing.wait_all_tasks_blocked()
            before = core.batches
            first = await db.submit(
                append_message, NewMessage("s", "user", "question", timestamp=time.time())
            )
            second = await db.submit(
                append_message, NewMessage("s", "assistant", "answer", timestamp=time.time())
            )
            gate.set()
        assert await second.result() > await first.result()  # row ids in queue order
        assert core.batches - before == 2  # the busy batch, then both together
    rows = _rows(db_path, "SELECT role, content FROM messages ORDER BY id")
    assert rows == [("user", "question"), ("assistant", "answer")]


async def test_a_submitted_write_is_retried_once_in_the_replacement(registry, tmp_path, db_path):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("one", started_at=time.time()))
        await make_other_db(tmp_path / "backup.db")
        os.rename(tmp_path / "backup.db", db_path)
        pending = await db.submit(
            create_session, NewSession("two", started_at=time.time())
        )  # queued to the old file
        await pending.result()
    ids = {r[0] for r in _rows(db_path, "SELECT id FROM sessions")}
    assert ids == {"from-backup", "two"}


async def test_failed_open_of_replacement_leaves_no_entry(registry, tmp_path, db_path):
    async with Db(registry, db_path) as db:
        await db.write(create_session, NewSession("x", started_at=time.time()))
        (tmp_path / "garbage").write_bytes(b"this is not a database, not at all" * 100)
        os.rename(tmp_path / "garbage", db_path)
        with pytest.raises(StateError, match="cannot open the database"):
            await db.write(create_session, NewSession("y", started_at=time.time()))
        with pytest.raises(StateError, match="cannot open the database"):
            await registry.acquire(db_path)
        assert live(registry, db_path) is None
    os.unlink(db_path)
    async with Db(registry, db_path) as fresh:  # tried again from scratch
        await fresh.write(create_session, NewSession("z", started_at=time.time()))
    assert count(db_path, "SELECT count(*) FROM sessions") == 1


async def test_close_all_drains_live_and_retired_generations(tmp_path):
    reg = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        a = await reg.acquire(tmp_path / "a.db")
        b = await reg.acquire(tmp_path / "b.db")
        async with Db(reg, tmp_path / "a.db") as db_a, Db(reg, tmp_path / "b.db") as db_b:
            await db_a.write(create_session, NewSession("a", started_at=time.time()))
            await db_b.write(create_session, NewSession("b", started_at=time.time()))
        await make_other_db(tmp_path / "backup.db")
        os.rename(tmp_path / "backup.db", tmp_path / "b.db")
        async with Db(reg, tmp_path / "b.db") as db_b:
            await db_b.write(
                create_session, NewSession("b2", started_at=time.time())
            )  # retires b, opens the new
        assert b.retired is not None and b.refs == 1  # retired, still held
        await reg.close_all()
        assert reg.generations() == []
        assert a.stopped.is_set() and b.stopped.is_set()  # each writer closed its file
        reg.request_drain(trio.current_time() + 5)
    assert not os.path.exists(tmp_path / "a.db-wal")
    assert count(tmp_path / "a.db", "SELECT count(*) FROM sessions") == 1


async def test_keep_open_paths_are_open_before_ready(tmp_path):
    reg = Registry(keep_open=[tmp_path / "state.db"])
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        assert live(reg, tmp_path / "state.db") is not None
        reg.request_drain(trio.current_time() + 5)
    assert count(tmp_path / "state.db", "PRAGMA user_version") >= 1


def _rows(path, sql):
    conn = plain(path)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()
